"""Phase 2's passes over the texts: each prepared part is streamed by a task of its own, twice.

    dedup's decisions, grouped by part -> FinishPart: the part's documents minus the dropped ones
        (ledgered now, with url, language, file and snippet), through the per-document stages after
        dedup (decontamination, bad words, toxicity, PII) -> OUTPUT/_finished/<key>.parquet
    -> WritePart: the mix's copies, the write check, the validation and anneal splits -> the part's
        shards (pipeline/job/output.py), and the signatures of the originals in the output

Dedup itself reads only signatures (pipeline/job/dedup.py). So no step holds documents beyond one chunk
of one part: what the job gathers is a few records per document (signatures, dedup decisions, ledger
drops and, with a mix or an anneal split, (id, source, tokens, quality) for their totals); shards and
signatures are written by the part's task, never gathered. The second
pass exists because the mix's rates and the anneal split depend on every part's finished tokens.
"""
from __future__ import annotations

import dataclasses
import json
from collections.abc import Sequence
from typing import Any

import apache_beam as beam
from apache_beam.io.filesystems import FileSystems

from pipeline.job.dedup import Decision
from pipeline.job.holdout import VALID
from pipeline.job.holdout import split as holdout_split
from pipeline.job.mix import Anneal, AnnealPlan, Mix, Rehydration, repeats, weight_of
from pipeline.job.output import STATS_DIR, ShardWriter
from pipeline.job.paragraphs import WriteTopParagraphs, host_of
from pipeline.job.prepare import (
    PREPARED_DIR,
    PartWriter,
    RunsStages,
    part_paths,
    read_rows,
)
from pipeline.job.schema import (
    PART_SCHEMA,
    SIGNATURE_SCHEMA,
    Signature,
    document_from_part,
    document_row,
    edit_rows,
    part_row,
)
from pipeline.job.signatures import SIGNATURES_DIR
from pipeline.job.transforms import LEDGER, count, runner
from stages.mix import approx_tokens, mix_rates, site_of
from stages.paragraphs import ParagraphCut, site_sample, unit_texts
from stages.record import Document, Drop
from stages.runner import CHUNK, CHUNK_CHARS, Step

FINISHED_DIR = "_finished"
LEDGER_ROWS, FINISHED, SIGNATURE_FILES = "ledger_rows", "finished", "signature_files"  # tagged outputs
ANNEAL_TOP = "anneal_top"  # (kind, name, tokens) of each document drawn into the anneal split: kind page, site, lang
ANNEAL_TOP_N = 10          # the largest pages, sites and languages of the anneal split, in report.json
EDITS, TOP_TEXTS = "edits", "top_texts"
ANNEAL = "anneal"
REHYDRATE = "rehydrate"  # counters: rehydrate.repeats


def finished_path(output: str, key: str) -> str:
    return FileSystems.join(output, FINISHED_DIR, f"{key}.parquet")


