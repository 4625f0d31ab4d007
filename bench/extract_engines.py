"""The three extraction engines side by side, in one run: quality on trafilatura's 990 annotated pages, how far
each text is from trafilatura's, speed, and what the whole job keeps on the bench WARC with each.

    taskset -c 0 .venv/bin/python bench/extract_engines.py [--data ../shared/data/html/trafilatura]
        [--warc ../shared/data/warc/bench_trafilatura_pages.warc.gz] [--repeat 3] [--no-job]

Gold pages: precision, recall, F1 of the gold snippets (stages/extraction/gold.py), ms/page in this process
(engines interleaved, median of the repeats), pages whose text equals trafilatura's, and the mean difference
from trafilatura's text (1 - Jaccard of word 3-grams). The cascade's bundled check was fitted on these same
pages: its F1 here is in-sample; scripts/build_cascade_check.py prints the two-fold-by-site figures.
Other WARC files beside the bench WARC (general crawl pages, no gold): how many pages the cascade sends to
trafilatura, its extraction time against trafilatura's, and how far each engine's text is from trafilatura's.
Bench WARC: `refinery run` once per engine (same machine, one after another): wall time, pages kept, drops by
stage and the languages kept.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from stages.extraction.engines import ENGINES  # noqa: E402
from stages.extraction.extract import ExtractConfig, extract_page  # noqa: E402
from stages.extraction.gold import DEFAULT_ROOT, load_pages, precision_recall_f1, snippet_counts  # noqa: E402

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEFAULT_WARC = os.path.join(REPO, "..", "shared", "data", "warc", "bench_trafilatura_pages.warc.gz")


def shingles(text: str, n: int = 3) -> set:
    words = text.split()
    return {tuple(words[i:i + n]) for i in range(max(len(words) - n + 1, 1))}


def difference(a: str, b: str) -> float:
    """1 - Jaccard similarity of the two texts' word 3-grams (0: same words in the same order)."""
    x, y = shingles(a), shingles(b)
    return 1 - len(x & y) / len(x | y) if x | y else 0.0


def run_engines(pages, repeat: int) -> tuple[dict, dict, dict]:
    """Each engine's texts, seconds per run (engines interleaved) and pages sent to trafilatura (of which by the
    page check, without Resiliparse's pass)."""
    texts, seconds, notes = {}, {e: [] for e in ENGINES}, {}
    for _ in range(repeat):
        for engine in ENGINES:
            options = ExtractConfig(engine=engine).engine_options()
            started = time.perf_counter()
            results = [extract_page(page.html, page.url, options) for page in pages]
            seconds[engine].append(time.perf_counter() - started)
            texts[engine] = [(text or "").strip() for text, _ in results]
            notes[engine] = (sum("cascade_fell_back_to_trafilatura" in n for _, n in results),
                             sum("cascade_sent_on_by_page_check" in n for _, n in results))
    return texts, seconds, notes


def gold_table(pages, repeat: int) -> list[str]:
    texts, seconds, notes = run_engines(pages, repeat)
    base = texts["trafilatura"]
    rows = ["| engine | precision | recall | F1 | F1 vs trafilatura | ms/page | speed vs trafilatura | same text as "
            "trafilatura | mean difference from trafilatura | pages through trafilatura |", "|---" * 10 + "|"]
    f1_base = precision_recall_f1([snippet_counts(t, p) for t, p in zip(base, pages)])[2]
    for engine in ENGINES:
        p, r, f1 = precision_recall_f1([snippet_counts(t, page) for t, page in zip(texts[engine], pages)])
        ms = 1000 * statistics.median(seconds[engine]) / len(pages)
        speed = statistics.median(seconds["trafilatura"]) / statistics.median(seconds[engine])
        same = sum(a == b for a, b in zip(texts[engine], base))
        diff = statistics.mean(difference(a, b) for a, b in zip(texts[engine], base))
        through, checked = {"trafilatura": (len(pages), 0), "resiliparse": (0, 0)}.get(engine, notes[engine])
        rows.append(f"| {engine} | {p:.3f} | {r:.3f} | {f1:.4f} | {100 * (f1 - f1_base):+.2f} points | {ms:.1f} | "
                    f"{speed:.2f}x | {same}/{len(pages)} | {diff:.3f} | {through}/{len(pages)} ({through / len(pages):.0%})"
                    + (f", {checked} by the page check |" if engine == "cascade" else " |"))
    rows.append(f"runs (s): { {e: [round(s, 1) for s in v] for e, v in seconds.items()} }")
    return rows


