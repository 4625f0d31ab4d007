"""What a finished run wrote, as digests that do not depend on when or where it ran: a refactor that must
leave the outputs unchanged is held to the digests recorded before it (tests/data/golden/).

Parquet files are digested by content (schema with its metadata, then every row), not by bytes, so a
different pyarrow on a user's machine does not fail the check while any changed value, column or row
order does; report.json and manifest.json without what differs between two identical runs (times, run
id, absolute paths, resources, byte sizes and SHA-256 of files, which the content digests stand in for).

    REFINERY_WRITE_GOLDEN=1 make test    # after a change that is meant to change the outputs: rewrite them
"""
from __future__ import annotations

import hashlib
import json
import os
import pathlib
from typing import Any

import pyarrow.parquet as pq

GOLDEN_DIR = pathlib.Path(__file__).resolve().parent / "data" / "golden"
WRITE = os.environ.get("REFINERY_WRITE_GOLDEN") == "1"
SKIPPED_FOLDERS = {"prepared", "_finished", "slurm"}  # phase 1's and 2's working files, a batch executor's: not outputs
REPORT_VOLATILE = {"elapsed_s", "stage_times", "run_id", "resources", "input_root", "runner", "output_folder"}
FILE_FACTS = {"bytes", "sha256", "path"}          # of a file: its content digest stands in for them


def _without(value: Any, keys: set[str]) -> Any:
    if isinstance(value, dict):
        return {k: _without(v, keys) for k, v in value.items() if k not in keys}
    if isinstance(value, list):
        return [_without(v, keys) for v in value]
    return value


def parquet_digest(path: pathlib.Path, any_order: bool = False) -> str:
    """`any_order`: the rows as a set (the ledger's phase-2 rows arrive in the order the runner finishes)."""
    table = pq.read_table(path)
    digest = hashlib.sha256(table.schema.to_string(show_schema_metadata=True).encode())
    rows = [json.dumps(row, sort_keys=True, default=repr) for row in table.to_pylist()]
    for row in sorted(rows) if any_order else rows:
        digest.update(row.encode("utf-8", "surrogatepass"))
    return digest.hexdigest()[:20]


def json_digest(value: Any) -> str:
    return hashlib.sha256(json.dumps(value, sort_keys=True).encode()).hexdigest()[:20]


def run_digests(out: pathlib.Path) -> dict[str, str]:
    """{file below `out`: digest} of every output of a finished run."""
    digests = {}
    for path in sorted(out.rglob("*")):
        rel = path.relative_to(out)
        if not path.is_file() or rel.parts[0] in SKIPPED_FOLDERS or rel.name == "report.html":
            continue
        if path.suffix == ".parquet":
            digests[str(rel)] = parquet_digest(path, any_order=rel.parts[0] == "ledger")
        elif rel.name == "report.json":
            report = json.loads(path.read_text(encoding="utf-8"))
            report = {k: v for k, v in report.items() if k not in REPORT_VOLATILE}
            report["config"] = {k: v for k, v in report["config"].items()  # where and how, not what: --resume, ...
                                if k not in ("inputs", "output", "sources", "resume", "overwrite", "user_settings")}
            report["ledger_files"] = [{"rows": f["rows"]} for f in report.get("ledger_files", [])]
            report.pop("prepared", None)
            for name, part in report.items():
                if name != "funnel":
                    digests[f"report.json:{name}"] = json_digest(part)
            digests["report.json:funnel"] = json_digest(report.get("funnel"))
        elif rel.name == "manifest.json":
            manifest = json.loads(path.read_text(encoding="utf-8"))
            manifest.pop("config", None)
            manifest.pop("extraction", None)  # the versions of trafilatura and lxml installed: the shards' digests say
            #                                   whether what they extracted changed
            digests[str(rel)] = json_digest(_without(manifest, FILE_FACTS | {"created", "run_id", "refinery_version"}))
        elif rel.name == "README.md":  # the card, less its splits' Parquet bytes (they vary with pyarrow's version)
            lines = [line for line in path.read_text(encoding="utf-8").splitlines() if "num_bytes:" not in line]
            digests[str(rel)] = hashlib.sha256("\n".join(lines).encode()).hexdigest()[:20]
        else:  # stats lines and the rest: as written
            digests[str(rel)] = hashlib.sha256(path.read_bytes()).hexdigest()[:20]
    return digests


def check_against_golden(name: str, out: pathlib.Path) -> None:
    """The run in `out` wrote what the recorded run `name` wrote (or, with REFINERY_WRITE_GOLDEN=1, record it)."""
    found = run_digests(out)
    path = GOLDEN_DIR / f"{name}.json"
    if WRITE:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(found, indent=1, sort_keys=True) + "\n", encoding="utf-8")
        return
    want = json.loads(path.read_text(encoding="utf-8"))
    changed = sorted(k for k in set(want) | set(found) if want.get(k) != found.get(k))
    assert not changed, (f"outputs differ from the recorded run {path.name} in {changed}; if the change is meant, "
                         "record it again with REFINERY_WRITE_GOLDEN=1")
