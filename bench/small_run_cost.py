"""The fixed cost of a small run: how many transforms the job's Beam graph has, and the CPU of `refinery run` over
one small WARC in one process (after a first run that pays the imports), the median of several runs.

Most of a test suite's runs, and a user's first look at Refinery, are small: their time is the graph's, not the
documents'. Compare two checkouts in the same session (the ratio is what counts on a shared machine):

    .venv/bin/python bench/small_run_cost.py                     # this checkout
    .venv/bin/python bench/small_run_cost.py --repo OLD_CHECKOUT  # e.g. a `git worktree add OLD <commit>`
"""
from __future__ import annotations

import argparse
import importlib
import json
import os
import statistics
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))


def count_transforms(pipeline) -> int:
    found, todo = 0, [pipeline._root_transform()]  # noqa: SLF001  (the applied graph, as Beam holds it)
    while todo:
        node = todo.pop()
        found += len(node.parts)
        todo += node.parts
    return found


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--repo", default=os.path.dirname(HERE), help="the checkout whose job is measured")
    p.add_argument("--input", default=os.path.join(os.path.dirname(HERE), "data", "warc",
                                                   "resiliparse_CC-MAIN-2020-34_warcfile.warc.gz"))
    p.add_argument("--runs", type=int, default=5)
    args = p.parse_args()
    sys.path.insert(0, os.path.abspath(args.repo))
    for name in [m for m in sys.modules if m.split(".")[0] in ("pipeline", "stages", "common")]:
        del sys.modules[name]
    run_module = importlib.import_module("pipeline.job.run")
    import apache_beam as beam

    graphs = []
    original = beam.Pipeline.run

    def counting_run(self, *a, **kw):
        graphs.append(count_transforms(self))
        return original(self, *a, **kw)

    beam.Pipeline.run = counting_run
    with tempfile.TemporaryDirectory() as tmp:
        argv = ["--input", args.input, "--output", os.path.join(tmp, "out"), "--overwrite", "--quiet"]
        run_module.run(argv)  # imports, models' first load
        cpu, wall = [], []
        for _ in range(args.runs):
            c, t = time.process_time(), time.perf_counter()
            run_module.run(argv)
            cpu.append(time.process_time() - c)
            wall.append(time.perf_counter() - t)
    print(json.dumps({"repo": os.path.abspath(args.repo), "code": run_module.__file__, "transforms": graphs[-1],
                      "runs": args.runs, "cpu_s_median": round(statistics.median(cpu), 2),
                      "wall_s_median": round(statistics.median(wall), 2)}))


if __name__ == "__main__":
    main()
