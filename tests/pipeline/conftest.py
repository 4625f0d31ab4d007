"""The bundled real WARC files through the whole job, once per test session (several modules read it)."""
import json
import shutil

import pytest

from pipeline.job.run import run
from tests.conftest import SENTENCES_DIR, WARC_DIR, built_once

WARC_GLOB = str(WARC_DIR / "*.warc.gz")


@pytest.fixture(scope="session")
def demo_run(tmp_path_factory):
    """(output folder, report) of `refinery run` on data/warc/ with every default; read it, never write to it."""
    def build(out):
        return out, run(["--input", WARC_GLOB, "--output", str(out), "--quiet"])

    return built_once(tmp_path_factory, "demo", build)


def prose_jsonl(path, langs, per_doc=12, docs=None):
    rows = []
    for lang in langs:
        lines = (SENTENCES_DIR / f"{lang}.txt").read_text(encoding="utf-8").splitlines()
        for i in range(0, len(lines) - per_doc + 1, per_doc):
            rows.append({"text": " ".join(lines[i:i + per_doc]), "url": f"book://{lang}/{i}"})
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows[:docs]), encoding="utf-8")
    return path


@pytest.fixture(scope="session")
def mixed_run(tmp_path_factory):
    """Two runs alike of data/warc/ as `web` and a JSONL of prose as `books`, both copied below one folder
    (ids name files below the inputs' common folder: the same ids in every test session)."""
    tmp = tmp_path_factory.mktemp("mix")
    shutil.copytree(WARC_DIR, tmp / "input" / "web")
    books = prose_jsonl(tmp / "input" / "books.jsonl", ["en", "de", "fr", "es", "nl"])
    args = ["--input", str(tmp / "input" / "web" / "*.warc.gz"), "--source", f"books={books}", "--mix", "web=0.5,books=0.5", "--mix-max-epochs", "100",
            "--shard-size-mb", "0.1", "--seed", "7", "--quiet", "--anneal-fraction", "0.3", "--anneal-min-quality", "0.9",
            "--anneal-max-page-share", "0.25", "--anneal-max-site-share", "0.5"]
    first = run(args + ["--output", str(tmp / "a")])
    second = run(args + ["--output", str(tmp / "b")])
    return tmp, first, second
