"""Recipe for the shipped per-language thresholds, stages/models/thresholds.yaml (run: `make thresholds`).

Data: NTREX-128 (news translated by professionals into 128 language variants, CC BY-SA 4.0; the same 123
documents in every language, 1,997 sentences), from the workspace's shared/data/multilingual. Each document
is one JSONL record (one sentence a line, as extracted pages have paragraphs); `refinery calibrate` then
measures every rule per detected language and moves the English thresholds (stages/calibration.py).
FLORES-200 is kept out: `bench/language_fairness.py` measures the result on it.

    python scripts/build_thresholds.py [--data ../shared/data/multilingual] [--output stages/models/thresholds.yaml]
"""
import argparse
import glob
import json
import os
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from pipeline.calibrate import main as calibrate  # noqa: E402


def ntrex_documents(data: str):
    """(file code, document number, text) for every NTREX-128 file, documents as DOCUMENT_IDS.tsv groups them."""
    folder = os.path.join(data, "ntrex128")
    with open(os.path.join(folder, "DOCUMENT_IDS.tsv"), encoding="utf-8") as fh:
        doc_ids = [line.strip() for line in fh]
    for path in sorted(glob.glob(os.path.join(folder, "NTREX-128", "newstest2019-*.txt"))):
        code = os.path.basename(path).split(".", 1)[1].rsplit(".", 1)[0]
        with open(path, encoding="utf-8") as fh:
            lines = [line.replace("\r", "").strip() for line in fh]
        docs: dict[str, list[str]] = {}
        for doc_id, line in zip(doc_ids, lines):
            docs.setdefault(doc_id, []).append(line)
        for number, sentences in enumerate(docs.values()):
            yield code, number, "\n".join(s for s in sentences if s)


def lid_code(ntrex_code: str, labels: set[str]) -> str | None:
    """The lid.176 label of an NTREX file code (ISO 639-3, maybe with a variant), or None if lid.176 has none."""
    import icu

    three = ntrex_code.split("-")[0]
    to_two = {icu.Locale(c).getISO3Language(): c for c in icu.Locale.getISOLanguages()}
    code = MACRO.get(three) or to_two.get(three) or three
    return code if code in labels else None


# NTREX codes ICU does not map to lid.176's (macrolanguage members, 639-3-only codes)
MACRO = {"arb": "ar", "pes": "fa", "prs": "fa", "zsm": "ms", "msa": "ms", "cmn": "zh", "zho": "zh", "nob": "no",
         "nno": "nn", "swh": "sw", "plt": "mg", "mlg": "mg", "npi": "ne", "gaz": "om", "als": "sq", "sqi": "sq",
         "fil": "tl", "kmr": "ku", "ckb": "ckb", "yue": "yue", "uzb": "uz", "aze": "az", "mon": "mn", "lav": "lv",
         "est": "et", "fas": "fa", "srp": "sr", "bos": "bs", "hrv": "hr", "pus": "ps", "snd": "sd", "tgk": "tg"}


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
