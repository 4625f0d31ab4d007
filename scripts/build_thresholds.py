"""Recipe for the shipped per-language thresholds, stages/models/thresholds.yaml (run: `make thresholds`).

Data: NTREX-128 (news translated by professionals into 128 language variants, CC BY-SA 4.0; the same 123
documents in every language, 1,997 sentences), from the workspace's shared/data/multilingual. Each document
is one JSONL record (one sentence a line, as extracted pages have paragraphs); `refinery calibrate` then
measures every rule per language and moves the English thresholds (stages/calibration.py).
The language-ID thresholds are fitted on more, and on both sides (stages/calibration.py LID_RULE): NTREX,
FLORES-200 `train`+`dev` (8 sentences a page, 205 language variants, 79 of them languages lid.176 cannot name)
and Tatoeba (8 sentences a page, 112 languages). FLORES-200 `test` is kept out: `bench/langid_labels.py` and
`bench/language_fairness.py` measure the result on it.

    python scripts/build_thresholds.py [--data ../shared/data/multilingual] [--output stages/models/thresholds.yaml]
"""
import json
import os
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import shared_data  # noqa: E402

from pipeline.commands.calibrate import main as calibrate  # noqa: E402
from stages.reference import flores_documents, lid_code, ntrex_documents, tatoeba_documents  # noqa: E402


def main(argv=None) -> int:
    args = shared_data.multilingual_args(argv, __doc__.split("\n")[0], "stages/models/thresholds.yaml",
                                         "make thresholds", ("ntrex128", "sib200_flores", "tatoeba_laser"))
    from stages.langid import model_codes

    labels = model_codes()
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
        lid_files: dict[str, object] = {}

        def lid_only(declared: str, doc_id: str, text: str) -> None:
            if declared not in lid_files:
                lid_files[declared] = open(os.path.join(tmp, f"lid.{declared}.jsonl"), "w", encoding="utf-8")
            lid_files[declared].write(json.dumps({"id": doc_id, "text": text}, ensure_ascii=False) + "\n")

        for code, number, text in ntrex_documents(args.data):  # the languages lid.176 cannot name: other side only
            if code in skipped:
                lid_only(code.replace("-", "_"), f"ntrex/{code}/{number}", text)
        for folder, number, text in flores_documents(args.data, per_doc=8, splits=("train", "dev")):
            lid_only(lid_code(folder.split("_")[0], labels) or folder, f"flores/{folder}/{number}", text)
        for code, number, text in tatoeba_documents(args.data):
            lid_only(lid_code(code, labels) or code, f"tatoeba/{code}/{number}", text)
        for fh in [*files.values(), *lid_files.values()]:
            fh.close()
        print(f"NTREX files without a lid.176 label (language-ID thresholds only): {', '.join(sorted(skipped))}",
              file=sys.stderr)
        sources = [a for lang in sorted(files) for a in ("--source", f"{lang}={tmp}/{lang}.jsonl")]
        sources += [a for name in sorted(lid_files) for a in ("--lid-source", f"{name}={tmp}/lid.{name}.jsonl")]
        return calibrate([*sources, "--source-is-language", "--parallel", "--output", args.output, "--min-docs", "30"])


if __name__ == "__main__":
    sys.exit(main())
