"""The files derived from the stage table and the config classes: `configs/default.yaml` and the stage and
drop-reason tables of `docs/stages.md`. A test fails when they are out of date.

    python -m pipeline.commands.docs --write    # after adding a stage or changing a setting
    python -m pipeline.commands.docs --check    # exit 1 if a derived file differs
"""
from __future__ import annotations

import argparse
import pathlib
import sys

from pipeline.job.config import TABLE, RunConfig, default_yaml
from stages.table import reason_rows

REPO = pathlib.Path(__file__).resolve().parents[2]
DEFAULT_CONFIG = REPO / "configs" / "default.yaml"
README = REPO / "docs" / "stages.md"  # the page that holds the generated tables
BEGIN, END = "<!-- stage-table:begin (python -m pipeline.commands.docs --write) -->", "<!-- stage-table:end -->"


def stage_tables() -> str:
    """Markdown: the stages in order, then every drop reason."""
    defaults = RunConfig()
    lines = ["| # | stage | runs | settings | on by default | what it does |", "|---|---|---|---|---|---|"]
    for number, spec in enumerate(TABLE, start=1):
        section = f"`{spec.section}`" if spec.section else ""
        lines.append(f"| {number} | {spec.name} | {spec.runs} | {section} | "
                     f"{'yes' if spec.is_enabled(defaults) else 'no'} | {spec.about} |")
    lines += ["", "| stage | reason | meaning |", "|---|---|---|"]
    lines += [f"| {stage} | `{reason}` | {meaning} |" for stage, reason, meaning in reason_rows(TABLE)]
    return "\n".join(lines)


def readme_with_tables(text: str) -> str:
    if BEGIN not in text or END not in text:
        raise ValueError(f"{README.relative_to(REPO)} has no {BEGIN!r} ... {END!r} block")
    head, rest = text.split(BEGIN, 1)
    _, tail = rest.split(END, 1)
    return f"{head}{BEGIN}\n{stage_tables()}\n{END}{tail}"


def derived_files() -> dict[pathlib.Path, str]:
    return {DEFAULT_CONFIG: default_yaml(), README: readme_with_tables(README.read_text(encoding="utf-8"))}


def main(argv: list[str] = None) -> int:
    p = argparse.ArgumentParser(prog="python -m pipeline.commands.docs", description=__doc__.split("\n\n")[0])
    p.add_argument("--write", action="store_true", help="rewrite the derived files")
    p.add_argument("--check", action="store_true", help="exit 1 if a derived file is out of date")
    args = p.parse_args(argv)
    stale = [path for path, text in derived_files().items() if path.read_text(encoding="utf-8") != text]
    if args.write:
        for path, text in derived_files().items():
            path.write_text(text, encoding="utf-8")
        print(f"wrote {', '.join(str(p.relative_to(REPO)) for p in derived_files())}")
        return 0
    for path in stale:
        print(f"{path.relative_to(REPO)} is out of date: python -m pipeline.commands.docs --write", file=sys.stderr)
    return 1 if stale else 0


if __name__ == "__main__":
    sys.exit(main())
