"""An interrupted-then-resumed run vs an uninterrupted one, on the bench WARC (1,033 real pages) split
into 8 files of consecutive records (one prepared part each), FnApiRunner, one process.

    .venv/bin/python bench/resume.py [WARC] [--parts 8]

Runs, each a fresh `refinery run` process: uninterrupted; killed (SIGKILL) after 4 of 8 parts, then
--resume; killed after the first shard of phase 2 (every part done), then --resume. Wall seconds of
each process; the resumed outputs are compared with the uninterrupted one (shards byte for byte).
"""
import argparse
import os
import pathlib
import subprocess
import sys
import tempfile
import time

REPO = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
DEFAULT_WARC = REPO.parent / "shared" / "data" / "warc" / "bench_trafilatura_pages.warc.gz"


def split(warc: pathlib.Path, folder: pathlib.Path, parts: int) -> None:
    from stages.extraction.warc import record_spans

    spans = record_spans(str(warc))
    data = warc.read_bytes()
    per = -(-len(spans) // parts)
    for i in range(parts):
        with open(folder / f"part-{i:02d}.warc.gz", "wb") as out:
            for offset, length in spans[i * per:(i + 1) * per]:
                out.write(data[offset:offset + length])


def refinery(inputs, out, *extra, kill_at=None) -> tuple[float, int]:
    env = dict(os.environ)
    env.pop("REFINERY_KILL_AT", None)
    if kill_at:
        env["REFINERY_KILL_AT"] = kill_at
    started = time.perf_counter()
    done = subprocess.run([str(REPO / ".venv" / "bin" / "refinery"), "run", "--input", f"{inputs}/*.warc.gz",
                           "--output", str(out), "--quiet", *extra], env=env, capture_output=True, text=True)
    return time.perf_counter() - started, done.returncode


def main() -> None:
    from pipeline.job.outdir import compare_outputs

    args = argparse.ArgumentParser()
    args.add_argument("warc", nargs="?", default=str(DEFAULT_WARC))
    args.add_argument("--parts", type=int, default=8)
    a = args.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        tmp = pathlib.Path(tmp)
        (tmp / "in").mkdir()
        split(pathlib.Path(a.warc), tmp / "in", a.parts)
        whole, rc = refinery(tmp / "in", tmp / "whole")
        assert rc == 0
        print(f"| uninterrupted | {whole:.1f} s | | | 1.00x |")
        for kill_at, what in ((f"prepared:{a.parts // 2}", f"killed after {a.parts // 2} of {a.parts} parts"),
                              ("shard:1", "killed after the first shard (phase 2)")):
            out = tmp / kill_at.replace(":", "_")
            killed, rc = refinery(tmp / "in", out, kill_at=kill_at)
            assert rc == -9, rc
            resumed, rc = refinery(tmp / "in", out, "--resume")
            assert rc == 0 and compare_outputs(str(tmp / "whole"), str(out)) == []
            print(f"| {what}, then --resume | {killed + resumed:.1f} s | {killed:.1f} s | {resumed:.1f} s | "
                  f"{(killed + resumed) / whole:.2f}x |")


if __name__ == "__main__":
    main()
