"""The make targets that rebuild bundled models, lists and thresholds (`make thresholds`, `make cascade-check`, ...)
need the workspace's shared data sets, which a user's clone does not have: there they end with one line naming what
is missing and exit 2, not a traceback (issue 54)."""
import os
import subprocess
import sys

import pytest

from tests.conftest import REPO

SCRIPTS = {"build_thresholds.py": "make thresholds", "build_cascade_check.py": "make cascade-check",
           "build_badword_exclusions.py": "make badword-exclusions", "build_quality_model.py": "make quality-model",
           "build_toxicity_model.py": "make toxicity-model", "build_reference_lm.py": "make reference-lm"}


@pytest.mark.parametrize("script", sorted(SCRIPTS))
def test_without_the_shared_data_a_rebuild_says_what_is_missing_in_one_line(script, tmp_path):
    done = subprocess.run([sys.executable, str(REPO / "scripts" / script)], cwd=REPO, capture_output=True, text=True,
                          timeout=300, env=dict(os.environ, REFINERY_SHARED_DATA=str(tmp_path / "no-shared")))
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert done.returncode == 2 and len(lines) == 1 and "Traceback" not in done.stderr, done.stderr[-2000:]
    assert lines[0].startswith(f"{SCRIPTS[script]}: error: needs {tmp_path / 'no-shared'}")
    assert "a clone of this repository does not include" in lines[0]
