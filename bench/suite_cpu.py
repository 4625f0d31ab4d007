"""Where the test suite's CPU goes: a pytest plugin that records each test's CPU seconds, its own and its children's
(the `torchrun` ranks, `refinery` commands and engine workers it started and waited for), and a summary by file.

On 2 cores the suite is CPU-bound (two workers keep both cores ~90 % busy; a third worker made it no faster), so
its wall time follows its CPU: `--durations` says how long a test took, this says what it cost.

    rm -f /tmp/suite_cpu_*.jsonl
    PYTHONPATH=. PYTEST_ADDOPTS="-p bench.suite_cpu" make test   # a file per xdist worker: /tmp/suite_cpu_gw0.jsonl
    .venv/bin/python bench/suite_cpu.py [--top 40] [/tmp/suite_cpu_*.jsonl]

Children's CPU counts once they are waited for (RUSAGE_CHILDREN): a daemon a test leaves running (a Slurm
controller in its namespace) is not in it.
"""
from __future__ import annotations

import argparse
import collections
import glob
import json
import os
import resource
import time

import pytest

PATTERN = "/tmp/suite_cpu_{}.jsonl"


def _cpu() -> tuple[float, float]:
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime, children.ru_utime + children.ru_stime


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    (own, children), start = _cpu(), time.monotonic()
    yield
    own_after, children_after = _cpu()
    row = {"id": item.nodeid, "own": round(own_after - own, 3), "children": round(children_after - children, 3),
           "wall": round(time.monotonic() - start, 3)}
    with open(PATTERN.format(os.environ.get("PYTEST_XDIST_WORKER", "main")), "a", encoding="utf-8") as fh:
        fh.write(json.dumps(row) + "\n")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("files", nargs="*", help="the plugin's files (default: /tmp/suite_cpu_*.jsonl)")
    p.add_argument("--top", type=int, default=25)
    args = p.parse_args()
    rows = [json.loads(line) for path in args.files or sorted(glob.glob(PATTERN.format("*")))
            for line in open(path, encoding="utf-8")]
    total = sum(r["own"] + r["children"] for r in rows)
    print(f"{len(rows)} tests, {total:.0f} CPU s ({sum(r['own'] for r in rows):.0f} in the test processes, "
          f"{sum(r['children'] for r in rows):.0f} in processes they started)")
    by_file = collections.Counter()
    for r in rows:
        by_file[r["id"].split("::")[0]] += r["own"] + r["children"]
    print(f"\n{'CPU s':>7} {'share':>6}  file")
    for name, cpu in by_file.most_common(args.top):
        print(f"{cpu:7.1f} {cpu / total:6.1%}  {name}")
    print(f"\n{'CPU s':>7} {'wall s':>7}  test")
    for r in sorted(rows, key=lambda r: -(r["own"] + r["children"]))[:args.top]:
        print(f"{r['own'] + r['children']:7.1f} {r['wall']:7.1f}  {r['id']}")


if __name__ == "__main__":
    main()
