"""robots.txt under RFC 9309: Google's conformance cases, the RFC's own examples, the files sites publish."""
from __future__ import annotations

import json
import os

import pytest

from stages.optout.robots import MAX_BYTES, MAX_LINE_BYTES, RobotsRules, encode_pattern, matches, path_of
from tests.conftest import REPO as REPO_ROOT
from tests.conftest import SHARED_DATA, TEST_DATA

CASES = TEST_DATA / "robots_conformance" / "rfc_cases.json"
SHARED_CASES = SHARED_DATA / "optout" / "robots_conformance" / "cases_corrected.json"


def rfc_cases() -> list[dict]:
    return json.loads(CASES.read_text(encoding="utf-8"))


@pytest.mark.parametrize("case", rfc_cases(), ids=lambda c: c["test"])
def test_every_rfc_case_of_googles_conformance_suite(case):
    assert RobotsRules.parse(case["robots"]).allowed(case["agent"], case["url"]) is case["allowed"]


def test_the_repo_cases_are_the_shared_corrected_ones():
    """The repo's copy of the 72 RFC cases is the shared cases_corrected.json less its Google-only cases, field for
    field (`corrected` marks the 27 whose robots.txt the first port took from another block of the same C++ test)."""
    if not SHARED_CASES.exists():
        pytest.skip(f"{SHARED_CASES} is not here (a clone without ../shared)")
    shared = [c for c in json.loads(SHARED_CASES.read_text(encoding="utf-8")) if not c["google_only"]]
    ours = rfc_cases()
    assert len(shared) == len(ours) == 72
    fields = ("test", "robots", "agent", "url", "allowed")
    assert [{k: c[k] for k in fields} for c in shared] == [{k: c[k] for k in fields} for c in ours]


RFC_5_1 = """User-Agent: *
Disallow: *.gif$
Disallow: /example/
Allow: /publications/

User-Agent: foobot
Disallow:/
Allow:/example/page.html
Allow:/example/allowed.gif

User-Agent: barbot
User-Agent: bazbot
Disallow: /example/page.html

User-Agent: quxbot

EOF
"""


def test_the_rfcs_simple_example():
    """RFC 9309 5.1, with the meaning its text gives each group."""
    rules = RobotsRules.parse(RFC_5_1)
    site = "https://www.example.com"
    assert rules.allowed("foobot", f"{site}/example/page.html") and rules.allowed("foobot", f"{site}/example/allowed.gif")
    assert not rules.allowed("foobot", f"{site}/example/other.html") and not rules.allowed("foobot", f"{site}/")
    for bot in ("barbot", "bazbot"):
        assert not rules.allowed(bot, f"{site}/example/page.html") and rules.allowed(bot, f"{site}/example/other")
    assert rules.allowed("quxbot", f"{site}/example/page.html") and rules.allowed("quxbot", f"{site}/x.gif")
    assert not rules.allowed("otherbot", f"{site}/pic.gif") and not rules.allowed("otherbot", f"{site}/example/")
    assert rules.allowed("otherbot", f"{site}/publications/") and rules.allowed("otherbot", f"{site}/pic.gif?x=1")


def test_the_rfcs_longest_match_example():
    """RFC 9309 5.2."""
    rules = RobotsRules.parse("User-Agent: foobot\nAllow: /example/page/\nDisallow: /example/page/disallowed.gif\n")
    assert rules.allowed("foobot", "https://www.example.com/example/page/")
    decision = rules.decide("foobot", "https://www.example.com/example/page/disallowed.gif")
    assert not decision.allowed and decision.rule.line == 3


def test_special_characters_and_encoding_as_the_rfc_tables_show():
    """RFC 9309 2.2.2 and 2.2.3: `#` comments, `$` ends, `*` any run; non-ASCII encoded, escapes upper-cased."""
    assert encode_pattern("/foo/bar/ツ") == encode_pattern("/foo/bar/%e3%83%84") == "/foo/bar/%E3%83%84"
    assert matches("/this/path/exactly", "/this/path/exactly$") and not matches("/this/path/exactly/x", "/this/path/exactly$")
    assert matches("/this/a/b/exactly", "/this/*/exactly") and matches("/x", "/x$*") is False
    rules = RobotsRules.parse("user-agent: *\nallow: / # comment in line\ndisallow: /private\n")
    assert rules.allowed("a", "http://h/public") and not rules.allowed("a", "http://h/private/x")
    assert path_of("http://h/a/b?c=d#frag") == "/a/b?c=d" and path_of("http://h") == "/" and path_of("http://h?q") == "/?q"


