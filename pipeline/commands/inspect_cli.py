"""`refinery inspect OUT`: why a page was dropped, and what the output looks like, as text in the terminal.

    refinery inspect out/demo                                   # drop reasons with counts
    refinery inspect out/demo --reason gopher_too_few_words --sample 3
    refinery inspect out/demo --id 0e9caadd8cb35438...          # where it went; its kept copy; what was cut
    refinery inspect out/demo --url casino --lang en --kept     # output documents

Reads only the run's Parquet files (pyarrow datasets, so `gs://`/`s3://` outputs work too).
"""
from __future__ import annotations

import argparse
import collections
import shutil
import sys
import textwrap
from collections.abc import Sequence
from typing import Any

import pyarrow.compute as pc

from pipeline.reports import explore

DOC_COLUMNS = ["id", "source", "url", "lang", "lang_score", "quality_score", "toxicity_score", "text", "metadata"]


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="refinery inspect", description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("output", metavar="OUT", help="a `refinery run` output folder (local or gs://, s3://)")
    p.add_argument("--reason", help="dropped documents with this ledger reason (e.g. gopher_too_few_words)")
    p.add_argument("--stage", help="dropped documents of this stage")
    p.add_argument("--id", dest="doc_id", help="one document: which stage dropped it and why, or that it was kept")
    p.add_argument("--url", help="documents whose URL contains this text")
    p.add_argument("--lang", help="documents of this language")
    p.add_argument("--kept", action="store_true", help="show output documents instead of dropped ones")
    p.add_argument("--sample", type=int, default=5, help="how many documents to show (a seeded random sample)")
    p.add_argument("--seed", type=int, default=0, help="seed of the sample")
    p.add_argument("--chars", type=int, default=600, help="text characters shown per document")
    return p


def _where(args, kept: bool) -> pc.Expression | None:
    terms = []
    if not kept and args.reason:
        terms.append(pc.field("reason") == args.reason)
    if not kept and args.stage:
        terms.append(pc.field("stage") == args.stage)
    if args.lang:
        terms.append(pc.field("lang") == args.lang)
    if args.url:
        terms.append(pc.match_substring(pc.field("url"), args.url))
    if kept:
        terms.append(pc.field("epoch") == 0)
    where = None
    for t in terms:
        where = t if where is None else where & t
    return where


def _text(text: str | None, chars: int) -> str:
    width = max(min(shutil.get_terminal_size((100, 20)).columns, 120) - 4, 40)
    body = (text or "")[:chars] + (" …" if text and len(text) > chars else "")
    lines = []
    for line in body.splitlines() or [""]:
        lines += textwrap.wrap(line, width) or [""]
    return "\n".join("  │ " + line for line in lines)


def _number(x) -> str:
    return "" if x is None else f"{x:.4g}"


def _show_drop(row: dict[str, Any], chars: int) -> str:
    where = row.get("file") or ""
    if row.get("offset") is not None:
        where += f" @ byte {row['offset']}"
    elif row.get("line") is not None:
        where += f" line {row['line']}"
    out = [f"id:       {row['id']}", f"url:      {row.get('url') or ''}", f"from:     {where} (source {row['source']})",
           f"dropped:  {row['stage']} · {row['reason']}", f"language: {row.get('lang') or 'not identified'}"]
    if row.get("value") is not None:
        out.append(f"measured: {_number(row['value'])}" + (f"  (threshold {_number(row['threshold'])})"
                                                           if row.get("threshold") is not None else ""))
    if row.get("detail"):
        out.append(f"detail:   {row['detail']}")
    if row.get("kept_id"):
        out.append(f"kept copy: {row['kept_id']} (in the output)")
    out.append("text:\n" + (_text(row.get("snippet"), chars) if row.get("snippet") else "  (no text kept in the "
                                                                                        "ledger: extraction found "
                                                                                        "none, or snippets are off)"))
    return "\n".join(out)


def _show_kept(row: dict[str, Any], chars: int, kept: str = "in the output") -> str:
    m = row.get("metadata") or {}
    where = m.get("warc_filename") or m.get("source_file") or ""
    where += f" @ byte {m['warc_offset']}" if m.get("warc_offset") is not None else (
        f" line {m['source_line']}" if m.get("source_line") is not None else "")
    scores = ", ".join(f"{k} {_number(row[k])}" for k in ("lang_score", "quality_score", "toxicity_score")
                       if row.get(k) is not None)
    return "\n".join([f"id:       {row['id']}", f"url:      {row.get('url') or ''}",
                      f"from:     {where} (source {row['source']})", f"kept:     {kept}",
                      f"language: {row.get('lang')}" + (f"  ({scores})" if scores else ""),
                      f"chars:    {len(row['text']):,}", "text:\n" + _text(row["text"], chars)])


