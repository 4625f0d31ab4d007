"""Documents per second per core: this project's stages vs Hugging Face datatrove, same input, same run.

    .venv/bin/python bench/vs_datatrove.py [--warc ../shared/data/warc/bench_trafilatura_pages.warc.gz]
        [--datatrove-python /tmp/dtvenv/bin/python] [--repeat 3] [--payload-types] [--save RUN.json]
    .venv/bin/python bench/vs_datatrove.py --pool RUN.json [RUN.json ...]    # the table from saved runs' passes

This machine's speed moves ±15-20 % within an hour, more than most changes measured here: pool the passes of
several runs (`--save`, then `--pool`; bench/runs/ keeps the ones RESULTS.md cites). Besides the ratio of medians,
the table has the median of per-pass ratios: the sides run one after another within a pass, so a pass's ratio
pairs measurements minutes apart and a slow spell of the machine moves both.

Seven sides: datatrove; ours with FineWeb's extraction settings and trafilatura as shipped
(`extract.speedups: false`); the same with our identical-output speedups (the default,
stages/extraction/trafilatura_speedups.py); ours with trafilatura's fast mode (`extract.fast: true`, which
changes output, see bench/extract_agreement.py); ours with `extract.engine: cascade` (at two thresholds) and `resiliparse`
(bench/extract_engines.py measures what they change). All run WARC read -> trafilatura -> lid.176 (threshold 0.65) -> Gopher repetition -> Gopher
quality, pinned to one core (`taskset -c 0`, which the extraction child inherits), each in its own
process. Ours runs the stage classes the Beam job runs, in production settings (extraction in a
killable child process with a time limit), the way phase 1 runs them: a chunk of 256 documents through one stage,
then the next (`--per-document`: every stage on one document before the next, as this bench did up to its fourth round;
one stage's model and code stay in the core's caches over a chunk, ~10 % faster here); datatrove runs its LocalPipelineExecutor with FineWeb's
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
from collections.abc import Iterator

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEFAULT_WARC = os.path.join(REPO, "..", "shared", "data", "warc", "bench_trafilatura_pages.warc.gz")
LID = os.path.join(REPO, "stages", "models", "lid.176.ftz")
STEP_NAMES = {"READER": "read", "EXTRAC": "extract", "Language ID": "langid", "Gopher Repetition": "repetition",
              "Gopher Quality": "quality", "WRITER": "write"}


def ours(warc: str, fast: bool, speedups: bool = True, engine: str = "trafilatura", threshold: float | None = None,
         per_document: bool = False) -> dict:
    """Runs in a child process pinned to one core. `per_document`: every stage on one document before the next
    document (how this bench ran up to its fourth round), instead of the job's chunks."""
    sys.path.insert(0, REPO)
    from stages.extraction.extract import ExtractConfig, Extractor
    from stages.extraction.warc import read_warc
    from stages.gopher import GopherQuality, GopherRepetition
    from stages.langid import LanguageIdentifier
    from stages.record import Document
    from stages.runner import StageRunner, chunks, held_chars

    default = ExtractConfig()
    extractor = Extractor(ExtractConfig(fast=fast, speedups=speedups, engine=engine,
                                        cascade_threshold=default.cascade_threshold if threshold is None else threshold))
    notes: dict[str, int] = {}

    def count(name: str, n: int = 1) -> None:  # the extraction stage's notes (how often the cascade fell back)
        if name.startswith("extract.note."):
            note = name.removeprefix("extract.note.")
            notes[note] = notes.get(note, 0) + n

    chain = StageRunner([extractor, LanguageIdentifier(), GopherRepetition(), GopherQuality()], count=count)
    read_s = 0.0

    def documents(fh) -> Iterator[Document]:  # the reader, timed apart
        nonlocal read_s
        records = iter(read_warc(fh, source="bench"))
        while True:
            t0 = time.perf_counter()
            doc = next(records, None)
            read_s += time.perf_counter() - t0
            if doc is None:
                return
            if isinstance(doc, Document):
                yield doc

    read, kept = 0, 0
    with open(warc, "rb") as fh, chain:
        started = time.perf_counter()
        # as phase 1 runs them (pipeline/job/prepare.py): each stage over a chunk of documents in turn
        for chunk in ([doc] for doc in documents(fh)) if per_document else chunks(documents(fh), held_chars):
            read += len(chunk)
            kept += len(chain.run(chunk)[0])
        wall = time.perf_counter() - started
    names = {"gopher_repetition": "repetition", "gopher_quality": "quality"}  # the table's row names
    seconds = {"read": read_s, **{names.get(k, k): v for k, v in chain.seconds.items()}}
    return {"wall_s": wall, "read": read, "kept": kept, "seconds": seconds, "notes": notes}


def children_cpu_s() -> float:
    """CPU seconds (user + system) of this process's finished children and theirs: a side's process and its
    extraction child. On a shared virtual machine it moves less than wall time when the host takes the core away."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def run_ours(warc: str, per_document: bool, fast: bool, speedups: bool = True, engine: str = "trafilatura",
             threshold: float | None = None) -> dict:
    cmd = ["taskset", "-c", "0", sys.executable, __file__, "--side", "ours", "--warc", warc, "--engine", engine] \
        + ([] if threshold is None else ["--cascade-threshold", str(threshold)]) \
        + (["--per-document"] if per_document else []) \
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


TYPED = "datatrove, WARC with payload types (reads every page)"


def median_ratio(base: list[dict], runs: list[dict]) -> float:
    """The median over passes of datatrove's wall time / the side's in the same pass: sides run one after another
    within a pass, so this pairs measurements minutes apart and cancels the machine's slower and faster spells."""
    return statistics.median(b["wall_s"] / r["wall_s"] for b, r in zip(base, runs))


