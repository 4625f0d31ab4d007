"""Paragraph dedup in the job: the global stage `Paragraphs` (at the end), whose PartEdit (pipeline/job/part_hooks.py)
is its counting as Beam transforms and its part hook, and its report (the stage itself, and why, is
stages/paragraphs.py).

    parts with dedup's decisions -> (paragraph hash, occurrence) for each distinct paragraph of each
        document that document dedup kept [+ the paragraphs of earlier runs' documents, --dedup-against]
    -> CombinePerKey(OwnerCombine): per paragraph, how many documents have it, the best of them, the
        parts they lie in (a cookie notice on a million pages costs one accumulator per worker, never a
        million values on one worker)
    -> where a paragraph's documents are few (stages.shared_text.HOLDERS_CAP), its owner chosen per group:
        (document, the holders of each of its repeated paragraphs) by GroupByKey, each document ranked in
        each group, the best per paragraph by CombinePerKey (an article's paragraphs stay in one document)
    -> the repeated ones (min_documents), as cuts (part key, (hash, owner id)) for each part that holds
        one: FinishPart cuts them from that part's documents
    -> the `top_paragraphs` most repeated, whose text and sites FinishPart picks up as it passes them, for
        the report.

The prepared parts store 64-bit hashes, never paragraph texts: only the few top ones are ever read as text.
"""
from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import apache_beam as beam
from apache_beam.io.filesystems import FileSystems

from pipeline.counters import count, note
from pipeline.job.finish import Output
from pipeline.job.globals.base import PartEditing
from pipeline.job.output import STATS_DIR
from pipeline.job.part_hooks import PartEdit, PartHook
from pipeline.job.parts import part_paths, read_rows
from pipeline.job.signatures import earlier_signature_files, read_signature_file
from stages.origin import origin_rank, original_host
from stages.paragraphs import (
    STAGE,
    Owner,
    ParagraphCut,
    ParagraphDedupConfig,
    earlier_occurrence,
    merge_owners,
    occurrence,
    site_sample,
    unit_texts,
)
from stages.record import Document
from stages.runner import Step
from stages.shared_text import Holder, group_ranks, holder_of

PARAGRAPHS_FILE = "repeated_paragraphs"  # _shard_stats/repeated_paragraphs-NNNNN: the report's top table
TOP_TEXTS = "top_texts"  # the part hook's output tag: (hash, (doc id, text, sites)) of a top paragraph it passed
TOP_TEXT_CHARS = 500  # of a most-repeated paragraph, in the report


class ParagraphDedup(PartEdit):
    """Paragraph dedup in phase 2: count every kept document's paragraph hashes (CountParagraphs), cut the repeated
    ones from the documents that do not own them (the ParagraphCut step, told its part's cuts by ParagraphPart) and
    write the most repeated paragraphs' table for the report."""

    name, outputs = STAGE, (TOP_TEXTS,)

    def __init__(self, config):
        self._config, self.step = config, Step(ParagraphCut(config.paragraph_dedup))

    def hook(self) -> PartHook:
        return ParagraphPart(self.step.stage)

    def counts(self, decided_by_part, file_index: dict[str, int]):
        c = self._config
        earlier = earlier_signature_files(c) if c.dedup_against else []
        return decided_by_part | "ParagraphDedup" >> CountParagraphs(c.paragraph_dedup, c.output, file_index, earlier)

    def report(self, emitted: dict[str, Any], side) -> None:
        _ = (emitted[TOP_TEXTS], side) | "TopParagraphs" >> WriteTopParagraphs(
            FileSystems.join(self._config.output, STATS_DIR))


class ParagraphPart(PartHook):
    """inputs: ([(paragraph hash, owner id)] of the part's cuts, [(hash, Owner)] of the most repeated paragraphs).
    The cut is told the part's cuts and which documents may hold one (phase 1's hashes say so: only those are
    re-read), and the text of the most repeated paragraphs is picked up as their documents pass, for the report."""

    def __init__(self, cut: ParagraphCut):
        self._cut, self._top, self._texts = cut, set(), {}

    def begin(self, inputs: Any) -> None:
        cuts, top = inputs or ({}, ())
        self._cut.cuts, self._cut.candidates = dict(cuts or {}), set()
        self._top, self._texts = {h for h, _ in top or ()}, {}

    def see(self, doc: Document, row: dict[str, Any]) -> None:
        hashes = row["paragraphs"] or ()
        if not self._cut.cuts.keys().isdisjoint(hashes):
            self._cut.candidates.add(doc.id)
        wanted = self._top.intersection(hashes) if self._top else ()
        if wanted:
            self._note_texts(doc, wanted)

    def _note_texts(self, doc: Document, wanted: set[int]) -> None:
        """Keeps, per wanted hash, the (id, line) of the smallest id that has it (the same on every runner) and the
        sites of all that have it."""
        host = original_host(doc.url)
        for h, unit in unit_texts(doc.text, self._cut.config):
            if h not in wanted:
                continue
            doc_id, text, hosts = self._texts.get(h, (None, None, set()))
            if doc_id is None or doc.id < doc_id:
                doc_id, text = doc.id, unit[:TOP_TEXT_CHARS]
            self._texts[h] = (doc_id, text, hosts | ({host} if host else set()))

    def end(self) -> Iterator[Output]:
        for h, (doc_id, text, hosts) in sorted(self._texts.items()):
            yield Output(TOP_TEXTS, (h, (doc_id, text, site_sample(hosts))))