def crawl_pages(bench_warc: str) -> list:
    """Every HTML page of the workspace's other WARC files (Common Crawl, Dolma, Wayback captures): general
    crawl pages, unlike the gold set's articles; no gold text, so only fallback, cost and difference."""
    import glob

    from stages.extraction.warc import read_warc
    from stages.record import Document

    pages = []
    for path in sorted(glob.glob(os.path.join(os.path.dirname(os.path.abspath(bench_warc)), "*.warc.gz"))):
        if os.path.samefile(path, bench_warc):
            continue
        with open(path, "rb") as fh:
            pages += [d for d in read_warc(fh, source="crawl") if isinstance(d, Document) and (d.html or "").strip()]
    return pages


def crawl_table(pages, repeat: int) -> list[str]:
    texts, seconds, notes = run_engines(pages, repeat)
    base = texts["trafilatura"]
    rows = ["| engine | pages through trafilatura | extraction time vs trafilatura | same text as trafilatura | "
            "mean difference from trafilatura |", "|---" * 5 + "|"]
    for engine in ENGINES[1:]:
        through, checked = notes[engine] if engine == "cascade" else (0, 0)
        cost = statistics.median(seconds[engine]) / statistics.median(seconds["trafilatura"])
        same = sum(a == b for a, b in zip(texts[engine], base))
        diff = statistics.mean(difference(a, b) for a, b in zip(texts[engine], base))
        rows.append(f"| {engine} | {through} / {len(pages)} ({through / len(pages):.0%})"
                    + (f", {checked} by the page check" if engine == "cascade" else "") + f" | {cost:.2f} | "
                    f"{same} / {len(pages)} | {diff:.3f} |")
    return rows


def job_table(warc: str) -> list[str]:
    reports = {}
    with tempfile.TemporaryDirectory() as work:
        for engine in ENGINES:
            out = os.path.join(work, engine)
            started = time.perf_counter()
            proc = subprocess.run([os.path.join(os.path.dirname(sys.executable), "refinery"), "run", "--input", warc,
                                   "--output", out, "--extract-engine", engine], capture_output=True, text=True)
            if proc.returncode:
                raise SystemExit(proc.stderr[-3000:])
            with open(os.path.join(out, "report.json"), encoding="utf-8") as fh:
                reports[engine] = (time.perf_counter() - started, json.load(fh))
    dropping = {f["stage"] for _, report in reports.values() for f in report["funnel"] if f["dropped"]}
    stages = [f["stage"] for f in reports["trafilatura"][1]["funnel"] if f["stage"] in dropping]
    rows = ["| engine | job wall s | kept | " + " | ".join(f"{s} drops" for s in stages) + " | languages kept |",
            "|---" * (4 + len(stages)) + "|"]
    for engine, (wall, report) in reports.items():
        funnel = {f["stage"]: f for f in report["funnel"]}
        drops = []
        for stage in stages:
            f = funnel.get(stage, {"dropped": 0, "dropped_by_reason": {}})
            top = ", ".join(f"{k} {v}" for k, v in sorted(f["dropped_by_reason"].items(), key=lambda kv: -kv[1])[:2])
            drops.append(f"{f['dropped']}" + (f" ({top})" if top else ""))
        notes = funnel["extract"].get("notes", {})
        langs = ", ".join(f"{k} {v}" for k, v in list(report["languages"].items())[:7])
        label = engine + (f" ({notes['cascade_fell_back_to_trafilatura']} pages through trafilatura)"
                          if "cascade_fell_back_to_trafilatura" in notes else "")
        rows.append(f"| {label} | {wall:.1f} | {report['kept']} | " + " | ".join(drops) + f" | {langs} |")
    return rows


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--data", default=DEFAULT_ROOT)
    p.add_argument("--warc", default=DEFAULT_WARC)
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--no-job", action="store_true", help="skip the whole-job runs on the bench WARC")
    args = p.parse_args()
    pages = load_pages(args.data)
    print(f"{len(pages)} annotated pages; median of {args.repeat} runs, engines interleaved")
    print("\n".join(gold_table(pages, args.repeat)))
    crawl = crawl_pages(args.warc)
    print(f"\n{len(crawl)} HTML pages of the other WARC files beside {os.path.basename(args.warc)} (no gold text)")
    print("\n".join(crawl_table(crawl, args.repeat)))
    if not args.no_job:
        print(f"\nwhole job on {os.path.basename(args.warc)} (`refinery run --extract-engine E`, default settings otherwise)")
        print("\n".join(job_table(args.warc)))


if __name__ == "__main__":
    main()