def print_table(results: dict[str, list[dict]]) -> None:
    """The comparison from every pass of every side (`results`: side name -> passes, datatrove's first)."""
    typed = results.get(TYPED)
    print("| pipeline | passes | docs read | kept | wall s | docs/s per core | read | extract | langid | repetition | "
          "quality | docs/s ratio | wall-time ratio | per-pass wall-time ratio |"
          + (" wall-time ratio, datatrove reading every page | per-pass, reading every page |" if typed else "")
          + " CPU s | CPU-time ratio |")
    print("|---" * (16 + (2 if typed else 0)) + "|")
    base_runs = results["datatrove"]
    base = statistics.median(r["read"] / r["wall_s"] for r in base_runs)
    base_wall = statistics.median(r["wall_s"] for r in base_runs)
    typed_wall = statistics.median(r["wall_s"] for r in typed) if typed else None
    base_cpu = statistics.median(r["cpu_s"] for r in (typed or base_runs))
    for name, runs in results.items():
        rate = statistics.median(r["read"] / r["wall_s"] for r in runs)
        per_stage = []
        for key in ("read", "extract", "langid", "repetition", "quality"):
            timed = [1000 * r["seconds"][key] / r["read"] for r in runs if key in r.get("seconds", {})]
            per_stage.append(f"{statistics.median(timed):.1f}" if timed else "–")
        wall = statistics.median(r["wall_s"] for r in runs)
        cpu = statistics.median(r["cpu_s"] for r in runs)
        print(f"| {name} | {len(runs)} | {runs[0]['read']} | {runs[0]['kept']} | {wall:.1f} | {rate:.1f} | "
              + " | ".join(per_stage) + f" | {rate / base:.2f}x | {base_wall / wall:.2f}x | "
              f"{median_ratio(base_runs, runs):.2f}x |"
              + (f" {typed_wall / wall:.2f}x | {median_ratio(typed, runs):.2f}x |" if typed else "")
              + f" {cpu:.1f} | {base_cpu / cpu:.2f}x |")
    print("(per-stage columns: ms per document read; wall-time ratio = datatrove's median time for the same file / "
          "ours; per-pass: the median of that ratio within each pass; CPU s: the side's processes, start-up "
          "included; CPU-time ratio against datatrove" + (" reading every page)" if typed else ")"))
    for name, runs in results.items():  # every run, in order: how much the machine moved during this one
        print(f"{name}: wall s per run {[round(r['wall_s'], 1) for r in runs]}, "
              f"CPU s per run {[round(r['cpu_s'], 1) for r in runs]}")


def pooled(paths: list[str]) -> dict[str, list[dict]]:
    """The passes of several saved runs (`--save`), side by side in run order: only sides every run has."""
    saved = [json.load(open(path, encoding="utf-8")) for path in paths]
    modes = {run.get("per_document", True) for run in saved}  # runs saved without the key ran per document
    if len(modes) > 1:
        raise SystemExit("--pool: these runs took documents through the stages in different ways (--per-document)")
    runs = [run["passes"] for run in saved]
    names = [name for name in runs[0] if all(name in run for run in runs)]
    return {name: [r for run in runs for r in run[name]] for name in names}


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
    p.add_argument("--save", metavar="JSON", help="also write every pass of every side to this file")
    p.add_argument("--pool", nargs="+", metavar="JSON", help="run nothing: the table from the passes of saved runs")
    p.add_argument("--per-document", action="store_true",
                   help="our sides take each document through every stage before the next (the job, and this bench "
                        "by default, take chunks of 256 through one stage after another)")
    args = p.parse_args()
    if args.pool:
        print(f"passes of {len(args.pool)} saved run(s): {', '.join(args.pool)}")
        print_table(pooled(args.pool))
        return
    if args.side == "ours":
        print(json.dumps(ours(args.warc, args.fast, not args.no_speedups, args.engine, args.cascade_threshold,
                              args.per_document)))
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
    typed_warc = None
    if args.payload_types:
        typed_warc = os.path.join(tempfile.mkdtemp(prefix="refinery-bench-"), os.path.basename(args.warc))
        print(f"payload type added to {with_payload_types(args.warc, typed_warc)} records: {typed_warc}")
        results = {"datatrove": [], TYPED: [], **{name: [] for name in sides}}
    for _ in range(args.repeat):  # interleaved, so drift in machine load hits every side alike
        results["datatrove"].append(run_datatrove(args.datatrove_python, args.warc))
        if typed_warc:
            results[TYPED].append(run_datatrove(args.datatrove_python, typed_warc))
        for name, side in sides.items():
            results[name].append(run_ours(args.warc, args.per_document, *side))
    print(f"input {os.path.basename(args.warc)}; one core each (taskset -c 0); median of {args.repeat} runs; "
          f"ours {'per document' if args.per_document else 'in chunks, as the job runs'}")
    print_table(results)
    if args.save:
        with open(args.save, "w", encoding="utf-8") as fh:
            json.dump({"warc": os.path.basename(args.warc), "per_document": args.per_document, "passes": results}, fh)
    for name, runs in results.items():
        if runs[0].get("notes"):
            print(f"{name}: extraction notes {runs[0]['notes']}")


if __name__ == "__main__":
    main()
