"""OUTPUT/README.md: the run as a Hugging Face dataset card. Its YAML header is what the Hub reads (the splits'
files, languages, size); its body says what the corpus is: rows and tokens per split and source, languages, the
licences its pages state, the recipe (refinery's version and a digest of the settings) and the funnel. Built from
report.json and the schema alone, so it says nothing the report does not."""
from __future__ import annotations

import hashlib
import json
from typing import Any

import pyarrow as pa

CARD_FILE = "README.md"


def settings_digest(config: dict[str, Any]) -> str:
    """SHA-256 (first 16 hex digits) of the run's settings, less where it read and wrote."""
    kept = {k: v for k, v in config.items() if k not in ("inputs", "output", "sources", "overwrite", "resume",
                                                         "user_settings")}
    return hashlib.sha256(json.dumps(kept, sort_keys=True, default=str).encode()).hexdigest()[:16]


def _size_category(rows: int) -> str:
    for limit, name in ((1_000, "n<1K"), (10_000, "1K<n<10K"), (100_000, "10K<n<100K"), (1_000_000, "100K<n<1M"),
                        (10_000_000, "1M<n<10M"), (100_000_000, "10M<n<100M"), (1_000_000_000, "100M<n<1B")):
        if rows < limit:
            return name
    return "n>1B"


def _yaml_header(report: dict[str, Any], split_bytes: dict[str, int]) -> list[str]:
    splits = [("train", "data/*.parquet", report["output"]["rows"])]  # a split without rows is left out: `datasets`
    #                                                                     refuses an empty split
    for split, key in (("validation", "valid"), ("anneal", "anneal")):
        if (report.get(key) or {}).get("rows"):
            splits.append((split, f"{key}/data/*.parquet", report[key]["rows"]))
    languages = [lang for lang, _ in sorted(report.get("languages", {}).items(), key=lambda kv: (-kv[1], kv[0]))
                 if lang and lang != "None"]
    lines = ["---", "configs:", "- config_name: default", "  data_files:"]
    for split, path, _ in splits:
        lines += [f"  - split: {split}", f"    path: {path}"]
    # Rows and bytes per split: `datasets` checks the rows when it builds the folder (a lost shard fails the load),
    # and both enter its cache key, which for a folder with a card is the card's header, not the files' times
    # (without them, a run written again into OUT loaded the old rows from ~/.cache/huggingface)
    lines += ["dataset_info:", "  splits:"]
    for split, _, rows in splits:
        lines += [f"  - name: {split}", f"    num_examples: {rows}",
                  f"    num_bytes: {split_bytes.get(split, 0)}  # of its Parquet files"]
    lines += ["language:"] + [f"- {lang}" for lang in languages] if languages else []
    lines += ["license: other  # the pages' own terms; the licences they state are below",
              "task_categories:", "- text-generation",
              "size_categories:", f"- {_size_category(report['output']['rows'])}",
              "tags:", "- refinery", "- web-crawl", "---"]
    return lines


def _features(schema: pa.Schema) -> list[str]:
    return [f"| `{field.name}` | `{field.type}` |" for field in schema]


def dataset_card(report: dict[str, Any], schema: pa.Schema, version: str,
                 split_bytes: dict[str, int] | None = None) -> str:
    """`split_bytes`: {split: bytes of its Parquet files}."""
    output, conservation = report["output"], report["conservation"]
    lines = _yaml_header(report, split_bytes or {})
    lines += ["", "# A web text corpus made with Refinery", "",
              f"{output['rows']:,} documents, ~{output['tokens']:,} tokens (UTF-8 bytes / 4), from "
              f"{conservation['read']:,} records read; every record not here is in `ledger/` with the stage and reason "
              f"that dropped it (read = kept + held out + ledger: {conservation['holds']}).", "",
              "| split | documents | tokens |", "|---|---:|---:|",
              f"| train (`data/`) | {output['rows']:,} | {output['tokens']:,} |"]
    for name, key in (("validation (`valid/`)", "valid"), ("anneal (`anneal/`)", "anneal")):
        if report.get(key) is not None:
            lines.append(f"| {name} | {report[key]['rows']:,} | {report[key]['tokens']:,} |")
    lines += ["", "## Sources", "", "| source | documents | tokens |", "|---|---:|---:|"]
    lines += [f"| {name} | {s['rows']:,} | {s['tokens']:,} |" for name, s in output["sources"].items()]
    lines += ["", "## Languages", "", "| language | documents |", "|---|---:|"]
    lines += [f"| {lang} | {n:,} |" for lang, n in sorted(report.get("languages", {}).items(),
                                                          key=lambda kv: (-kv[1], str(kv[0])))]
    licences = (report.get("optout") or {}).get("licenses_kept")
    if licences:
        lines += ["", "## Licences the pages state", "",
                  "What each page declares (`metadata.license`: rel=license links and meta tags); `none` is no "
                  "statement, not a licence. The pages keep their authors' terms.", "",
                  "| licence | documents |", "|---|---:|"]
        lines += [f"| {name} | {n:,} |" for name, n in sorted(licences.items(), key=lambda kv: (-kv[1], kv[0]))]
    lines += ["", "## Recipe", "",
              f"refinery {version}; settings digest `{settings_digest(report['config'])}` (the settings are in "
              "`report.json` under `config`, and in `manifest.json`). `report.html` shows the run.", "",
              "| stage | in | kept | dropped | main reasons |", "|---|---:|---:|---:|---|"]
    for row in report["funnel"]:
        reasons = ", ".join(f"{r} {n:,}" for r, n in sorted(row["dropped_by_reason"].items(),
                                                            key=lambda kv: -kv[1])[:3])
        lines.append(f"| {row['stage']} | {row['in']:,} | {row['kept']:,} | {row['dropped']:,} | {reasons} |")
    lines += ["", "## Features", "", "| column | type |", "|---|---|"] + _features(schema)
    lines += ["", "Load it with `datasets.load_dataset(\"parquet\", data_dir=\"data\")`, pyarrow, DuckDB, or "
              "`refinery.open_run(FOLDER)`.", ""]
    return "\n".join(lines)
