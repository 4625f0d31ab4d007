"""Stages from other packages: a stage package (tests/data/plugin_example) built and installed into a fresh virtual
environment registers its stages (a document stage and a global one) through the `refinery.stages` entry point; they
are in --help, the default config, the funnel, the ledger, the shards (its score column) and the manifest (with its
version); after it is uninstalled, a config that names it fails before any work with one line naming it."""
import json
import os
import shutil
import subprocess
import sys
import sysconfig

import pyarrow.parquet as pq
import pytest

from stages.mix import site_of
from tests.conftest import REPO, WARC_DIR

PLUGIN = REPO / "tests" / "data" / "plugin_example"


@pytest.fixture(scope="module")
def venv(tmp_path_factory):
    """A new venv that sees this one's packages (a .pth line) and this checkout (PYTHONPATH), without the plugin."""
    root = tmp_path_factory.mktemp("plugin") / "venv"
    subprocess.run([getattr(sys, "_base_executable", sys.executable), "-m", "venv", "--without-pip", str(root)],
                   check=True, timeout=120)
    site = next((root / "lib").glob("python*/site-packages"))
    (site / "refinery_base.pth").write_text(sysconfig.get_paths()["purelib"] + "\n", encoding="utf-8")
    return root / "bin" / "python"


def python(venv, *args, check=True):
    env = dict(os.environ, PYTHONPATH=str(REPO))
    done = subprocess.run([str(venv), *args], cwd=REPO, env=env, capture_output=True, text=True, timeout=600)
    assert not check or done.returncode == 0, done.stderr[-3000:]
    return done


def install(venv, tmp_path, version, broken=False):
    source = tmp_path / f"wordcap-{version}"
    shutil.copytree(PLUGIN, source, ignore=shutil.ignore_patterns("*.egg-info", "build", "__pycache__"))
    if broken:  # a release that needs what is not installed
        module = source / "refinery_wordcap" / "__init__.py"
        module.write_text('raise ImportError("needs the package textstat")\n' + module.read_text(encoding="utf-8"))
    toml = source / "pyproject.toml"
    toml.write_text(toml.read_text(encoding="utf-8").replace('version = "1.0.0"', f'version = "{version}"'),
                    encoding="utf-8")
    python(venv, "-m", "pip", "install", "--quiet", "--no-deps", "--no-build-isolation", "--no-index", str(source))


def digest(venv):
    return python(venv, "-c", "from pipeline.job.config import load_config; from pipeline.job.prepare import "
                              "phase1_digest; print(phase1_digest(load_config()))").stdout.strip()


