"""`--robots`: robots.txt captures joined to the documents by host, before dedup (stages/optout/captures.py decides);
the global stage `Robots` is at the end.

Every grouping is keyed: the captures by host and the documents' (id, URL, fetch date) by host read from the
prepared parts, one CoGroupByKey of the two; a page whose robots.txt redirects to another host is sent on to
that host's group (one hop, a second CoGroupByKey), so the target's captures are read once, never copied to
every host that redirects there; then the decisions join the signed records by id group, as
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
from pipeline.job.globals.base import GlobalStage
from pipeline.job.globals.groupings import GroupedRecords, resolve_by_id
from pipeline.job.inputs import local_file_problem
from pipeline.job.output import STATS_DIR
from pipeline.job.parts import part_paths, read_rows
from pipeline.job.signed import Decision, Signed, by_group_of_id, group_of
from pipeline.job.transforms import DOCUMENTS, LEDGER
from pipeline.storage import open_raw
from stages.optout.capture_files import Unreadable, read_capture_table, read_capture_text, read_capture_warc
from stages.optout.captures import Hop, HostRules, host_of
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
        for path in found:  # opening a FIFO blocks forever, a device never ends: refused before any work
            problem = local_file_problem(path)
            if problem:
                raise ConfigError(f"--robots {path}: {problem}")
        files += found
    return files


UNREADABLE = "unreadable"  # _ReadCaptures' tagged output: what of a capture file could not be read
UNREADABLE_FILE = "robots_unreadable"  # _shard_stats/robots_unreadable-NNNNN: the report's list


class _ReadCaptures(beam.DoFn):
    """A capture file -> (host, Capture) for each capture; what cannot be read, tagged UNREADABLE (counted, and
    named in the report), never an error of the run."""

    def process(self, path: str):
        try:
            with open_raw(path) as fh:  # as stored: the WARC reader sniffs gzip and resumes after damage
                if path.endswith(".txt"):
                    captures = read_capture_text(path, fh, _modified(path))
                elif path.endswith(".parquet"):
                    captures = read_capture_table(fh, path)
                else:
                    captures = read_capture_warc(fh, path)
                for found in captures:
                    if isinstance(found, Unreadable):
                        count(note(STAGE, "captures_unreadable"))
                        yield beam.pvalue.TaggedOutput(UNREADABLE, json.dumps(found._asdict(), sort_keys=True))
                        continue
                    count(note(STAGE, "captures_read"))
                    yield found.host, found
        except OSError as exc:  # vanished or unreadable since the run started
            count(note(STAGE, "captures_unreadable"))
            yield beam.pvalue.TaggedOutput(UNREADABLE, json.dumps(Unreadable(path, "the file", str(exc))._asdict()))


def robots_unreadable(output: str, shown: int = 100) -> list[dict]:
    """report.json's `optout.robots_unreadable`: the parts of capture files that could not be read (file, where,
    why), sorted, the first `shown`."""
    found = []
    for path in sorted(m.path for r in FileSystems.match([FileSystems.join(output, STATS_DIR, UNREADABLE_FILE + "*")])
                       for m in r.metadata_list):
        with FileSystems.open(path) as fh:
            found += [json.loads(line) for line in fh.read().decode("utf-8").splitlines() if line.strip()]
    return sorted(found, key=lambda u: (u["file"], u["where"], u["why"]))[:shown]


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


def _decide(kv, agents, as_of):
    """(host, {"pages": [...], "captures": [...]}) -> (id group, (id, Decision)) for the pages opted out; a page
    whose robots.txt redirects to another host goes there, tagged HOPS, as (target host, (page, Hop))."""
    host, joined = kv
    if not joined["pages"]:
        return
    rules = HostRules(joined["captures"], agents, as_of)
    for doc_id, part, scheme, url, date in joined["pages"]:
        judged = rules.judge(host, scheme, url, date, hop_out=True)
        if isinstance(judged, Hop):
            yield beam.pvalue.TaggedOutput(HOPS, (judged.host, ((doc_id, part, url), tuple(judged))))
            continue
        yield from _decision(doc_id, part, *judged)


def _decide_hops(kv, agents, as_of):
    """(target host, {"hops": [(page, Hop)], "captures": [...]}) -> (id group, (id, Decision)): the redirected pages
    judged by the target's captures, which stay on this host's group (memory: the captures read, not hosts x
    captures)."""
    _, joined = kv
    if not joined["hops"]:
        return
    rules = HostRules(joined["captures"], agents, as_of)
    for (doc_id, part, url), hop in joined["hops"]:
        yield from _decision(doc_id, part, *rules.resume(Hop(*hop), url))


def _decision(doc_id, part, verdict, note_name):
    if note_name:
        count(note(STAGE, note_name))
    if verdict is not None:
        yield group_of(doc_id), (doc_id, Decision(doc_id, part, STAGE, *verdict))


HOPS = "hops"


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
        read = (signed.pipeline
                | "RobotsFiles" >> beam.Create(self._files)
                | "SpreadRobotsFiles" >> beam.Reshuffle()
                | "ReadCaptures" >> beam.ParDo(_ReadCaptures()).with_outputs(UNREADABLE, main="captures"))
        captures = read["captures"]
        _ = read[UNREADABLE] | "WriteUnreadable" >> beam.io.WriteToText(
            FileSystems.join(self._output, STATS_DIR, UNREADABLE_FILE), shard_name_template="-SSSSS")
        pages = keys | "PagesByHost" >> beam.ParDo(_ReadPages(self._output))
        agents, as_of = list(self._optout.agents), self._optout.robots_as_of
        decided = ({"pages": pages, "captures": captures}
                   | "ByHost" >> beam.CoGroupByKey()
                   | "Decide" >> beam.FlatMap(_decide, agents, as_of).with_outputs(HOPS, main="decided"))
        hopped = ({"hops": decided[HOPS], "captures": captures}
                  | "ByTargetHost" >> beam.CoGroupByKey()
                  | "DecideHops" >> beam.FlatMap(_decide_hops, agents, as_of))
        decisions = (decided["decided"], hopped) | "AllDecisions" >> beam.Flatten()
        results = ({"doc": signed | "GroupOfId" >> beam.ParDo(GroupedRecords(by_group_of_id)), "decision": decisions}
                   | "Join" >> beam.CoGroupByKey()
                   | "Resolve" >> beam.FlatMap(_resolve).with_outputs(LEDGER, main=DOCUMENTS))
        return results[DOCUMENTS], results[LEDGER]


class Robots(GlobalStage):
    def decide(self, flow):
        c = self.config
        flow.signed, decided = ({"signed": flow.signed, "keys": flow.keys}
                                | f"Stage_{self.name}" >> RobotsOptOut(c.robots, c.output, c.optout))
        return decided

    @classmethod
    def preflight(cls, config) -> None:
        robots_files(config.robots)  # each glob names captures

    @classmethod
    def report(cls, config, counters, report):
        return {"optout": dict(report.get("optout") or {}, robots_unreadable=robots_unreadable(config.output))}
