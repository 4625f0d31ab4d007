"""Milliseconds per document of language ID and the Gopher repetition and quality stages on real extracted
text, this checkout against another commit of the project (the baseline), in the same run.

    .venv/bin/python bench/gopher_speed.py [--baseline COMMIT] [--warc ...] [--repeat 3]

Texts: every page of the bench WARC extracted once by each engine (trafilatura with FineWeb settings, and
Resiliparse, whose boilerplate repeats more) and identified by lid.176. The baseline's `stages/` is checked
out into a temporary folder (`git archive`) and imported in a child process; both sides must give the same
results, which the script checks: language and score or drop, every repetition rule a text fails (not only
the first), and every Gopher quality measure.
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

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEFAULT_WARC = os.path.join(REPO, "..", "shared", "data", "warc", "bench_trafilatura_pages.warc.gz")


def extract_texts(warc: str, path: str) -> None:
    sys.path.insert(0, REPO)
    from stages.extraction.extract import ExtractConfig, Extractor
    from stages.extraction.warc import read_warc
    from stages.langid import LanguageIdentifier
    from stages.runner import StageRunner

    with open(path, "w", encoding="utf-8") as out:
        for engine in ("trafilatura", "resiliparse"):
            chain = StageRunner([Extractor(ExtractConfig(timeout_s=None, engine=engine)), LanguageIdentifier()])
            with open(warc, "rb") as fh, chain:
                for doc in chain.kept(read_warc(fh, source="bench")):
                    out.write(json.dumps({"text": doc.text, "lang": doc.lang}) + "\n")


def time_stages(stages_root: str, texts_path: str, repeat: int) -> dict:
    """Child process: import `stages` from stages_root, time the stages, record what they found."""
    sys.path.insert(0, stages_root)
    from stages.gopher import GopherQuality, GopherRepetition, quality_measures
    from stages.langid import LanguageIdentifier
    from stages.record import Document

    docs = [json.loads(line) for line in open(texts_path, encoding="utf-8")]
    langid, repetition, quality = LanguageIdentifier(), GopherRepetition(), GopherQuality()
    timed = {"langid": lambda d: langid(Document(id="x", url="", source="bench", text=d["text"])),
             "repetition": lambda d: repetition.evaluate(d["text"], d["lang"]),
             "quality": lambda d: quality.evaluate(d["text"], d["lang"])}
    found = {"langid": lambda d, r: [r.lang, getattr(r, "lang_score", None), repr(getattr(r, "reason", None))],
             "repetition": lambda d, r: [[str(v[0]), v[1]] for v in repetition.verdicts(d["text"], d["lang"])],
             "quality": lambda d, r: sorted(quality_measures(d["text"], d["lang"]).items())}
    out = {"docs": len(docs)}
    for name, stage in (("langid", langid), ("repetition", repetition), ("quality", quality)):
        stage.count = lambda *a, **k: None
        runs, results = [], None
        for _ in range(repeat):
            started = time.perf_counter()
            results = [timed[name](d) for d in docs]
            runs.append(time.perf_counter() - started)
        out[name] = {"ms_per_doc": 1000 * statistics.median(runs) / len(docs),
                     "decisions": [found[name](d, r) for d, r in zip(docs, results)]}
    return out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--baseline", default="037d9cd", help="commit to compare with (default: before this change)")
    p.add_argument("--warc", default=DEFAULT_WARC)
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--child", nargs=2, help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.child:
        print(json.dumps(time_stages(args.child[0], args.child[1], args.repeat)))
        return
    with tempfile.TemporaryDirectory() as work:
        texts = os.path.join(work, "texts.jsonl")
        extract_texts(args.warc, texts)
        base = os.path.join(work, "baseline")
        os.makedirs(base)
        archive = subprocess.run(["git", "archive", args.baseline, "stages"], cwd=REPO, capture_output=True, check=True)
        subprocess.run(["tar", "-x", "-C", base], input=archive.stdout, check=True)
        results = {}
        for label, root in (("baseline " + args.baseline, base), ("this checkout", REPO)):
            proc = subprocess.run([sys.executable, __file__, "--repeat", str(args.repeat), "--child", root, texts],
                                  capture_output=True, text=True, check=True)
            results[label] = json.loads(proc.stdout)
    (b_label, b), (n_label, n) = results.items()
    print(f"{n['docs']} extracted pages of {os.path.basename(args.warc)}, median of {args.repeat}")
    print("| stage | " + b_label + " ms/doc | this checkout ms/doc | speed-up | same decisions |")
    print("|---|---|---|---|---|")
    for stage in ("langid", "repetition", "quality"):
        same = b[stage]["decisions"] == n[stage]["decisions"]
        print(f"| {stage} | {b[stage]['ms_per_doc']:.2f} | {n[stage]['ms_per_doc']:.2f} | "
              f"{b[stage]['ms_per_doc'] / n[stage]['ms_per_doc']:.1f}x | {same} |")


if __name__ == "__main__":
    main()
