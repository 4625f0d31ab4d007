"""Documents per second per core: this project's stages vs Hugging Face datatrove, same input, same run.

    .venv/bin/python bench/vs_datatrove.py [--warc ../shared/data/warc/bench_trafilatura_pages.warc.gz]
        [--datatrove-python /tmp/dtvenv/bin/python] [--repeat 3]

Seven sides: datatrove; ours with FineWeb's extraction settings and trafilatura as shipped
(`extract.speedups: false`); the same with our identical-output speedups (the default,
stages/extraction/trafilatura_speedups.py); ours with trafilatura's fast mode (`extract.fast: true`, which
changes output, see bench/extract_agreement.py); ours with `extract.engine: cascade` (at two thresholds) and `resiliparse`
(bench/extract_engines.py measures what they change). All run WARC read -> trafilatura -> lid.176 (threshold 0.65) -> Gopher repetition -> Gopher
quality, pinned to one core (`taskset -c 0`, which the extraction child inherits), each in its own
process. Ours runs the stage classes the Beam job runs, in production settings (extraction in a
killable child process with a time limit); datatrove runs its LocalPipelineExecutor with FineWeb's
settings (Trafilatura(favour_precision, timeout=1)) and its JSONL writer, its language filter given
the same bundled lid.176.ftz (nothing downloads here).

datatrove reads a record only where `WARC-Identified-Payload-Type` says HTML, or, where that header is missing (as in
the bench WARC, built from trafilatura's pages), where libmagic says so: it calls ~10 % of these HTML pages something
else and skips them. Common Crawl's WARCs carry the header. `--payload-types` also runs datatrove on a copy of the
WARC whose response records carry it (the HTTP Content-Type's media type, as Common Crawl's detector would say for
these pages), so that both sides read the same pages; the table then has a wall-time ratio against that run too.

datatrove lives in its own virtual environment (its trafilatura and fastText pins differ from ours):
    python3 -m venv /tmp/dtvenv && /tmp/dtvenv/bin/pip install "datatrove[processing]" warcio \\
        fasteners spacy faust-cchardet python-magic orjson lxml_html_clean fasttext-community
"""
from __future__ import annotations

import argparse
import gzip
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEFAULT_WARC = os.path.join(REPO, "..", "shared", "data", "warc", "bench_trafilatura_pages.warc.gz")
LID = os.path.join(REPO, "stages", "models", "lid.176.ftz")
STEP_NAMES = {"READER": "read", "EXTRAC": "extract", "Language ID": "langid", "Gopher Repetition": "repetition",
              "Gopher Quality": "quality", "WRITER": "write"}


def ours(warc: str, fast: bool, speedups: bool = True, engine: str = "trafilatura", threshold: float | None = None) -> dict:
    """Runs in a child process pinned to one core."""
    sys.path.insert(0, REPO)
    from stages.extraction.extract import ExtractConfig, Extractor
    from stages.extraction.warc import read_warc
    from stages.gopher import GopherQuality, GopherRepetition
    from stages.langid import LanguageIdentifier
    from stages.record import Document
    from stages.runner import StageRunner

    default = ExtractConfig()
    extractor = Extractor(ExtractConfig(fast=fast, speedups=speedups, engine=engine,
                                        cascade_threshold=default.cascade_threshold if threshold is None else threshold))
    notes: dict[str, int] = {}
    extractor.count = lambda name, n=1: notes.__setitem__(name, notes.get(name, 0) + n)
    chain = StageRunner([extractor, LanguageIdentifier(),
                        GopherRepetition(), GopherQuality()])
    read_s, read, kept = 0.0, 0, 0
    with open(warc, "rb") as fh, chain:
        started = time.perf_counter()
        records = iter(read_warc(fh, source="bench"))
        while True:
            t0 = time.perf_counter()
            doc = next(records, None)
            read_s += time.perf_counter() - t0
            if doc is None:
                break
            if isinstance(doc, Document):
                read += 1
                kept += isinstance(chain(doc), Document)
        wall = time.perf_counter() - started
    names = {"gopher_repetition": "repetition", "gopher_quality": "quality"}  # the table's row names
    seconds = {"read": read_s, **{names.get(k, k): v for k, v in chain.seconds.items()}}
    return {"wall_s": wall, "read": read, "kept": kept, "seconds": seconds, "notes": notes}