def _show_edit(row: dict[str, Any], chars: int) -> str:
    """What a stage cut from a kept document (the edit book, edits/)."""
    kept_in = row.get("kept_in") or []
    where = f"; kept in {', '.join(kept_in)}" if kept_in else ""
    return "\n".join([f"cut:      {row['stage']} · {row['paragraphs']} paragraph(s), {row['chars']:,} characters{where}",
                      "cut text:\n" + (_text(row.get("removed"), chars) if row.get("removed")
                                        else "  (not kept: ledger_snippet_chars is 0)")])


def _by_id(args) -> int:
    where = pc.field("id") == args.doc_id
    drops = explore.rows(explore.dataset(args.output, explore.LEDGER), explore.LEDGER_COLUMNS, where, 1)
    kept = explore.rows(explore.dataset(args.output, explore.DATA), DOC_COLUMNS, where & (pc.field("epoch") == 0), 1)
    valid = explore.rows(explore.dataset(args.output, explore.VALID), DOC_COLUMNS, where, 1)
    if not drops and not kept and not valid:
        print(f"refinery inspect: no document {args.doc_id!r} in {args.output} (neither output, valid/ nor ledger)",
              file=sys.stderr)
        return 1
    if kept:
        print(_show_kept(kept[0], args.chars))
    if valid:
        print(_show_kept(valid[0], args.chars, "held out for validation (valid/), not in the training shards"))
    for edit in explore.rows(explore.dataset(args.output, explore.EDITS), explore.EDITS_COLUMNS, where):
        print(_show_edit(edit, args.chars))
    for row in drops:
        print(_show_drop(row, args.chars))
        if row.get("kept_id"):
            copy = explore.documents(args.output, [row["kept_id"]], DOC_COLUMNS).get(row["kept_id"])
            if copy:
                print("\n── the copy that was kept ──\n" + _show_kept(copy, args.chars))
    return 0


def _summary(output: str) -> int:
    counts: collections.Counter = collections.Counter()
    for batch in explore.batches(explore.dataset(output, explore.LEDGER), ["stage", "reason"]):
        counts.update(zip(batch.column("stage").to_pylist(), batch.column("reason").to_pylist()))
    kept = sum(f.count_rows(filter=pc.field("epoch") == 0) for f in [explore.dataset(output, explore.DATA)] if f)
    held = sum(f.count_rows() for f in [explore.dataset(output, explore.VALID)] if f)
    print(f"{output}: {kept:,} documents kept" + (f", {held:,} held out for validation (valid/)" if held else "")
          + f", {sum(counts.values()):,} dropped")
    for (stage, reason), n in counts.most_common():
        print(f"  {n:>8,}  {stage:<18} {reason}")
    print("Show some: refinery inspect OUT --reason REASON --sample 3 (or --id, --url, --lang, --kept)")
    return 0


def _unknown_choice(args) -> str | None:
    """The error line for a --reason or --stage that no stage has (none when both are known or not given)."""
    from stages.table import stage_table

    table = stage_table()
    for flag, value, known in (("--stage", args.stage, [spec.name for spec in table]),
                               ("--reason", args.reason, sorted({r for spec in table for r in spec.reasons}))):
        if value and value not in known and not (flag == "--reason" and value.startswith("error:")):
            return f"{flag} {value!r} is no {flag[2:]} of refinery; one of: {', '.join(known)}"
    return None


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if explore.dataset(args.output, explore.DATA) is None and explore.dataset(args.output, explore.LEDGER) is None:
        print(f"refinery inspect: error: {args.output} holds no data/ or ledger/ Parquet files of a run",
              file=sys.stderr)
        return 2
    unknown = _unknown_choice(args)
    if unknown:
        print(f"refinery inspect: error: {unknown}", file=sys.stderr)
        return 2
    if args.doc_id:
        return _by_id(args)
    if not (args.kept or args.reason or args.stage or args.url or args.lang):
        return _summary(args.output)
    part, columns = (explore.DATA, DOC_COLUMNS) if args.kept else (explore.LEDGER, explore.LEDGER_COLUMNS)
    rows, matched = explore.sample_rows(explore.dataset(args.output, part), columns, _where(args, args.kept),
                                        max(args.sample, 0), args.seed)
    what = "kept" if args.kept else "dropped"
    print(f"{matched:,} {what} documents match; showing {len(rows)}")
    show = _show_kept if args.kept else _show_drop
    for i, row in enumerate(rows, 1):
        print(f"\n─── {i}/{len(rows)} ───\n" + show(row, args.chars))
    return 0 if matched else 1