class FinishPart(RunsStages):
    """(part key, {"decided": [[Decision]], "cuts": [(paragraph hash, owner id)], "sizes": [(id, cluster size)]})
    -> the key, once the part's finished documents are written; the part's phase-1 ledger rows (LEDGER_ROWS),
    its drops (LEDGER), the edit book's rows of what stages cut from the documents kept (EDITS), the text of
    the most repeated paragraphs met (TOP_TEXTS: side input `top`, [(hash, Owner)]) and, if `tally`, (id,
    source, tokens, quality, rehydration weight, language, site) of each finished document (FINISHED)."""

    def __init__(self, output: str, steps: Sequence[tuple[str, Step]], tally: bool, snippet_chars: int,
                 deduplicated: bool = False, rehydrate: Rehydration | None = None):
        self._output, self._tally, self._snippet = output, tally, snippet_chars
        self._deduplicated, self._rehydrate = deduplicated, rehydrate  # cluster sizes are known; their weights
        self._runner = runner([step for _, step in steps])
        # paragraph dedup's stage, told each part's cuts before the part's documents pass
        self._cut = next((step.stage for _, step in steps if isinstance(step.stage, ParagraphCut)), None)

    def process(self, element, top=()):
        key, joined = element
        if not joined["decided"]:
            raise RuntimeError(f"paragraph cuts or cluster sizes came for part {key}, which is not in this run")
        decided: dict[str, Decision] = {d.id: d for d in joined["decided"][0]}
        if self._cut is not None:
            self._cut.cuts, self._cut.candidates = dict(joined["cuts"]), set()
        sizes = dict(joined["sizes"])
        top_hashes = {h for h, _ in top}
        paths = part_paths(FileSystems.join(self._output, PREPARED_DIR), key)
        for row in read_rows(paths["ledger.parquet"]):
            yield beam.pvalue.TaggedOutput(LEDGER_ROWS, row)
        out = PartWriter(finished_path(self._output, key), PART_SCHEMA)
        chunk: list[Document] = []
        signatures: dict[str, Signature] = {}
        top_texts: dict[int, tuple] = {}
        chars = 0
        for row in read_rows(paths["docs.parquet"]):
            doc = document_from_part(row)
            decision = decided.get(doc.id)
            if decision is not None:
                yield self._ledgered(doc.drop(decision.stage, decision.reason, decision.detail,
                                              kept_id=decision.kept_id, value=decision.value))
                continue
            if self._deduplicated:
                doc = doc.replace(cluster_size=sizes.get(doc.id, 1))
            if self._cut is not None and not self._cut.cuts.keys().isdisjoint(row["paragraphs"] or ()):
                self._cut.candidates.add(doc.id)  # phase 1's hashes say a cut may apply: only these are re-read
            if top_hashes:
                _note_top_texts(doc, top_hashes.intersection(row["paragraphs"] or ()), top_texts, self._cut)
            chunk.append(doc)
            chars += len(doc.text)
            signatures[doc.id] = Signature.of_row(row)  # of the text dedup compared (before PII)
            if len(chunk) >= CHUNK or chars >= CHUNK_CHARS:
                yield from self._finish(chunk, signatures, out)
                chunk, signatures, chars = [], {}, 0
        yield from self._finish(chunk, signatures, out)
        out.commit()
        for h, (doc_id, text, hosts) in sorted(top_texts.items()):
            yield beam.pvalue.TaggedOutput(TOP_TEXTS, (h, (doc_id, text, site_sample(hosts))))
        yield key

    def _finish(self, chunk: list[Document], signatures: dict[str, Signature], out: PartWriter):
        kept, drops = self._runner.run(chunk)
        for doc in kept:
            out.add(part_row(doc, signatures[doc.id]))
            for row in edit_rows(doc, self._snippet):
                yield beam.pvalue.TaggedOutput(EDITS, row)
            if self._tally:
                yield beam.pvalue.TaggedOutput(FINISHED, (doc.id, doc.source, approx_tokens(doc.text), doc.quality_score,
                                                          weight_of(self._rehydrate, doc.cluster_size), doc.lang,
                                                          site_of(doc.url)))
        for drop in drops:
            yield self._ledgered(drop)

    def _ledgered(self, drop: Drop):
        """To the ledger, with the snippet already cut to the run's length (the job holds its drops until
        their kept copies are resolved)."""
        return beam.pvalue.TaggedOutput(LEDGER, dataclasses.replace(drop, snippet=drop.snippet[:self._snippet]))


def _note_top_texts(doc: Document, wanted: set[int], found: dict[int, tuple], cut: ParagraphCut) -> None:
    """Keeps, per wanted paragraph hash, the (id, line) of the smallest id that has it (the same on every runner)
    and the sites of all that have it."""
    if not wanted:
        return
    host = host_of(doc.url)
    for h, unit in unit_texts(doc.text, cut.config):
        if h not in wanted:
            continue
        doc_id, text, hosts = found.get(h, (None, None, set()))
        if doc_id is None or doc.id < doc_id:
            doc_id, text = doc.id, unit[:TOP_TEXT_CHARS]
        found[h] = (doc_id, text, hosts | ({host} if host else set()))


