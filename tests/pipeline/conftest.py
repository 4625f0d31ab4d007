"""The bundled real WARC files through the whole job, once per test process (several modules read it)."""
import pytest

from pipeline.run import run
from tests.conftest import WARC_DIR

WARC_GLOB = str(WARC_DIR / "*.warc.gz")


@pytest.fixture(scope="session")
def demo_run(tmp_path_factory):
    """(output folder, report) of `refinery run` on data/warc/ with every default; read it, never write to it."""
    out = tmp_path_factory.mktemp("demo")
    report = run(["--input", WARC_GLOB, "--output", str(out), "--quiet"])
    return out, report
