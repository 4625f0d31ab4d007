"""Refinery's version, as every command and every output reports it."""
from __future__ import annotations


def version() -> str:
    """The installed distribution's version (setup.py), as every command reports it."""
    from importlib.metadata import PackageNotFoundError
    from importlib.metadata import version as installed

    try:
        return installed("refinery")
    except PackageNotFoundError:  # run from a source tree that was never installed
        return "unknown (not installed)"