TOP_TEXT_CHARS = 500  # of a most-repeated paragraph, in the report


class WritePart(RunsStages):
    """A finished part's key -> stats lines of its shards (main output; VALID and ANNEAL tagged), the mix's
    and the write check's drops (LEDGER) and its signature file's (SIGNATURE_FILES: path, rows, bytes,
    SHA-256, for the manifest); writes the shards and the signatures of its originals in the output
    (signatures/part-FFFFF.parquet). Side inputs: the mix's rates and the anneal split's token
    totals ({} when off)."""

    def __init__(self, output: str, shard_index: dict[str, int], write_check, mix: Mix | None,
                 holdout_fraction: float, anneal: Anneal | None, shard_size_mb: float,
                 row_group_rows: int, rehydrate: Rehydration | None = None):
        self._output, self._index, self._runner = output, shard_index, runner([write_check])
        self._rehydrate = rehydrate
        self._mix, self._holdout, self._anneal = mix, holdout_fraction, anneal
        self._shard = (shard_size_mb, row_group_rows)

    def _writer(self, split: str, prefix: str) -> ShardWriter:
        folder = FileSystems.join(self._output, *([split] if split else []), "data")
        return ShardWriter(folder, prefix, *self._shard)

    def process(self, key: str, rates: dict[str, float], totals: dict[str, int]):
        name = f"part-{self._index[key]:05d}"
        plan = self._anneal.plan(totals) if self._anneal else None  # the same on every worker: from the side input
        writers = {"": self._writer("", name), "repeats": self._writer("", f"{name}-repeats")}
        if self._holdout:
            writers[VALID] = self._writer(VALID, name)
        if self._anneal:
            writers[ANNEAL] = self._writer(ANNEAL, name)
        signatures = PartWriter(FileSystems.join(self._output, SIGNATURES_DIR, f"{name}.parquet"), SIGNATURE_SCHEMA)
        for row in read_rows(finished_path(self._output, key)):
            doc = document_from_part(row)
            weight = weight_of(self._rehydrate, doc.cluster_size)
            copies = self._mix.draw(doc, rates, count, weight) if self._mix else repeats(doc, weight)
            if weight > 1 and not isinstance(copies, Drop):
                count(f"{REHYDRATE}.repeats", len(copies) - 1)
            if isinstance(copies, Drop):  # the mix did not draw it
                yield beam.pvalue.TaggedOutput(LEDGER, copies)
                continue
            checked, drops = self._runner.run(copies)
            for copy in checked:
                if self._place(copy, row, writers, signatures, plan):
                    tokens = approx_tokens(copy.text)
                    for kind, name in (("page", copy.url or copy.id), ("site", site_of(copy.url)), ("lang", copy.lang)):
                        yield beam.pvalue.TaggedOutput(ANNEAL_TOP, (kind, str(name), tokens))
            for drop in drops:
                yield beam.pvalue.TaggedOutput(LEDGER, drop)
        signatures.commit()
        yield beam.pvalue.TaggedOutput(SIGNATURE_FILES, json.dumps(
            {"path": f"{SIGNATURES_DIR}/{name}.parquet", "rows": signatures.rows, **signatures.digest}))
        for split, writer in writers.items():
            for stats in writer.close():
                line = json.dumps(stats)
                yield line if split in ("", "repeats") else beam.pvalue.TaggedOutput(split, line)

    def _place(self, doc: Document, row: dict[str, Any], writers: dict, signatures: PartWriter,
               plan: AnnealPlan | None) -> bool:
        """Writes the document to its split; True if it also went into the anneal split."""
        split = holdout_split(doc, self._holdout)
        if split is None:
            return False
        if doc.epoch == 0:
            signatures.add({"id": doc.id, "source": doc.source, "exact_key": row["exact_key"], "bands": row["bands"],
                            "paragraphs": row["paragraphs"]})
        shard_row = document_row(doc)
        if split == VALID:
            writers[VALID].add(shard_row)
            return False
        writers["repeats" if doc.epoch else ""].add(shard_row)
        if self._anneal and self._anneal.pick(doc, plan):
            count("anneal.rows")
            writers[ANNEAL].add(shard_row)
            return True
        return False


