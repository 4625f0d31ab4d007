"""Do two checkouts write the same outputs? The demo WARCs, the bench WARC, and a run with every global stage
(paragraph dedup, robots.txt captures, --dedup-against an earlier run, decontamination, holdout, anneal) through the
code of each, compared by tests/golden.py's digests (Parquet by content, report.json and manifest.json less what
differs between identical runs). For a refactor that must not change what a run writes.

    .venv/bin/python bench/same_outputs.py OTHER_CHECKOUT [--work DIR]   # e.g. a `git worktree add` of main

Exit 0 when every digest of every job agrees. Needs ../shared (the bench WARC)."""
from __future__ import annotations

import argparse
import json
import pathlib
import shutil
import subprocess
import sys
import tempfile

HERE = pathlib.Path(__file__).resolve().parents[1]
SHARED = HERE.parent / "shared" / "data"

RUN = """import json, sys
sys.path.insert(0, sys.argv[1])
from pipeline.job.run import run
from tests.golden import run_digests
args, out = json.loads(sys.argv[2]), sys.argv[3]
report = run(args + ["--output", out, "--quiet"])
print(json.dumps(dict(run_digests(__import__("pathlib").Path(out)), _kept=report["kept"])))
"""


def inputs(work: pathlib.Path) -> pathlib.Path:
    """The jobs' inputs below `work`: the demo's and the bench WARCs, GSM8K's test set, robots.txt captures of the
    hosts of both (one in nine disallowing GPTBot everything, the rest a /private path)."""
    from tests.robots_warcs import robots_warc

    data = work / "inputs"
    (data / "demo").mkdir(parents=True)
    (data / "bench").mkdir()
    for path in (HERE / "data" / "warc").glob("*.warc.gz"):
        shutil.copy(path, data / "demo")
    shutil.copy(SHARED / "warc" / "bench_trafilatura_pages.warc.gz", data / "bench")
    shutil.copy(HERE / "tests" / "data" / "benchmarks" / "gsm8k" / "test.jsonl", data / "gsm8k.jsonl")
    hosts = sorted(_hosts(data / "demo") | _hosts(data / "bench"))
    robots_warc(data / "robots.warc.gz", [(f"{h}/robots.txt", "2024-01-01T00:00:00Z", "200 OK",
                                           "User-agent: GPTBot\nDisallow: /\n" if i % 9 == 0 else
                                           "User-agent: *\nDisallow: /private\n", []) for i, h in enumerate(hosts)])
    return data


def _hosts(folder: pathlib.Path) -> set[str]:
    from urllib.parse import urlsplit

    from warcio.archiveiterator import ArchiveIterator

    found = set()
    for path in folder.glob("*.warc.gz"):
        with open(path, "rb") as fh:
            for record in ArchiveIterator(fh):
                url = record.rec_headers.get_header("WARC-Target-URI") or ""
                if record.rec_type == "response" and url.startswith("http"):
                    parts = urlsplit(url)
                    found.add(f"{parts.scheme}://{parts.netloc}")
    return found


def digests(code: pathlib.Path, args: list[str], out: pathlib.Path) -> dict:
    done = subprocess.run([sys.executable, "-c", RUN, str(code), json.dumps(args), str(out)], cwd=code,
                          capture_output=True, text=True, timeout=3600)
    if done.returncode:
        raise SystemExit(f"{code}: {' '.join(args)} failed:\n{done.stderr[-2000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("other", type=pathlib.Path, help="the other checkout")
    parser.add_argument("--work", type=pathlib.Path, help="a folder for the inputs and outputs (default: a new one)")
    args = parser.parse_args(argv)
    sys.path.insert(0, str(HERE))
    work = args.work or pathlib.Path(tempfile.mkdtemp(prefix="same-outputs-"))
    data = inputs(work)
    earlier = work / "earlier"  # one run both compare against (--dedup-against), made by the other checkout
    digests(args.other.resolve(), ["--input", str(data / "demo" / "dolma_sample-0000.warc.gz"), "--paragraph-dedup"],
            earlier)
    demo, bench = str(data / "demo" / "*.warc.gz"), str(data / "bench" / "*.warc.gz")
    jobs = {"demo": ["--input", demo], "bench": ["--input", bench],
            "every global stage": ["--input", demo, "--input", bench, "--paragraph-dedup",
                                   "--robots", str(data / "robots.warc.gz"), "--dedup-against", str(earlier),
                                   "--decontaminate", f"{data / 'gsm8k.jsonl'}:question,answer",
                                   "--holdout-fraction", "0.05", "--anneal-fraction", "0.2",
                                   "--anneal-min-quality", "0.5", "--anneal-max-page-share", "0.25",
                                   "--anneal-max-site-share", "0.5"]}
    differ = 0
    for name, job in jobs.items():
        ours = digests(HERE, job, work / f"this-{name.replace(' ', '-')}")
        theirs = digests(args.other.resolve(), job, work / f"other-{name.replace(' ', '-')}")
        changed = sorted(k for k in set(ours) | set(theirs) if ours.get(k) != theirs.get(k))
        differ += bool(changed)
        print(f"{name}: {len(ours) - 1} digests, kept {ours['_kept']}: "
              + ("the same" if not changed else f"differ in {', '.join(changed)}"))
    print(f"(inputs and outputs: {work})")
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main())