def children_cpu_s() -> float:
    """CPU seconds (user + system) of this process's finished children and theirs: a side's process and its
    extraction child. On a shared virtual machine it moves less than wall time when the host takes the core away."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def run_ours(warc: str, fast: bool, speedups: bool = True, engine: str = "trafilatura",
             threshold: float | None = None) -> dict:
    cmd = ["taskset", "-c", "0", sys.executable, __file__, "--side", "ours", "--warc", warc, "--engine", engine] \
        + ([] if threshold is None else ["--cascade-threshold", str(threshold)]) \
        + (["--fast"] if fast else []) + ([] if speedups else ["--no-speedups"])
    cpu = children_cpu_s()
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=REPO)
    if proc.returncode:
        raise SystemExit(proc.stderr[-3000:])
    return {**json.loads(proc.stdout.strip().splitlines()[-1]), "cpu_s": children_cpu_s() - cpu}


def with_payload_types(warc: str, out: str) -> int:
    """Copies `warc` (one gzip member per record) to `out` with `WARC-Identified-Payload-Type` on every response
    record that has an HTTP Content-Type; returns how many got it. Nothing else in a record changes."""
    import zlib

    data, added = open(warc, "rb").read(), 0
    with open(out, "wb") as fh:
        while data:
            member = zlib.decompressobj(31)
            record = member.decompress(data)
            data = member.unused_data
            head, sep, block = record.partition(b"\r\n\r\n")
            length = next((int(line.split(b":", 1)[1]) for line in head.split(b"\r\n")
                           if line.lower().startswith(b"content-length:")), -1)
            if len(block) != length + 4:  # the block and the two CRLFs that end a record
                raise SystemExit(f"{warc}: --payload-types needs one WARC record per gzip member")
            http_head = block.split(b"\r\n\r\n", 1)[0].lower()
            mime = next((line.split(b":", 1)[1].split(b";")[0].strip() for line in http_head.split(b"\r\n")
                         if line.startswith(b"content-type:")), b"")
            if b"\r\nwarc-type: response" in head.lower() and mime:
                head += b"\r\nWARC-Identified-Payload-Type: " + mime
                added += 1
            fh.write(gzip.compress(head + sep + block, mtime=0))
    return added


def run_datatrove(python: str, warc: str) -> dict:
    with tempfile.TemporaryDirectory() as work:
        cmd = ["taskset", "-c", "0", python, os.path.join(REPO, "bench", "_datatrove_side.py"), warc, LID, work]
        cpu = children_cpu_s()
        proc = subprocess.run(cmd, capture_output=True, text=True)
        cpu = children_cpu_s() - cpu
        if proc.returncode:
            raise SystemExit(proc.stderr[-3000:])
        raw = json.loads(proc.stdout.strip().splitlines()[-1])
    seconds, read, kept = {}, 0, 0
    for name, step in raw["steps"].items():
        key = next((v for k, v in STEP_NAMES.items() if k in name), name)
        seconds[key] = step["seconds"]
        if key == "read":
            read = step["stats"]["documents"]["total"]
        if key == "write":
            kept = step["stats"].get("total", 0)
    return {"wall_s": raw["wall_s"], "read": read, "kept": kept, "seconds": seconds, "cpu_s": cpu}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--warc", default=DEFAULT_WARC)
    p.add_argument("--datatrove-python", default="/tmp/dtvenv/bin/python")
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--fast", action="store_true", help=argparse.SUPPRESS)  # child: trafilatura fast=True
    p.add_argument("--no-speedups", action="store_true", help=argparse.SUPPRESS)  # child: trafilatura as shipped
    p.add_argument("--side", choices=("ours",), help=argparse.SUPPRESS)
    p.add_argument("--engine", default="trafilatura", help=argparse.SUPPRESS)  # child: extract.engine
    p.add_argument("--cascade-threshold", type=float, default=None, help=argparse.SUPPRESS)  # child; none: default
    p.add_argument("--sides", default="all", help="comma-separated side numbers to run (1-based, datatrove always)")
    p.add_argument("--payload-types", action="store_true",
                   help="also run datatrove on a copy of the WARC with Common Crawl's payload-type header")
    args = p.parse_args()
    if args.side == "ours":
        print(json.dumps(ours(args.warc, args.fast, not args.no_speedups, args.engine, args.cascade_threshold)))
        return
    sides = {"refinery, FineWeb extraction, trafilatura as shipped (extract.speedups: false)": (False, False, "trafilatura"),
             "refinery, FineWeb extraction (the default)": (False, True, "trafilatura"),
             "refinery, extract.fast: true": (True, True, "trafilatura"),
             "refinery, extract.engine: cascade (the engine's defaults)": (False, True, "cascade"),
             "refinery, extract.engine: resiliparse": (False, True, "resiliparse"),
             "refinery, extract.engine: cascade, cascade_threshold: 0.5": (False, True, "cascade", 0.5)}
    if args.sides != "all":
        chosen = {int(k) for k in args.sides.split(",")}
        sides = {name: side for i, (name, side) in enumerate(sides.items(), 1) if i in chosen}
    results = {"datatrove": [], **{name: [] for name in sides}}
    typed_name, typed_warc = "datatrove, WARC with payload types (reads every page)", None
    if args.payload_types:
        typed_warc = os.path.join(tempfile.mkdtemp(prefix="refinery-bench-"), os.path.basename(args.warc))
        print(f"payload type added to {with_payload_types(args.warc, typed_warc)} records: {typed_warc}")
        results = {"datatrove": [], typed_name: [], **{name: [] for name in sides}}
    for _ in range(args.repeat):  # interleaved, so drift in machine load hits every side alike
        results["datatrove"].append(run_datatrove(args.datatrove_python, args.warc))
        if typed_warc:
            results[typed_name].append(run_datatrove(args.datatrove_python, typed_warc))
        for name, side in sides.items():
            results[name].append(run_ours(args.warc, *side))
    print(f"input {os.path.basename(args.warc)}; one core each (taskset -c 0); median of {args.repeat} runs")
    typed_wall = statistics.median(r["wall_s"] for r in results[typed_name]) if typed_warc else None
    print("| pipeline | docs read | kept | wall s | docs/s per core | read | extract | langid | repetition | "
          "quality | docs/s ratio | wall-time ratio |" + (" wall-time ratio, datatrove reading every page |"
                                                          if typed_warc else "") + " CPU s | CPU-time ratio |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|" + ("---|" if typed_warc else "") + "---|---|")
    base = statistics.median(r["read"] / r["wall_s"] for r in results["datatrove"])
    base_wall = statistics.median(r["wall_s"] for r in results["datatrove"])
    base_cpu = statistics.median(r["cpu_s"] for r in results[typed_name if typed_warc else "datatrove"])
    for name, runs in results.items():
        rate = statistics.median(r["read"] / r["wall_s"] for r in runs)
        per_stage = []
        for key in ("read", "extract", "langid", "repetition", "quality"):
            ms = statistics.median(1000 * r["seconds"].get(key, 0.0) / r["read"] for r in runs)
            per_stage.append(f"{ms:.1f}")
        wall = statistics.median(r["wall_s"] for r in runs)
        print(f"| {name} | {runs[0]['read']} | {runs[0]['kept']} | {wall:.1f} | {rate:.1f} | "
              + " | ".join(per_stage) + f" | {rate / base:.2f}x | {base_wall / wall:.2f}x |"
              + (f" {typed_wall / wall:.2f}x |" if typed_warc else "")
              + f" {statistics.median(r['cpu_s'] for r in runs):.1f} | "
                f"{base_cpu / statistics.median(r['cpu_s'] for r in runs):.2f}x |")
    print("(per-stage columns: ms per document read; wall-time ratio = datatrove's time for the same file / ours; "
          "CPU s: the side's processes, start-up included; CPU-time ratio against datatrove"
          + (" reading every page)" if typed_warc else ")"))
    for name, runs in results.items():  # every run, in order: how much the machine moved during this one
        print(f"{name}: wall s per run {[round(r['wall_s'], 1) for r in runs]}, "
              f"CPU s per run {[round(r['cpu_s'], 1) for r in runs]}")
    for name, runs in results.items():
        if runs[0].get("notes"):
            print(f"{name}: extraction notes {runs[0]['notes']}")


if __name__ == "__main__":
    main()
