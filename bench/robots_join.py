"""The robots host join at scale (issue 59): synthetic hosts with robots.txt captures and pages, joined by host as
`--robots` does (pipeline/job/globals/robots.py's transforms on Beam's FnApiRunner), against the same pages passed through
without the join.

    .venv/bin/python bench/robots_join.py [--hosts 1000000] [--pages-per-host 3] [--json FILE]

Each host has one capture (a tenth of them with a GPTBot group, a tenth a redirect to a `www.` host, a twentieth
404 or 503) and `--pages-per-host` pages; the captures are generated inside the pipeline, not read from files.
Reports wall time, CPU time and the process's peak memory (FnApiRunner runs in this process) for both, and the
join's CPU per page (to set against a run's: tens of milliseconds a page, mostly extraction); the drops are
counted (a tenth of the pages, those of the GPTBot hosts).
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import sys
import time

import apache_beam as beam
from apache_beam.options.pipeline_options import PipelineOptions

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from pipeline.job.globals.robots import _decide, _hop  # noqa: E402
from stages.optout.agents import TRAINING_AGENTS  # noqa: E402
from stages.optout.captures import Capture, redirect_targets  # noqa: E402

BODIES = {
    "gptbot": b"User-agent: GPTBot\nDisallow: /\n\nUser-agent: *\nDisallow: /admin/\n",
    "plain": b"User-agent: *\nDisallow: /search\nDisallow: /*.pdf$\nAllow: /\n",
}


def captures_of(i: int):
    host = f"site{i}.example"
    kind = i % 20
    if kind in (0, 1):  # a tenth: a group for GPTBot
        yield host, Capture(host, "https", "2024-01-01T00:00:00Z", 200, BODIES["gptbot"])
    elif kind in (2, 3):  # a tenth: a redirect to the www. host, whose file lives there
        target = f"www.{host}"
        yield host, Capture(host, "https", "2024-01-01T00:00:00Z", 301, b"", f"https://{target}/robots.txt")
        yield target, Capture(target, "https", "2024-01-01T00:00:01Z", 200, BODIES["plain"])
    elif kind == 4:
        yield host, Capture(host, "https", "2024-01-01T00:00:00Z", 404 if i % 40 < 20 else 503)
    else:
        yield host, Capture(host, "https", "2024-01-01T00:00:00Z", 200, BODIES["plain"])


def pages_of(i: int, per_host: int):
    host = f"site{i}.example"
    for j in range(per_host):
        doc_id = f"web/{i}/{j}"
        yield host, (doc_id, f"part-{i % 64}", "https", f"https://{host}/articles/{j}.html", "2024-03-01T00:00:00Z")


def run(hosts: int, per_host: int, join: bool) -> dict:
    options = PipelineOptions(["--runner=FnApiRunner", "--direct_num_workers=1"])
    started, cpu = time.monotonic(), time.process_time()
    with beam.Pipeline(options=options) as p:
        numbers = p | "Hosts" >> beam.Create(range(hosts), reshuffle=False)
        pages = numbers | "Pages" >> beam.FlatMap(pages_of, per_host)
        if join:
            captures = numbers | "Captures" >> beam.FlatMap(captures_of)
            redirects = captures | "RedirectTargets" >> beam.FlatMap(lambda kv: redirect_targets([kv[1]]))
            hopped = ({"captures": captures, "sources": redirects} | "ByTargetHost" >> beam.CoGroupByKey()
                      | "ToSourceHost" >> beam.FlatMap(_hop))
            decided = ({"pages": pages, "captures": (captures, hopped) | beam.Flatten()}
                       | "ByHost" >> beam.CoGroupByKey()
                       | "Decide" >> beam.FlatMap(_decide, list(TRAINING_AGENTS), "page"))
        else:
            decided = pages | "PassThrough" >> beam.Map(lambda kv: kv)
        counted = decided | beam.combiners.Count.Globally()
        counted | beam.Map(lambda n: print(f"{'drops' if join else 'pages'}: {n}", flush=True))
    return {"wall_s": round(time.monotonic() - started, 1), "cpu_s": round(time.process_time() - cpu, 1),
            "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)}


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--hosts", type=int, default=1_000_000)
    ap.add_argument("--pages-per-host", type=int, default=3)
    ap.add_argument("--json")
    args = ap.parse_args(argv)
    baseline = run(args.hosts, args.pages_per_host, join=False)
    joined = run(args.hosts, args.pages_per_host, join=True)
    pages = args.hosts * args.pages_per_host
    result = {"hosts": args.hosts, "pages": pages, "without_join": baseline, "with_join": joined,
              "join_cpu_ms_per_page": round(1000 * (joined["cpu_s"] - baseline["cpu_s"]) / pages, 3),
              "join_peak_rss_mb_over_baseline": joined["peak_rss_mb"] - baseline["peak_rss_mb"]}
    print(json.dumps(result, indent=1))
    if args.json:
        with open(args.json, "w", encoding="utf-8") as fh:
            json.dump(result, fh, indent=1)


if __name__ == "__main__":
    main()