class ParagraphOccurrences(beam.DoFn):
    """(part key, Decisions of its documents) -> (paragraph hash, Owner) for each distinct paragraph of each
    document of the part that document dedup kept."""

    def __init__(self, output: str, file_index: dict[str, int]):
        self._output, self._index = output, file_index

    def process(self, element):
        key, decided = element
        dropped = {d.id for d in decided}
        part = self._index[key]
        columns = ["id", "url", "metadata", "quality_score", "chars", "paragraphs"]
        for row in read_rows(part_paths(self._output, key)["docs.parquet"], columns):
            if row["id"] in dropped or not row["paragraphs"]:
                continue
            url = (row["url"] or b"").decode("utf-8", "surrogatepass")
            metadata = json.loads(row["metadata"]) if row["metadata"] else {}
            rank = origin_rank(url, metadata, row["quality_score"], row["chars"], row["id"])
            holder = holder_of(part, original_host(url), rank, len(row["paragraphs"]))
            found = occurrence(rank, part, holder).plain()
            for h in row["paragraphs"]:
                yield h, found


class EarlierParagraphs(beam.DoFn):
    """(old run's folder, signature file, its SHA-256) -> (paragraph hash, Owner) of every document there."""

    def process(self, element):
        folder, path, sha256 = element
        for batch in read_signature_file(path, sha256).iter_batches(columns=["id", "paragraphs"]):
            for row in batch.to_pylist():
                found = earlier_occurrence(f"{row['id']} of {folder}").plain()
                for h in row["paragraphs"] or ():
                    yield h, found


class OwnerCombine(beam.CombineFn):
    """Occurrences of one paragraph -> one Owner (stages.paragraphs.merge_owners: any order, same result), as
    plain tuples between the steps (`Owner.plain`)."""

    def create_accumulator(self):
        return None

    def add_input(self, accumulator, occurrence):
        found = Owner.of(occurrence)
        return (found if accumulator is None else merge_owners([Owner.of(accumulator), found])).plain()

    def merge_accumulators(self, accumulators):
        merged = merge_owners(Owner.of(a) for a in accumulators if a is not None)
        return None if merged is None else merged.plain()

    def extract_output(self, accumulator):
        return accumulator


def _repeated(kv, min_documents: int):
    h, plain = kv
    if plain[0] >= min_documents:
        count(note(STAGE, "repeated_paragraphs"))
        yield h, plain


def _by_holder(kv):
    """(hash, Owner with holders) -> (holder id, (hash, holders)) for each holder: a document's groups meet. A
    paragraph on one site only is its template (decided per paragraph): its holders are told so, not sent the list
    (a site's template on 30 pages would otherwise send 900 holders)."""
    h, plain = kv
    one_site = len({holder[1] for holder in plain[3]}) == 1
    for holder in plain[3]:
        yield holder[2][-1], (h, None if one_site else plain[3])


def _ranks_in_groups(kv):
    """(document id, its groups) -> (hash, the document's occurrence ranked in that paragraph's group)."""
    doc_id, groups = kv
    templates = sum(1 for _, holders in groups if holders is None)
    groups = sorted((h, tuple(Holder(x[0], x[1], tuple(x[2]), x[3]) for x in holders))
                    for h, holders in groups if holders is not None)
    if not groups:
        return
    doc = next(x for x in groups[0][1] if x.id == doc_id)
    for h, rank in group_ranks(doc, groups, templates):
        yield h, occurrence(rank, doc.part).plain()


def _listed(kv) -> int:
    """0: the paragraph's holders are listed and on more than one site (owner chosen by group); 1: too many, on
    one site (its template), or an earlier run owns it: the per-paragraph rank decides."""
    holders = kv[1][3]
    return 0 if holders is not None and len({h[1] for h in holders}) > 1 else 1


def _cuts_by_part(kv, part_keys: dict[int, str]):
    """(hash, Owner) -> (part key, (hash, owner id)) for each part holding the paragraph."""
    h, owner = kv[0], Owner.of(kv[1])
    for part in sorted(owner.parts):
        yield part_keys[part], (h, owner.owner_id)