def test_unavailable_and_unreachable_files_as_the_rfc_says():
    """RFC 9309 2.3.1.3-4: a 4xx file allows everything; a 5xx or no answer disallows everything."""
    body = b"user-agent: *\ndisallow: /\n"
    assert RobotsRules.for_status(404, body).allowed("GPTBot", "http://h/a")
    assert not RobotsRules.for_status(503, body).allowed("GPTBot", "http://h/a")
    assert not RobotsRules.for_status(None).allowed("GPTBot", "http://h/a")
    assert not RobotsRules.for_status(200, body).allowed("GPTBot", "http://h/a")


def test_files_as_sites_write_them():
    """A BOM, CRLF and CR line ends, comments, AI crawler groups next to a * group, agent names with versions."""
    text = ("\ufeffUser-agent: GPTBot\r\nDisallow: /\r\n\r\n# AI crawlers\rUser-agent: CCBot/2.0\rUser-agent: "
            "Google-Extended\rDisallow: /articles/\r\nUser-agent: *\nAllow: /\nDisallow: /admin$\n")
    rules = RobotsRules.parse(text.encode("utf-8"))
    assert not rules.allowed("GPTBot", "https://news.example/")
    assert not rules.allowed("CCBot", "https://news.example/articles/1") and rules.allowed("ccbot", "https://news.example/")
    assert not rules.allowed("google-extended", "https://news.example/articles/2")
    assert rules.allowed("Bingbot", "https://news.example/admin/x") and not rules.allowed("Bingbot", "https://news.example/admin")
    assert rules.decide("GPTBot", "https://news.example/").describe() == "disallowed by line 2: Disallow: /"


def test_googles_leniencies_followed_and_the_one_not():
    assert not RobotsRules.parse("useragent: a\ndissallow: /\n").allowed("a", "http://h/x")  # misspelt names
    assert not RobotsRules.parse("user-agent a\ndisallow /\n").allowed("a", "http://h/x")    # no colon
    assert RobotsRules.parse("user-agent a b\ndisallow /x y\n").allowed("a", "http://h/x")   # not two tokens
    assert not RobotsRules.parse("user-agent: * everyone\ndisallow: /\n").allowed("z", "http://h/x")
    # index.html is not read as its directory: an Allow is not widened beyond what the file says
    index = RobotsRules.parse("User-Agent: *\nAllow: /allowed-slash/index.html\nDisallow: /\n")
    assert not index.allowed("foobot", "http://foo.com/allowed-slash/")


