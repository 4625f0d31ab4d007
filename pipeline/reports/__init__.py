"""What a run tells its user: report.json (`report`), report.html (`html_report`, its charts in `svg`,
samples of kept and dropped pages in `explore`), the live progress line (`progress`), resources
measured against the plan (`resources`) and the headless browser that screenshots the page (`browser`)."""
