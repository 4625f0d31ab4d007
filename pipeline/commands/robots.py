"""`refinery robots check ROBOTS_FILE URL [--agent NAME ...]`: what a robots.txt says of one URL, and which line said it.

For users debugging an opt-out decision and for conformance suites: prints `allowed` or `disallowed` per agent
with the deciding line, exit 0 either way, 2 for a bad argument. The URL is matched as given, as RFC 9309's
matchers do (a crawler percent-encodes its URLs first; the pipeline does so for every page).
"""
from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from stages.optout.robots import MAX_BYTES, RobotsRules


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="refinery robots", description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="action", required=True)
    check = sub.add_parser("check", help="allowed or disallowed, and the deciding line")
    check.add_argument("robots_file", metavar="ROBOTS_FILE", help="a robots.txt file (- for standard input)")
    check.add_argument("url", metavar="URL")
    check.add_argument("--agent", action="append", default=None, metavar="NAME",
                       help="a crawler's product token, e.g. GPTBot (repeatable; default: *, the rules for any crawler)")
    args = parser.parse_args(argv)
    try:
        if args.robots_file == "-":
            content = sys.stdin.buffer.read(MAX_BYTES)
        else:
            with open(args.robots_file, "rb") as fh:
                content = fh.read(MAX_BYTES)
    except OSError as exc:
        print(f"refinery robots: error: cannot read {args.robots_file}: {exc.strerror or exc}", file=sys.stderr)
        return 2
    rules = RobotsRules.parse(content)
    agents = args.agent or ["*"]
    for agent in agents:
        decision = rules.decide("" if agent == "*" else agent, args.url)
        line = decision.describe()
        print(line if len(agents) == 1 else f"{agent}: {line}")
    if not args.url.isascii():
        print("note: the URL has characters outside ASCII; crawlers match it percent-encoded (RFC 9309 2.2.2): "
              "pass it encoded to see what they do", file=sys.stderr)
    return 0