def test_the_500_kib_limit_and_long_lines():
    padding = "# " + "x" * 1000 + "\n"
    far = "user-agent: *\n" + padding * (MAX_BYTES // len(padding) + 1) + "disallow: /\n"
    assert RobotsRules.parse(far.encode()).allowed("a", "http://h/x")   # past 500 KiB: not read
    assert not RobotsRules.parse(far[:2000] + "\ndisallow: /\n").allowed("a", "http://h/x")  # within it: read
    long_rule = "/x/" + "a" * MAX_LINE_BYTES
    rules = RobotsRules.parse(f"user-agent: a\ndisallow: {long_rule}/qux\n")
    assert not rules.allowed("a", f"http://h{long_rule}/fux") and rules.allowed("a", "http://h/fux")


def test_the_cli_prints_the_decision_for_every_case(capsys):
    from pipeline.commands.robots import main

    for i, case in enumerate(rfc_cases()):
        path = CASES.parent / f".case-{os.getpid()}.txt"
        path.write_text(case["robots"], encoding="utf-8")
        try:
            assert main(["check", str(path), case["url"], "--agent", case["agent"] or "*"]) == 0
        finally:
            path.unlink()
        out = capsys.readouterr().out.strip()
        assert out.split()[0] == ("allowed" if case["allowed"] else "disallowed"), (i, case, out)


def test_the_cli_refuses_bad_arguments_with_one_line(tmp_path):
    import subprocess
    import sys

    robots = tmp_path / "robots.txt"
    robots.write_text("User-agent: GPTBot\nDisallow: /\n", encoding="utf-8")
    ok = subprocess.run([sys.executable, "-m", "pipeline.cli", "robots", "check", str(robots), "https://h.example/a",
                         "--agent", "GPTBot", "--agent", "Bingbot"], capture_output=True, text=True, cwd=REPO_ROOT)
    assert ok.returncode == 0 and ok.stdout.splitlines() == [
        "GPTBot: disallowed by line 2: Disallow: /", "Bingbot: allowed (no group applies)"]
    missing = subprocess.run([sys.executable, "-m", "pipeline.cli", "robots", "check", str(tmp_path / "none"), "u"],
                             capture_output=True, text=True, cwd=REPO_ROOT)
    assert missing.returncode == 2 and len(missing.stderr.strip().splitlines()) == 1 and "cannot read" in missing.stderr


def _decide_by_scan(rules: RobotsRules, agent: str, url: str):
    """RFC 9309's rule read literally: every rule of the obeyed groups against the path, the longest match wins,
    an Allow a tie, the first in the file among equals. The compiled matcher must say the same."""
    token = agent.lower()
    specific = [g for g in rules.groups if token in g.agents]
    chosen = specific or [g for g in rules.groups if g.is_global]
    path = path_of(url)
    best = {True: None, False: None}
    for group in chosen:
        for rule in group.rules:
            if rule.pattern and matches(path, rule.pattern):
                held = best[rule.allow]
                if held is None or len(rule.pattern) > len(held.pattern):
                    best[rule.allow] = rule
    allow, disallow = best[True], best[False]
    if disallow is not None and (allow is None or len(disallow.pattern) > len(allow.pattern)):
        return False, disallow
    return True, allow


def test_the_compiled_rules_decide_as_a_scan_of_every_rule_does():
    """Random files of prefix, `*` and `$` rules over a small alphabet (so that rules and paths share text, ties
    and near misses are frequent) for three agents, and random paths: the compiled matcher (rules indexed by
    prefix and 4-character runs, longest first) gives the same verdict and the same deciding line as the scan."""
    import random

    rng = random.Random(7)
    alphabet = "ab/.-"

    def text(n):
        return "".join(rng.choice(alphabet) for _ in range(n))

    for _ in range(60):
        lines = []
        for agent in ("* ", "gptbot", "ccbot"):
            lines.append(f"User-agent: {agent.strip()}")
            for _ in range(rng.randrange(1, 40)):
                pieces = [text(rng.randrange(0, 7)) for _ in range(rng.randrange(1, 4))]
                pattern = "/" + "*".join(pieces) + ("$" if rng.random() < 0.3 else "")
                lines.append(f"{rng.choice(['Allow', 'Disallow'])}: {pattern}")
        rules = RobotsRules.parse("\n".join(lines))
        for _ in range(40):
            url = "https://x.example/" + text(rng.randrange(0, 30))
            for agent in ("GPTBot", "CCBot", "other"):
                want_allowed, want_rule = _decide_by_scan(rules, agent, url)
                got = rules.decide(agent, url)
                assert (got.allowed, got.rule) == (want_allowed, want_rule), (lines, url, agent)


def test_a_500_kib_file_of_wildcard_rules_for_every_agent_is_compiled_once_for_the_group():
    """The hostile file: every AI agent named in one group over 500 KiB of `*` rules, and paths of 2,000
    characters. The group's rules are compiled once for all its agents and a page tries only the rules that share
    text with its path (the speed, against the scan: bench/robots_match.py)."""
    import random

    from stages.optout.agents import TRAINING_AGENTS

    rng = random.Random(0)
    head = "".join(f"User-agent: {a}\n" for a in TRAINING_AGENTS)
    body = head + "".join(f"Disallow: /*a{rng.randrange(10**6)}*b{rng.randrange(10**6)}*c$\n" for _ in range(16_000))
    rules = RobotsRules.parse(body.encode()[:MAX_BYTES])
    paths = ["https://x.example/" + "/".join(f"a{rng.randrange(10**6)}" for _ in range(250)) for _ in range(20)]
    verdicts = [rules.decide(agent, url).allowed for url in paths for agent in TRAINING_AGENTS]
    assert all(verdicts) and len(rules._compiled) == 1  # one compiled set of rules for the 48 agents
    hit = "https://x.example/" + body.split("Disallow: /*", 2)[1].split("\n")[0].replace("*", "/").rstrip("$")
    assert not rules.decide("GPTBot", hit).allowed and _decide_by_scan(rules, "GPTBot", hit)[0] is False
