"""`--robots`: robots.txt captures joined to the documents by host, before dedup (stages/optout/captures.py decides).

Every grouping is keyed: the captures by host (and, for a redirect to another host, by the target's host, to
bring the target's captures to the source's group: one hop), the documents' (id, URL, fetch date) by host read
from the prepared parts, one CoGroupByKey of the two; then the decisions join the signed records by id group, as
`--dedup-against` does, so that an opted-out page takes no part in dedup (its copy on a site that did not opt out
can be the one kept). A snapshot's tens of millions of hosts are never a side input.
"""
from __future__ import annotations

import json
import os

import apache_beam as beam
from apache_beam.io.filesystems import FileSystems

from pipeline.counters import count, note
from pipeline.job.config import ConfigError
from pipeline.job.dedup import GroupedRecords, resolve_by_id
from pipeline.job.parts import part_paths, read_rows
from pipeline.job.signed import Decision, Signed, by_group_of_id, group_of
from pipeline.job.transforms import DOCUMENTS, LEDGER
from stages.optout.captures import (
    HostRules,
    host_of,
    read_capture_table,
    read_capture_text,
    read_capture_warc,
    redirect_targets,
)
from stages.optout.signals import OptOutConfig

STAGE = "robots"


def robots_files(patterns) -> list[str]:
    """The files the --robots globs name (a folder: its *.warc.gz, *.warc, *.parquet and robots.txt files, one
    level down too); none is an error."""
    files = []
    for pattern in patterns:
        globs = [FileSystems.join(pattern, "*"), FileSystems.join(pattern, "*", "robots.txt")] \
            if os.path.isdir(pattern) else [pattern]
        found = sorted({m.path for r in FileSystems.match(globs) for m in r.metadata_list
                        if m.path.endswith((".warc.gz", ".warc", ".parquet", ".txt"))})
        if not found:
            raise ConfigError(f"--robots {pattern}: no robots.txt captures there (*.warc.gz, *.warc, *.parquet, "
                              "HOST.txt or HOST/robots.txt)")
        files += found
    return files


class _ReadCaptures(beam.DoFn):
    def process(self, path: str):
        with FileSystems.open(path) as fh:  # .gz is decompressed here; warcio reads either
            if path.endswith(".txt"):
                captures = read_capture_text(path, fh, _modified(path))
            else:
                captures = (read_capture_table if path.endswith(".parquet") else read_capture_warc)(fh)
            for capture in captures:
                count(note(STAGE, "captures_read"))
                yield capture.host, capture


def _modified(path: str) -> str:
    """A local file's modification time (ISO 8601 UTC), the fetch date of a robots.txt a team saved; else ""."""
    import datetime
    import os

    if not os.path.exists(path):
        return ""
    return datetime.datetime.fromtimestamp(os.path.getmtime(path), datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


class _ReadPages(beam.DoFn):
    """A part key -> (host, (id, part, scheme, URL, fetch date)) for each document of the part."""

    def __init__(self, output: str):
        self._output = output

    def process(self, key: str):
        for row in read_rows(part_paths(self._output, key)["docs.parquet"], ["id", "url", "metadata"]):
            url = row["url"].decode("utf-8", "surrogatepass") if isinstance(row["url"], bytes) else row["url"] or ""
            found = host_of(url)
            if found is None:
                continue
            metadata = json.loads(row["metadata"]) if row["metadata"] else {}
            yield found[0], (row["id"], key, found[1], url, metadata.get("warc_date") or "")


def _hop(kv):
    """(target host, {"captures": [...], "sources": [source hosts]}) -> (source host, target capture)."""
    _, joined = kv
    sources = sorted(set(joined["sources"]))
    for capture in joined["captures"]:
        for source in sources:
            yield source, capture


def _decide(kv, agents, as_of):
    """(host, {"pages": [...], "captures": [...]}) -> (id group, (id, Decision)) for the pages opted out."""
    host, joined = kv
    if not joined["pages"]:
        return
    rules = HostRules(joined["captures"], agents, as_of)
    for doc_id, part, scheme, url, date in joined["pages"]:
        verdict, note_name = rules.judge(host, scheme, url, date)
        if note_name:
            count(note(STAGE, note_name))
        if verdict is not None:
            yield group_of(doc_id), (doc_id, Decision(doc_id, part, STAGE, *verdict))


def _resolve(kv):
    """(id group, {"doc": [records], "decision": [(id, Decision)]}) -> the documents kept, Decisions for the others."""
    _, joined = kv
    decided = dict(joined["decision"])

    def decision(s: Signed) -> Decision | None:
        found = decided.get(s.id)
        return None if found is None else found._replace(value=s.tokens)  # the tokens honouring it costs

    yield from resolve_by_id(STAGE, joined["doc"], decision)


class RobotsOptOut(beam.PTransform):
    """{"signed": packed Signed, "keys": part keys} -> (the records no robots.txt opts out, their Decisions)."""

    def __init__(self, patterns, output: str, optout: OptOutConfig):
        super().__init__()
        self._files, self._output, self._optout = robots_files(patterns), output, optout

    def expand(self, pcolls):
        signed, keys = pcolls["signed"], pcolls["keys"]
        captures = (signed.pipeline
                    | "RobotsFiles" >> beam.Create(self._files)
                    | "SpreadRobotsFiles" >> beam.Reshuffle()
                    | "ReadCaptures" >> beam.ParDo(_ReadCaptures()))
        redirects = captures | "RedirectTargets" >> beam.FlatMap(lambda kv: redirect_targets([kv[1]]))
        hopped = ({"captures": captures, "sources": redirects}
                  | "ByTargetHost" >> beam.CoGroupByKey()
                  | "ToSourceHost" >> beam.FlatMap(_hop))
        pages = keys | "PagesByHost" >> beam.ParDo(_ReadPages(self._output))
        decisions = ({"pages": pages, "captures": (captures, hopped) | "AllCaptures" >> beam.Flatten()}
                     | "ByHost" >> beam.CoGroupByKey()
                     | "Decide" >> beam.FlatMap(_decide, list(self._optout.agents), self._optout.robots_as_of))
        results = ({"doc": signed | "GroupOfId" >> beam.ParDo(GroupedRecords(by_group_of_id)), "decision": decisions}
                   | "Join" >> beam.CoGroupByKey()
                   | "Resolve" >> beam.FlatMap(_resolve).with_outputs(LEDGER, main=DOCUMENTS))
        return results[DOCUMENTS], results[LEDGER]