def _top_row(kv, top: list):
    """(hash, (doc id, text, sites)) -> a line of the report's table: the text, documents, sites."""
    h, (_, text, sites) = kv
    owner = Owner.of(dict(top)[h])
    return json.dumps({"text": text, "documents": owner.documents, "kept_in": owner.owner_id,
                       "sites": list(sites)}, ensure_ascii=False, sort_keys=True)


class TopTextCombine(beam.CombineFn):
    """(doc id, text, sites) of a top paragraph, one per part -> the text in the smallest id (the same on every
    runner) and a sample of the sites of all its documents (stages.paragraphs.site_sample)."""

    def create_accumulator(self):
        return None

    def add_input(self, accumulator, found):
        return self.merge_accumulators([accumulator, found])

    def merge_accumulators(self, accumulators):
        found = [a for a in accumulators if a is not None]
        if not found:
            return None
        doc_id, text, _ = min(found)
        return doc_id, text, site_sample(site for _, _, sites in found for site in sites)

    def extract_output(self, accumulator):
        return accumulator


class CountParagraphs(beam.PTransform):
    """(part key, Decisions) of every part [, old runs' signature files] -> (cuts: (part key, (hash, owner
    id)), top: one list of the `top_paragraphs` most repeated (hash, Owner))."""

    def __init__(self, config: ParagraphDedupConfig, output: str, file_index: dict[str, int],
                 earlier: list[tuple[str, str, str]] = ()):
        super().__init__()
        self._config, self._output, self._index, self._earlier = config, output, file_index, list(earlier)

    def expand(self, decided_by_part):
        c = self._config
        occurrences = decided_by_part | "Occurrences" >> beam.ParDo(ParagraphOccurrences(self._output, self._index))
        if self._earlier:
            old = (decided_by_part.pipeline
                   | "EarlierFiles" >> beam.Create(self._earlier)
                   | "SpreadEarlier" >> beam.Reshuffle()
                   | "EarlierParagraphs" >> beam.ParDo(EarlierParagraphs()))
            occurrences = (occurrences, old) | "AllOccurrences" >> beam.Flatten()
        repeated = (occurrences
                    | "CountParagraphs" >> beam.CombinePerKey(OwnerCombine())
                    | "Repeated" >> beam.FlatMap(_repeated, c.min_documents))
        listed, unlisted = repeated | "ListedHolders" >> beam.Partition(lambda kv, _n: _listed(kv), 2)
        by_group = (repeated
                    | "WithHolders" >> beam.Filter(lambda kv: kv[1][3] is not None)
                    | "ByHolder" >> beam.FlatMap(_by_holder)
                    | "GroupsOfDocument" >> beam.GroupByKey()
                    | "RankInGroups" >> beam.FlatMap(_ranks_in_groups)
                    | "OwnerOfGroup" >> beam.CombinePerKey(OwnerCombine()))
        owned = (by_group, unlisted) | "Owned" >> beam.Flatten()
        part_keys = {index: key for key, index in self._index.items()}
        cuts = owned | "CutsByPart" >> beam.FlatMap(_cuts_by_part, part_keys)
        top = owned | "MostRepeated" >> beam.combiners.Top.Of(c.top_paragraphs, key=lambda kv: (kv[1][0], kv[0]))
        return cuts, top


class WriteTopParagraphs(beam.PTransform):
    """(hash, (doc id, text, sites)) of the top paragraphs as FinishPart met them -> the report's table file."""

    def __init__(self, folder: str):
        super().__init__()
        self._folder = folder

    def expand(self, texts_and_top):
        texts, top = texts_and_top
        return (texts
                | "FirstText" >> beam.CombinePerKey(TopTextCombine())
                | "TopRows" >> beam.Map(_top_row, beam.pvalue.AsSingleton(top))
                | "WriteTop" >> beam.io.WriteToText(FileSystems.join(self._folder, PARAGRAPHS_FILE),
                                                    shard_name_template="-SSSSS"))


class Paragraphs(PartEditing):
    edit = ParagraphDedup

    @classmethod
    def report(cls, config, counters, report):
        """Its entry of report.json's `edits` with the most repeated paragraphs, their counts and a sample of sites."""
        top = []
        for path in (m.path for r in FileSystems.match([FileSystems.join(config.output, STATS_DIR, PARAGRAPHS_FILE + "*")])
                     for m in r.metadata_list):
            with FileSystems.open(path) as fh:
                top += [json.loads(line) for line in fh.read().decode("utf-8").splitlines() if line.strip()]
        book = dict(report.get("edits") or {})
        if not top and STAGE not in book:
            return {}
        entry = dict(book.get(STAGE) or {"documents": 0, "paragraphs": 0, "chars": 0, "share_of_text": None})
        entry["repeated_paragraphs"] = (counters or {}).get(note(STAGE, "repeated_paragraphs"))
        entry["most_repeated"] = sorted(top, key=lambda t: (-t["documents"], t["text"]))
        book[STAGE] = entry
        return {"edits": book}
