"""Where the scripts that rebuild the bundled models, lists and thresholds find the workspace's shared data sets
(../shared/data beside the checkout, or REFINERY_SHARED_DATA), which a clone does not include, and the one line they
print when a set is missing (exit 2), instead of a traceback."""
from __future__ import annotations

import os
import sys

ROOT = os.path.normpath(os.environ.get("REFINERY_SHARED_DATA") or os.path.join(
    os.path.dirname(os.path.abspath(__file__)), "..", "..", "shared", "data"))


def path(*parts: str) -> str:
    return os.path.join(ROOT, *parts)


def require(script: str, needed: dict[str, str], option: str = "") -> None:
    """Exit 2 with one line naming what is missing (`needed`: path -> what it is) and how to point the script at a
    copy: REFINERY_SHARED_DATA, or `option` where the script has one (`--data`)."""
    missing = [f"{where} ({what})" for where, what in needed.items() if not os.path.exists(where)]
    if missing:
        how = f"REFINERY_SHARED_DATA (or {option})" if option else "REFINERY_SHARED_DATA"
        print(f"{script}: error: needs {'; '.join(missing)}: the workspace's shared data sets, which a clone of "
              f"this repository does not include; set {how} to where a copy lies", file=sys.stderr)
        sys.exit(2)


# The reference-text sets of shared/data/multilingual, by folder: what a rebuild needs of them
REFERENCE_SETS = {"ntrex128": "NTREX-128 news in 128 languages", "sib200_flores": "FLORES-200 sentences",
                  "tatoeba_laser": "Tatoeba sentences"}


def multilingual_args(argv, description: str, output: str, script: str, sets: tuple[str, ...]):
    """--data (shared/data/multilingual) and --output of a rebuild from reference text; exits 2 with one line when
    one of `sets` (REFERENCE_SETS folders) is missing."""
    import argparse

    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--data", default=path("multilingual"))
    parser.add_argument("--output", default=output)
    args = parser.parse_args(argv)
    require(script, {os.path.join(args.data, folder): REFERENCE_SETS[folder] for folder in sets}, "--data")
    return args