class Finish(beam.PTransform):
    """(part keys, dedup's Decisions, cluster sizes) -> (phase 2's ledger drops, phase 1's ledger rows, the edit
    book's rows).
    Writes every part's finished documents, then its shards (data/, valid/, anneal/), the shards' stats and
    signatures/; with paragraph dedup (`paragraphs`: a CountParagraphs), its counts come first."""

    def __init__(self, config, per_document: Sequence[tuple[str, Any]], mix: Mix | None, write_check,
                 file_index: dict[str, int], paragraphs: beam.PTransform | None = None,
                 rehydrate: Rehydration | None = None, deduplicated: bool = False):
        super().__init__()
        self._config, self._per_document, self._mix = config, list(per_document), mix
        self._write_check, self._file_index, self._paragraphs = write_check, file_index, paragraphs
        self._rehydrate, self._deduplicated = rehydrate, deduplicated  # deduplicated: cluster sizes are known

    def expand(self, pcolls):
        keys, decisions, sizes = pcolls  # sizes: (part, (id, cluster size)) of documents dedup kept for others
        c, mix, p = self._config, self._mix, keys.pipeline
        decided = ({"part": keys | "PartKeys" >> beam.Map(lambda k: (k, None)),
                    "decided": decisions | "ByPart" >> beam.Map(lambda d: (d.part, d))}
                   | "DecisionsOfPart" >> beam.CoGroupByKey()
                   | "OfRunParts" >> beam.FlatMap(_decisions_of_part))
        if self._paragraphs is not None:
            cuts, top = decided | "ParagraphDedup" >> self._paragraphs
        else:
            cuts, top = p | "NoCuts" >> beam.Create([]), p | "NoTop" >> beam.Create([[]])
        finished = ({"decided": decided, "cuts": cuts, "sizes": sizes}
                    | "CutsOfPart" >> beam.CoGroupByKey()
                    | "FinishParts" >> beam.ParDo(FinishPart(c.output, self._per_document,
                                                             bool(mix or c.anneal_fraction), c.ledger_snippet_chars,
                                                             self._deduplicated, self._rehydrate),
                                                  beam.pvalue.AsSingleton(top))
                    .with_outputs(LEDGER, LEDGER_ROWS, FINISHED, EDITS, TOP_TEXTS, main="keys"))
        if self._paragraphs is not None:
            _ = (finished[TOP_TEXTS], top) | "TopParagraphs" >> WriteTopParagraphs(FileSystems.join(c.output, STATS_DIR))
        rates, totals = p | "NoRates" >> beam.Create([{}]), p | "NoTotals" >> beam.Create([{}])
        if mix:
            weights = mix.weights
            rates = (finished[FINISHED]
                     | "SourceTokens" >> beam.Map(lambda f: (f[1], f[2] * f[4]))  # rehydrated tokens
                     | "PerSource" >> beam.CombinePerKey(sum)
                     | "TokensBySource" >> beam.combiners.ToDict()
                     | "MixRates" >> beam.Map(lambda tokens: mix_rates(weights, tokens)))
        anneal = Anneal(c.anneal_fraction, c.anneal_min_quality, c.seed, c.anneal_max_page_share,
                        c.anneal_max_site_share, c.anneal_max_language_excess) if c.anneal_fraction else None
        if anneal:
            totals = anneal_totals(finished[FINISHED], anneal, rates, mix, c.holdout_fraction)
        written = (finished["keys"]
                   | "SpreadFinished" >> beam.Reshuffle()
                   | "WriteParts" >> beam.ParDo(WritePart(c.output, self._file_index, self._write_check, mix,
                                                          c.holdout_fraction, anneal, c.shard_size_mb,
                                                          c.row_group_rows, self._rehydrate),
                                                beam.pvalue.AsSingleton(rates), beam.pvalue.AsSingleton(totals))
                   .with_outputs(LEDGER, VALID, ANNEAL, SIGNATURE_FILES, ANNEAL_TOP, main="stats"))
        if anneal:
            _ = (written[ANNEAL_TOP]
                 | "AnnealTopKeys" >> beam.Map(lambda r: ((r[0], r[1]), r[2]))
                 | "AnnealTopSums" >> beam.CombinePerKey(sum)
                 | "AnnealTopByKind" >> beam.Map(lambda kv: (kv[0][0], (kv[1], kv[0][1])))
                 | "AnnealTopN" >> beam.combiners.Top.LargestPerKey(ANNEAL_TOP_N)
                 | "AnnealTopJson" >> beam.Map(lambda kv: json.dumps({"kind": kv[0], "top": kv[1]}, ensure_ascii=False))
                 | "AnnealTopWrite" >> beam.io.WriteToText(FileSystems.join(c.output, STATS_DIR, ANNEAL_TOP),
                                                           shard_name_template="-SSSSS"))
        _ = (written[SIGNATURE_FILES]
             | "SignatureFiles" >> beam.io.WriteToText(FileSystems.join(c.output, STATS_DIR, SIGNATURE_FILES),
                                                        shard_name_template="-SSSSS"))
        for split, on in (("", True), (VALID, bool(c.holdout_fraction)), (ANNEAL, bool(anneal))):
            if on:
                folder = FileSystems.join(c.output, split) if split else c.output
                _ = (written[split or "stats"]
                     | f"Stats{split}" >> beam.io.WriteToText(FileSystems.join(folder, STATS_DIR, "stats"),
                                                              shard_name_template="-SSSSS"))
        drops = (finished[LEDGER], written[LEDGER]) | "AllDrops" >> beam.Flatten()
        return drops, finished[LEDGER_ROWS], finished[EDITS]


