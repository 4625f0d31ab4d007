"""Recipe for the shipped per-language thresholds, stages/models/thresholds.yaml (run: `make thresholds`).

Data: NTREX-128 (news translated by professionals into 128 language variants, CC BY-SA 4.0; the same 123
documents in every language, 1,997 sentences), from the workspace's shared/data/multilingual. Each document
is one JSONL record (one sentence a line, as extracted pages have paragraphs); `refinery calibrate` then
measures every rule per detected language and moves the English thresholds (stages/calibration.py).
FLORES-200 is kept out: `bench/language_fairness.py` measures the result on it.

    python scripts/build_thresholds.py [--data ../shared/data/multilingual] [--output stages/models/thresholds.yaml]
"""
import argparse
import json
import os
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from pipeline.calibrate import main as calibrate  # noqa: E402
from stages.reference import lid_code, ntrex_documents  # noqa: E402


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--data", default="../shared/data/multilingual")
    parser.add_argument("--output", default="stages/models/thresholds.yaml")
    args = parser.parse_args(argv)
    from stages.langid import load_model

    labels = {label.replace("__label__", "") for label in load_model(None).get_labels()}
    with tempfile.TemporaryDirectory() as tmp:
        files: dict[str, object] = {}
        skipped = set()
        for code, number, text in ntrex_documents(args.data):
            lang = lid_code(code, labels)
            if lang is None:
                skipped.add(code)
                continue
            if lang not in files:
                files[lang] = open(os.path.join(tmp, f"{lang}.jsonl"), "w", encoding="utf-8")
            files[lang].write(json.dumps({"id": f"{code}/{number}", "text": text}, ensure_ascii=False) + "\n")
        for fh in files.values():
            fh.close()
        print(f"NTREX files without a lid.176 label (left out): {', '.join(sorted(skipped))}", file=sys.stderr)
        sources = [a for lang in sorted(files) for a in ("--source", f"{lang}={tmp}/{lang}.jsonl")]
        return calibrate([*sources, "--source-is-language", "--output", args.output, "--min-docs", "30"])


if __name__ == "__main__":
    sys.exit(main())
