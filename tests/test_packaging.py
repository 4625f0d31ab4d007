"""What a cluster worker receives (`--setup_file ./setup.py` builds an sdist; `--extra_package` takes a
wheel) carries the models, and the stages find them inside the installed package, not in this tree."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tarfile
import zipfile

from tests.conftest import REPO

MODELS = ["stages/models/lid.176.ftz", "stages/models/quality.ftz", "stages/models/quality.ftz.card.json",
          "stages/models/toxicity.ftz", "stages/models/toxicity.ftz.card.json", "stages/models/thresholds.yaml",
          "stages/models/README.md",
          "stages/harmful/lists/SOURCES.md", "stages/harmful/lists/ut1/adult.domains.xz",
          "stages/harmful/lists/url_words/banned_words.txt", "stages/harmful/lists/ldnoobw/v1/en.txt",
          "stages/harmful/lists/ldnoobw/v2/ja.txt", "stages/harmful/lists/ldnoobw/ordinary/v2/en.txt",
          "stages/harmful/identity/en.yaml", "stages/harmful/identity/zh.yaml", "stages/harmful/identity/README.md",
          "pipeline/reports/templates/report.html"]


def tracked_copy(dest):
    """The committed tree (what a fresh clone has), without this checkout's venv and outputs."""
    files = subprocess.run(["git", "ls-files", "-co", "--exclude-standard"], cwd=REPO, capture_output=True,
                           text=True, check=True).stdout.split()
    for name in files:
        if os.path.isfile(REPO / name):
            (dest / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(REPO / name, dest / name)
    return dest


def test_wheel_and_sdist_carry_the_models_and_the_installed_package_uses_them(tmp_path):
    src = tracked_copy(tmp_path / "src")
    dist = tmp_path / "dist"
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w", str(dist),
                    str(src)], check=True, capture_output=True, timeout=600)
    subprocess.run([sys.executable, "setup.py", "-q", "sdist", "-d", str(dist)], cwd=src, check=True,
                   capture_output=True, timeout=600)
    wheel = next(dist.glob("refinery-*.whl"))
    sdist = next(dist.glob("refinery-*.tar.gz"))
    in_wheel = set(zipfile.ZipFile(wheel).namelist())
    in_sdist = {name.split("/", 1)[1] for name in tarfile.open(sdist).getnames() if "/" in name}
    for path in MODELS:
        assert path in in_wheel, path
        assert path in in_sdist, path
    assert {p.split("/")[0] for p in in_wheel} >= {"common", "stages", "pipeline", "training"}
    assert zipfile.ZipFile(wheel).getinfo("stages/models/lid.176.ftz").file_size == 938_013

    site = tmp_path / "site"
    subprocess.run([sys.executable, "-m", "pip", "install", "--no-deps", "-q", "--target", str(site), str(wheel)],
                   check=True, capture_output=True, timeout=600)
    probe = (
        "import stages, stages.langid as lid, stages.quality as q\n"
        f"assert stages.__file__.startswith({str(site)!r}), stages.__file__\n"
        "m = lid.load_model(None)\n"
        "print(lid.bundled_model_path())\n"
        "print(m.predict('The quick brown fox jumps over the lazy dog near the river bank.')[0][0])\n"
        "print(q.predict_hq(q.load_model(None), ['A clear paragraph about the history of the river.'])[0] >= 0)\n"
        "import stages.harmful.url_filter as uf, stages.harmful.badwords as bw, stages.harmful.toxicity as tx\n"
        f"assert uf.LISTS.startswith({str(site)!r}) and bw.LISTS.startswith({str(site)!r})\n"
        "f = uf.UrlFilter(); f.setup(); print(f.verdict('https://www.sex.com/')[0])\n"
        "print(bw.BadWordsFilter(bw.BadWordsConfig(mode='any')).evaluate('free porn every day', 'en')[0])\n"
        "assert bw.word_list('v1', 'en').kind('shit') == 'profanity'\n"
        "t = tx.ToxicityScorer(); t.check(); print(t.score('the river flows north')[0] < 0.5)\n"
        "import stages.harmful.identity_frames as idf\n"
        f"assert idf.FOLDER.startswith({str(site)!r}) and len(idf.lexicons()) == 15, idf.FOLDER\n"
    )
    env = dict(os.environ, PYTHONPATH=str(site))
    out = subprocess.run([sys.executable, "-c", probe], cwd=tmp_path, env=env, capture_output=True, text=True,
                         timeout=300)
    assert out.returncode == 0, out.stderr
    path, label, scored, url_verdict, bad_words, calm = out.stdout.split()
    assert path.startswith(str(site)) and label == "__label__en" and scored == "True"
    assert (url_verdict, bad_words, calm) == ("blocked_domain", "bad_words_sexual", "True")
