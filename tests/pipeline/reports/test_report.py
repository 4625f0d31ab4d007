"""The conservation check itself: it must fail when a document goes missing."""
from pipeline.reports.report import build_report, format_funnel

STAGES = ["warc", "extract", "langid"]
COUNTERS = {"warc.in": 10, "warc.kept": 9, "warc.drop.non_html": 1, "extract.in": 9, "extract.kept": 8,
            "extract.drop.no_text": 1, "langid.in": 8, "langid.kept": 7, "langid.drop.lang_below_threshold": 1,
            "warc.record.response": 10, "warc.record.request": 10}
LEDGER = {("warc", "non_html"): 1, ("extract", "no_text"): 1, ("langid", "lang_below_threshold"): 1}


def report(counters=COUNTERS, kept=7, ledger=LEDGER, held_out=0, records_read=10):
    return build_report(stages=STAGES, beam_counters=counters, shard_rows={"s0": kept}, held_out=held_out,
                        ledger_rows={"l0": sum(ledger.values())}, ledger_reasons=ledger, languages={"en": kept},
                        records_read=records_read, config={}, runner="FnApiRunner", elapsed_s=1.0)


def test_consistent_run_holds():
    r = report()
    assert r["conservation"] == {"read": 10, "kept": 7, "held_out": 0, "ledger": 3, "holds": True,
                                 "read_from": "input files (prepared parts' markers)", "counters": "cross-checked"}
    assert "conservation holds: read 10 = kept 7 + ledger 3" in format_funnel(r)
    # documents held out for validation (valid/) are neither kept for training nor dropped
    split = report(kept=5, held_out=2)
    assert split["conservation"]["holds"] and "read 10 = kept 5 + held out 2 (valid/) + ledger 3" in format_funnel(split)
    assert report(kept=5, held_out=1)["conservation"]["holds"] is False
    assert r["warc_records_by_type"] == {"request": 10, "response": 10}


def test_a_lost_document_breaks_conservation():
    r = report(kept=6)
    assert r["conservation"]["holds"] is False
    assert "BROKEN" in format_funnel(r)


def test_ledger_rows_that_disagree_with_counters_break_it():
    r = report(ledger={("warc", "non_html"): 1, ("extract", "no_text"): 2}, kept=7)
    assert r["conservation"]["holds"] is False
    assert r["funnel"][1]["counters_agree_with_ledger"] is False


def test_a_runner_without_metrics_is_checked_from_the_files_alone():
    """The portable runner sometimes delivers no metrics: conservation then comes from the markers' record counts
    and the files (and still breaks when a document is lost), and the funnel from the ledger's drops."""
    r = report(counters=None)
    assert r["conservation"]["holds"] is True and r["metrics_available"] is False
    assert [(f["stage"], f["in"], f["kept"], f["dropped"]) for f in r["funnel"]] == \
        [("warc", 10, 9, 1), ("extract", 9, 8, 1), ("langid", 8, 7, 1)]
    assert "holds (from the files; the runner delivered no metrics to cross-check)" in format_funnel(r)
    assert report(counters=None, kept=6)["conservation"]["holds"] is False
    assert report(counters=None, records_read=None)["conservation"]["holds"] is None  # nothing to prove it with


def test_counters_that_disagree_with_the_files_break_it():
    assert report(records_read=11)["conservation"]["holds"] is False


def test_the_terminal_summary_says_how_the_mix_and_the_plan_came_out():
    r = report()
    r["mix"] = {"requested": {"web": 0.7, "code": 0.3}, "achieved": {"web": 0.69, "code": 0.31}, "max_epochs": 4,
                "capped_sources": ["code"]}
    r["plan"] = {"file": "plan.json", "measured_over_predicted": {"cpu_hours": 1.2, "records": 1.0, "output_bytes": None}}
    text = format_funnel(r)
    assert "mix (token shares): web 0.690 (asked 0.700), code 0.310 (asked 0.300); out of reach: code" in text
    assert "plan plan.json: measured / predicted cpu_hours 1.2, records 1.0" in text


def test_charts_keep_their_labels_inside_and_draw_drops_in_the_dropped_colour():
    """report.html's charts (issue 54): the label column fits the longest label shown (gopher_too_few_words was cut
    at the left), the axis' end labels stay inside the picture, and drops are drawn in the funnel's red."""
    import re

    from pipeline.reports import svg

    chart = svg.bars([("gopher_too_few_words", [12]), ("lang_below_threshold", [9])], ["dropped"], "Dropped by reason",
                     "docs", colors=svg.PALETTE[1:2])
    label_x = float(re.search(r'<text x="([\d.]+)" y="\d+" text-anchor="end"><title>gopher', chart).group(1))
    assert label_x >= svg.CHAR_W * len("gopher_too_few_words")  # the whole label right-aligned before the bars
    assert f'fill="{svg.PALETTE[1]}"' in chart and f'fill="{svg.PALETTE[0]}"' not in chart
    hist = svg.histogram({"kept": [0.0, 0.1, 0.47]}, "measured value", "share", threshold=0.4, width=560)
    ends = re.findall(r'<text x="([\d.]+)" y="\d+" text-anchor="(start|middle|end)">([\d.]+)</text>', hist)[:3]
    assert [anchor for _, anchor, _ in ends] == ["start", "middle", "end"] and float(ends[-1][0]) <= 560
    assert re.search(r'text-anchor="end">threshold 0.4</text>', hist)  # right of the middle: its label to the left
