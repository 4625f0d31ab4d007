"""The README as a script: every shell (and Python) block of README.md and of the docs/ pages it links to, in that
order, run in a temporary folder on the demo data, so that the documentation cannot drift from what the commands do
(issue 37; the pages since issue 54).

    .venv/bin/python scripts/readme_check.py [--keep DIR] [--list] [--from PAGE:LINE]
    make docs-test

What is changed before a command runs, and only this:
- the placeholders of the examples written for your data: `crawl/*.warc.gz` and `june/*.warc.gz` read the
  bundled `data/warc/*.warc.gz`; `--id ID` takes the first id of out/demo's ledger;
- the shell is the one the README asks for after `make demo` (`source .venv/bin/activate`);
- optional arguments in brackets (`[--resume]`) are left out and of alternatives (`ddp|fsdp`) the first is
  taken;
- with README_SMALL=1 (the default; README_SMALL=0 runs the sizes as written) training runs 8 steps, the
  ablation 20,000 tokens and one seed, the tokenizer a 1,000-word vocabulary.
A command that needs what a test machine lacks (a cloud bucket, a cluster you name, an LLM server, files of
your own, `...` for arguments left out) is not run; it is listed with the reason. The first command that
fails stops the check: its output's tail and exit code are printed, and the exit code is 1.
"""
from __future__ import annotations

import argparse
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SKIP = (  # (pattern, why a test machine cannot run it)
    (r"^make test\b", "the test suite itself"),
    (r"s3://|gs://", "needs a cloud bucket"),
    (r"SCHEDULER|FLINK_HOST|SPARK_HOST|\bdocker\b", "needs a cluster you name"),
    (r"^refinery slurm\b", "needs a Slurm cluster (tests/pipeline/engines/test_slurm.py starts one)"),
    (r"--endpoint\s+http", "needs an OpenAI-compatible LLM server"),
    (r"(^|\s)\.\.\.(\s|$)", "arguments left out (...)"),
    (r"good\.jsonl|scored\.jsonl", "needs your labelled files"),
    (r"^python -c '(?![\s\S]*\bimport )", "a fragment (the stage modules show it whole)"),
)
SMALL = (  # README_SMALL=1: (pattern, replacement) on training, ablation and tokenizer commands
    (r"--steps\s+\d+", "--steps 8"),
    (r"--tokens\s+\d+", "--tokens 20000"),
    (r"--seeds\s+\d+", "--seeds 1"),
    (r"--vocab-size\s+\d+", "--vocab-size 1000"),
)
OPTIONAL = re.compile(r"\s*\[-[^\[\]]*\]")  # [--flag VALUE]; not a glob's [!c]
TRAINS = re.compile(r"refinery train\b(?!-)|training\.train\b")


def commands(readme: str) -> list[tuple[int, str]]:
    """(line number, command) of every ```sh block's commands (continuation lines joined, comment lines dropped)
    and of every ```python block, whole, as `python -c '...'`."""
    found, block, start, pending, code = [], "", 0, "", []
    for number, line in enumerate(readme.splitlines(), 1):
        if line.startswith("```"):
            if block == "python" and code:
                found.append((start, "python -c " + shlex.quote("\n".join(code))))
            block = line.strip()[3:] if not block else ""
            code, start = [], number + 1
            continue
        if block == "python":
            code.append(line)
            continue
        if block not in ("sh", "bash") or (not pending and (not line.strip() or line.lstrip().startswith("#"))):
            continue
        if not pending:
            start = number
        pending += line.rstrip("\\").rstrip() + " " if line.rstrip().endswith("\\") else line
        if not line.rstrip().endswith("\\"):
            found.append((start, " ".join(pending.split())))
            pending = ""
    return found


def pages(root: str | None = None) -> list[tuple[str, str]]:
    """(name, text) of README.md and of each docs/ page it links to, in the order of the links."""
    root = root or ROOT
    with open(os.path.join(root, "README.md"), encoding="utf-8") as fh:
        readme = fh.read()
    linked = list(dict.fromkeys(re.findall(r"\]\((docs/[\w-]+\.md)\)", readme)))
    found = [("README.md", readme)]
    for name in linked:
        with open(os.path.join(root, name), encoding="utf-8") as fh:
            found.append((name, fh.read()))
    return found