def test_a_stage_package_runs_like_a_built_in_stage_and_its_absence_is_one_line(venv, tmp_path):
    without = digest(venv)
    install(venv, tmp_path, "1.0.0")
    assert "--wordcap-max-share" in python(venv, "-m", "pipeline.cli", "run", "--help").stdout
    default_yaml = python(venv, "-c", "from pipeline.job.config import default_yaml; print(default_yaml())").stdout
    assert "wordcap:\n  enabled: true\n  max_share: 0.5" in default_yaml
    out = tmp_path / "out"
    python(venv, "-m", "pipeline.cli", "run", "--input", str(WARC_DIR / "dolma_sample-0000.warc.gz"), "--output",
           str(out), "--wordcap-max-share", "0.02", "--site-cap-max-pages", "1", "--quiet")
    report = json.loads((out / "report.json").read_text(encoding="utf-8"))
    names = [row["stage"] for row in report["funnel"]]
    assert names.index("gopher_quality") < names.index("wordcap") < names.index("quality")  # its order, 67
    row = next(row for row in report["funnel"] if row["stage"] == "wordcap")
    ledger = [r for r in pq.read_table(out / "ledger").to_pylist() if r["stage"] == "wordcap"]
    assert row["dropped"] == len(ledger) > 0 and {r["reason"] for r in ledger} == {"shouting"}
    shares = pq.read_table(out / "data", columns=["capital_share"]).column("capital_share").to_pylist()
    assert shares and all(share is not None and share <= 0.02 for share in shares)
    # its global stage: at most one page a site, at its order (85), the others ledgered
    assert names.index("exact_dedup") < names.index("site_cap") < names.index("near_dedup")
    capped = next(row for row in report["funnel"] if row["stage"] == "site_cap")
    over = [r for r in pq.read_table(out / "ledger").to_pylist() if r["stage"] == "site_cap"]
    assert capped["dropped"] == len(over) > 0 and {r["reason"] for r in over} == {"site_over_cap"}
    sites = [site_of(url) for url in pq.read_table(out / "data", columns=["url"]).column("url").to_pylist()]
    assert len(sites) == len(set(sites)) and {site_of(r["url"]) for r in over} <= set(sites)
    manifest = json.loads((out / "manifest.json").read_text(encoding="utf-8"))
    assert manifest["plugins"] == {"refinery-wordcap==1.0.0": ["wordcap", "site_cap"]}
    assert report["conservation"]["holds"]

    with_one = digest(venv)
    install(venv, tmp_path, "1.0.1")
    assert len({without, with_one, digest(venv)}) == 3  # prepared parts are redone when the package changes

    python(venv, "-m", "pip", "uninstall", "--quiet", "--yes", "refinery-wordcap")
    # --resume into the run made with it: refused before any work, its published output left as it was
    published = {p.name: p.read_bytes() for p in (out / "data").iterdir()}
    resumed = python(venv, "-m", "pipeline.cli", "run", "--input", str(WARC_DIR / "dolma_sample-0000.warc.gz"),
                     "--output", str(out), "--resume", check=False)
    assert resumed.returncode == 2 and len(resumed.stderr.strip().splitlines()) == 1, resumed.stderr
    assert "stage wordcap of refinery-wordcap 1.0.0 (not installed)" in resumed.stderr
    assert (out / "manifest.json").exists() and {p.name: p.read_bytes() for p in (out / "data").iterdir()} == published
    config = tmp_path / "team.yaml"
    config.write_text("wordcap:\n  max_share: 0.02\n", encoding="utf-8")
    failed = python(venv, "-m", "pipeline.cli", "run", "--input", str(WARC_DIR / "dolma_sample-0000.warc.gz"),
                    "--output", str(tmp_path / "again"), "--config", str(config), check=False)
    assert failed.returncode == 2 and len(failed.stderr.strip().splitlines()) == 1, failed.stderr
    assert "wordcap" in failed.stderr and "not installed" in failed.stderr
    assert not (tmp_path / "again").exists()  # pre-flight: nothing written

    install(venv, tmp_path, "2.0.0", broken=True)
    broken = python(venv, "-m", "pipeline.cli", "run", "--help", check=False)
    assert broken.returncode == 2 and len(broken.stderr.strip().splitlines()) == 1, broken.stderr
    assert "refinery-wordcap==2.0.0" in broken.stderr and "needs the package textstat" in broken.stderr


@pytest.mark.skipif(shutil.which("unshare") is None or os.geteuid() != 0, reason="the local Dask cluster runs in a "
                    "loopback-only network namespace: needs root and `unshare`")
def test_a_dask_worker_without_the_stage_package_refuses_in_one_line(venv, tmp_path):
    """The driver has the plugin, the workers run another environment (this checkout's venv, without it): the
    run stops with one line naming the package and the stage, and publishes nothing."""
    pytest.importorskip("distributed", reason="the dask extra is not installed")
    install(venv, tmp_path, "1.0.0")
    try:
        done = python(venv, "-m", "pipeline.engines.local_cluster", "--engine", "dask", "--workers", "1",
                      "--worker-python", sys.executable, "--log-dir", str(tmp_path / "logs"), "--timeout", "300", "--",
                      "--input", str(WARC_DIR / "dolma_sample-0000.warc.gz"), "--output", str(tmp_path / "out"),
                      "--quiet", check=False)
    finally:
        python(venv, "-m", "pip", "uninstall", "--quiet", "--yes", "refinery-wordcap")
    errors = [line for line in done.stderr.splitlines() if "error" in line]
    assert done.returncode == 2 and len(errors) == 1 and errors[0].startswith("refinery run: error: this worker"), \
        done.stderr[-3000:]
    assert "stage wordcap of refinery-wordcap 1.0.0 (not installed)" in errors[0]
    assert not (tmp_path / "out" / "manifest.json").exists()