def anneal_totals(finished, anneal: Anneal, rates, mix: Mix | None, holdout_fraction: float):
    """The anneal split's side input: the tallies of training and high-quality tokens, overall, per language and
    per page size class (a few thousand numbers at most), and those of the largest sites
    (`Anneal.sites_to_tally`: only they can be over their cap), whatever the crawl's number of sites."""
    tallies = (finished
               | "AnnealTallies" >> beam.FlatMap(anneal.tallies, beam.pvalue.AsSingleton(rates), mix, holdout_fraction)
               | "SumAnneal" >> beam.CombinePerKey(sum))
    small = tallies | "NotSites" >> beam.Filter(lambda kv: not kv[0].startswith(("hq|site:", "hq2|site:")))
    largest = (tallies
               | "SiteTotals" >> beam.Filter(lambda kv: kv[0].startswith("hq|site:") and kv[0].count("|") == 1)
               | "LargestSites" >> beam.combiners.Top.Of(anneal.sites_to_tally(), key=lambda kv: (kv[1], kv[0]))
               | "LargestNames" >> beam.Map(lambda top: {key for key, _ in top}))
    of_largest = (tallies
                  | "SiteSizes" >> beam.Filter(lambda kv: kv[0].startswith(("hq|site:", "hq2|site:"))
                                               and kv[0].count("|") == 3)
                  | "OfLargestSites" >> beam.Filter(lambda kv, names: "hq|" + kv[0].split("|")[1] in names,
                                                    beam.pvalue.AsSingleton(largest)))
    return ((small, of_largest)
            | "AnnealTotalsAll" >> beam.Flatten()
            | "AnnealTotals" >> beam.combiners.ToDict())


def _decisions_of_part(kv):
    """(part key, {"part": [..], "decided": [Decision]}) -> (part key, its Decisions), for the run's parts."""
    key, joined = kv
    if not joined["part"]:
        raise RuntimeError(f"dedup decided on documents of part {key}, which is not in this run")
    yield key, list(joined["decided"])
