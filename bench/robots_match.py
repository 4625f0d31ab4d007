"""robots.txt matching on hostile files: a page's decision with the compiled rules (stages/optout/robots.py
`CompiledRules`) against a scan of every rule for every agent (RFC 9309 read literally: what the matcher did
before, and what tests/stages/optout/test_robots.py checks it against), in the same run, one core.

    .venv/bin/python bench/robots_match.py [--pages 20]

Files, each cut at RFC 9309's 500 KiB: `one group`: every training agent (stages/optout/agents.py) named in one
group over ~16,600 `Disallow: /*aN*bN*c$` rules; `a group per agent`: each agent its own group of 40 such rules,
repeated to 500 KiB; `prefix rules`: one group of ~20,000 `Disallow: /dirN/` rules. Paths of ~2,000 characters
(250 segments `aN`); every page is judged for every agent, as the job does.
"""
from __future__ import annotations

import argparse
import os
import random
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from stages.optout.agents import TRAINING_AGENTS  # noqa: E402
from stages.optout.robots import MAX_BYTES, RobotsRules  # noqa: E402
from tests.stages.optout.test_robots import _decide_by_scan  # noqa: E402


def files(rng: random.Random) -> dict[str, bytes]:
    def wild() -> str:
        return f"Disallow: /*a{rng.randrange(10**6)}*b{rng.randrange(10**6)}*c$\n"

    one = "".join(f"User-agent: {a}\n" for a in TRAINING_AGENTS) + "".join(wild() for _ in range(17_000))
    per_agent = "".join(f"User-agent: {a}\n" + "".join(wild() for _ in range(40)) for a in TRAINING_AGENTS * 10)
    prefix = "".join(f"User-agent: {a}\n" for a in TRAINING_AGENTS) + "".join(
        f"Disallow: /dir{rng.randrange(10**6)}/\n" for _ in range(30_000))
    return {name: text.encode()[:MAX_BYTES] for name, text in
            (("one group", one), ("a group per agent", per_agent), ("prefix rules", prefix))}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--pages", type=int, default=20)
    args = ap.parse_args()
    rng = random.Random(0)
    urls = ["https://x.example/" + "/".join(f"a{rng.randrange(10**6)}" for _ in range(250)) for _ in range(args.pages)]
    print("| file | rules | scan: ms a page | compiled: ms a page (parse and compile included) | ratio | same verdicts |")
    print("|---|---|---|---|---|---|")
    for name, body in files(rng).items():
        rules = RobotsRules.parse(body)
        started = time.perf_counter()
        scanned = [_decide_by_scan(rules, agent, url) for url in urls for agent in TRAINING_AGENTS]
        scan = (time.perf_counter() - started) / len(urls)
        started = time.perf_counter()
        fresh = RobotsRules.parse(body)
        compiled = [fresh.decide(agent, url) for url in urls for agent in TRAINING_AGENTS]
        fast = (time.perf_counter() - started) / len(urls)
        same = all((d.allowed, d.rule) == s for d, s in zip(compiled, scanned))
        count = sum(len(g.rules) for g in rules.groups)
        print(f"| {name} | {count:,} | {scan * 1000:,.1f} | {fast * 1000:,.2f} | {scan / fast:,.0f}x | {same} |")


if __name__ == "__main__":
    main()