def sample_outputs(readme: str) -> dict[str, list[str]]:
    """{command: lines} for each plain block that follows a sentence saying `command` prints it "(real output)"."""
    samples, lines = {}, readme.splitlines()
    for i, line in enumerate(lines):
        said = re.search(r"`([^`]+)` (?:writes \S+ and )?prints .*\(real output\):$", line)
        if said and i + 2 < len(lines) and lines[i + 2] == "```":
            end = lines.index("```", i + 3)
            samples[said.group(1)] = [row.rstrip() for row in lines[i + 3:end]]
    return samples


def differences(sample: list[str], output: str) -> list[str]:
    """The sample's lines the output does not print."""
    printed = {row.rstrip() for row in output.splitlines()}
    return [row for row in sample if row not in printed]


def namespaces_work() -> bool:
    """Whether `unshare -n` works here (root or user namespaces): the local clusters run inside one."""
    if shutil.which("unshare") is None or shutil.which("ip") is None:
        return False
    probe = ["unshare", "-n", "true"] if os.geteuid() == 0 else ["unshare", "-r", "-n", "true"]
    return subprocess.run(probe, capture_output=True).returncode == 0


NO_NAMESPACES = "needs `unshare -n` (root or user namespaces) for its loopback-only cluster"


def prepared(command: str, small: bool, demo_id: str | None, namespaces: bool = True) -> tuple[str | None, str]:
    """(the command to run, or None; what was changed or why it is not run)."""
    for pattern, why in SKIP:
        if re.search(pattern, command):
            return None, why
    if not namespaces and re.search(r"make (dask|cluster|slurm)-demo", command):
        return None, NO_NAMESPACES
    if re.search(r"make slurm-demo", command) and os.geteuid() != 0:
        return None, "needs root: Slurm's daemons run as root (`make slurm-demo` as root starts them)"
    run = command
    while OPTIONAL.search(run):
        run = OPTIONAL.sub("", run)
    run = re.sub(r"(?<=\s)([^\s|'\"]+)\|[^\s'\"]+", r"\1", run)   # ddp|fsdp -> ddp (never a pipe: it has spaces)
    run = re.sub(r"'(crawl|june)/\*\.warc\.gz'", "'data/warc/*.warc.gz'", run)
    if "--id ID" in run:
        if demo_id is None:
            return None, "no ledger id in out/demo"
        run = run.replace("--id ID", f"--id '{demo_id}'")
    if small:
        for pattern, replacement in SMALL:
            run = re.sub(pattern, replacement, run)
        if TRAINS.search(run) and "--steps" not in run:
            run = re.sub(r"(\s#.*)?$", r" --steps 8\1", run, count=1)
    return run, "" if run == command else "as run"


def shown(command: str) -> str:
    lines = command.splitlines()
    return lines[0] + (f" ... ({len(lines)} lines)'" if len(lines) > 1 else "")


def first_ledger_id(workdir: str) -> str | None:
    path = os.path.join(workdir, "out", "demo", "ledger")
    if not os.path.isdir(path):
        return None
    import pyarrow.parquet as pq

    ids = pq.read_table(path, columns=["id"]).column("id").to_pylist()
    return min(ids) if ids else None


def activated(workdir: str) -> dict[str, str]:
    """The environment after the README's `source .venv/bin/activate`."""
    venv = os.path.join(workdir, ".venv")
    return {**os.environ, "VIRTUAL_ENV": venv, "PATH": os.path.join(venv, "bin") + os.pathsep + os.environ["PATH"],
            "PYTHONUNBUFFERED": "1"}


def checkout_entries(root: str = ROOT) -> list[str]:
    """The top-level entries of the checkout that are the project's (tracked by git), and its .venv: not what the
    README's commands write when a user ran them by hand (refined/, out/, plan.json, ...)."""
    listed = subprocess.run(["git", "-C", root, "ls-files", "-z"], capture_output=True, text=True)
    if listed.returncode != 0:  # not a git checkout (an unpacked sdist): the package's own folders and files
        return sorted(e for e in os.listdir(root) if e in OWN_WITHOUT_GIT or e.endswith((".md", ".py", ".toml", ".ini")))
    tracked = {path.split("/", 1)[0] for path in listed.stdout.split("\0") if path}
    return sorted(tracked | ({".venv"} if os.path.isdir(os.path.join(root, ".venv")) else set()))


