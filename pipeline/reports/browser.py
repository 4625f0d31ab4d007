"""Open an HTML report in headless Chromium: the DOM after its scripts ran, console messages, a screenshot.

    python -m pipeline.reports.browser out/demo/report.html docs/report.png   # the README's picture

Chromium is the Debian package (`apt-get install chromium`); the page is a local file and the
browser gets no network (`--no-proxy-server`, and a loopback-only host resolver).
"""
from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass

CANDIDATES = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")
_CONSOLE = re.compile(r":CONSOLE(?:\(\d+\)|:\d+)\]? ?(.*)")


def find_chromium() -> str | None:
    for name in CANDIDATES:
        path = shutil.which(name)
        if path:
            return path
    return None


@dataclass
class PageLoad:
    dom: str                  # the document after its scripts ran
    console: list[str]        # console messages and uncaught errors, as Chromium logs them


def _flags(width: int, height: int) -> list[str]:
    return ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--no-proxy-server",
            "--host-resolver-rules=MAP * ~NOTFOUND", "--disable-background-networking",
            f"--window-size={width},{height}", "--enable-logging=stderr", "--v=0"]


def _run(chromium: str, args: list[str], timeout_s: float) -> subprocess.CompletedProcess:
    home = os.environ.get("TMPDIR", "/tmp")
    return subprocess.run([chromium, *args], capture_output=True, text=True, timeout=timeout_s,
                          env={**os.environ, "HOME": home}, check=False)


def load(html_path: str, width: int = 1280, height: int = 2000, timeout_s: float = 120) -> PageLoad:
    chromium = find_chromium()
    if chromium is None:
        raise FileNotFoundError("no Chromium found (apt-get install chromium)")
    url = "file://" + os.path.abspath(html_path)
    done = _run(chromium, [*_flags(width, height), "--dump-dom", url], timeout_s)
    console = [m.group(1) for m in map(_CONSOLE.search, done.stderr.splitlines()) if m]
    return PageLoad(dom=done.stdout, console=console)


def screenshot(html_path: str, png_path: str, width: int = 1280, height: int = 2400, timeout_s: float = 120) -> str:
    chromium = find_chromium()
    if chromium is None:
        raise FileNotFoundError("no Chromium found (apt-get install chromium)")
    os.makedirs(os.path.dirname(os.path.abspath(png_path)), exist_ok=True)
    url = "file://" + os.path.abspath(html_path)
    done = _run(chromium, [*_flags(width, height), f"--screenshot={os.path.abspath(png_path)}", url], timeout_s)
    if not os.path.exists(png_path):
        raise RuntimeError(f"Chromium wrote no screenshot: {done.stderr[-500:]}")
    return png_path


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 2:
        print("usage: python -m pipeline.reports.browser REPORT.html OUT.png", file=sys.stderr)
        return 2
    print(screenshot(args[0], args[1]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