OWN_WITHOUT_GIT = {".venv", "Makefile", "LICENSE", "bench", "common", "configs", "data", "docs", "pipeline", "scripts",
                   "stages", "tests", "training"}


def workspace(keep: str | None) -> str:
    """A folder that looks like a fresh checkout (the project's top-level entries linked) with nothing of the
    outputs a user's earlier commands left in theirs."""
    workdir = keep or tempfile.mkdtemp(prefix="readme-check-")
    os.makedirs(workdir, exist_ok=True)
    for entry in checkout_entries(ROOT):
        if not os.path.lexists(os.path.join(workdir, entry)):
            os.symlink(os.path.join(ROOT, entry), os.path.join(workdir, entry))
    return workdir


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--keep", metavar="DIR", help="run in DIR and keep it (default: a temporary folder, removed)")
    parser.add_argument("--list", action="store_true", help="print what would run, run nothing")
    parser.add_argument("--from", dest="start", default="", metavar="PAGE:LINE",
                        help="start at this page's line (README.md:120, docs/training.md:1; with --keep DIR of an "
                             "earlier check)")
    parser.add_argument("--timeout", type=float, default=900, help="seconds per command")
    args = parser.parse_args()
    small = os.environ.get("README_SMALL", "1") != "0"
    everything = [(page, line, command) for page, text in pages() for line, command in commands(text)]
    start_page, _, start_line = args.start.rpartition(":") if ":" in args.start else ("README.md", "", args.start)
    order = [page for page, _ in pages()]
    if args.start and start_page not in order:
        parser.error(f"--from {args.start}: no page {start_page!r} (pages: {', '.join(order)})")
    first = (order.index(start_page), int(start_line or 0)) if args.start else (0, 0)
    todo = [(f"{page}:{line}", command) for page, line, command in everything
            if (order.index(page), line) >= first]
    samples = {k: v for _, text in pages() for k, v in sample_outputs(text).items()}
    namespaces = namespaces_work()
    workdir = workspace(args.keep)
    ran, skipped, started = 0, [], time.monotonic()
    try:
        for line, command in todo:
            demo_id = first_ledger_id(workdir) if "--id ID" in command else None
            run, note = prepared(command, small, demo_id, namespaces)
            if run is None:
                skipped.append((line, command, note))
                print(f"{line}: not run ({note}): {shown(command)}", flush=True)
                continue
            print(f"{line}: {shown(run)}" + (f"   [as written: {shown(command)}]" if note else ""), flush=True)
            if args.list:
                continue
            began = time.monotonic()
            try:
                done = subprocess.run(["bash", "-c", run], cwd=workdir, capture_output=True, text=True,
                                      timeout=args.timeout, env=activated(workdir))
                code, output = done.returncode, done.stdout + done.stderr
            except subprocess.TimeoutExpired as exc:
                code, output = "timeout", (exc.stdout or b"").decode(errors="replace") if isinstance(
                    exc.stdout, bytes) else (exc.stdout or "")
            print(f"    exit {code} in {time.monotonic() - began:.0f} s", flush=True)
            stale = differences(samples.get(command.split(" #")[0].strip(), []), output) if code == 0 else []
            if stale:
                code, output = "stale", "the README's sample output has lines this run did not print:\n" + "\n".join(stale)
            if code != 0:
                print("\n".join("    | " + row for row in output.splitlines()[-40:]))
                print(f"README check FAILED at {line} (workspace kept: {workdir})")
                args.keep = workdir
                return 1
            ran += 1
    finally:
        if not args.keep:
            shutil.rmtree(workdir, ignore_errors=True)
    print(f"README check passed: {ran} command(s) run, {len(skipped)} not run (listed above with the reason), "
          f"{time.monotonic() - started:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
