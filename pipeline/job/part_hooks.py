"""What a global stage does to each part inside phase 2's FinishPart, beside its per-document step, so that the
task names no stage: `begin(inputs)` before the part's documents pass, with what the scheduler joined to the part
for this stage (None if nothing); `see(doc, row)` for each document that reaches the stages (its prepared row holds
what phase 1 stored for the stage); `end()` what it emits once the part is done.

Paragraph dedup's is the one so far: its cut is told the part's cuts and which documents may hold one (phase 1's
hashes say so: only those are re-read), and the text of the most repeated paragraphs is picked up as their
documents pass, for the report.
"""
from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

from pipeline.job.finish import TOP_TEXT_CHARS, TOP_TEXTS, Output
from stages.origin import original_host
from stages.paragraphs import STAGE as PARAGRAPH_STAGE
from stages.paragraphs import ParagraphCut, site_sample, unit_texts
from stages.record import Document


class PartHook:
    name = ""

    def begin(self, inputs: Any) -> None:
        pass

    def see(self, doc: Document, row: dict[str, Any]) -> None:
        pass

    def end(self) -> Iterator[Output]:
        return iter(())


class ParagraphPart(PartHook):
    """inputs: ({paragraph hash: owner id} of the part's cuts, [(hash, Owner)] of the most repeated paragraphs)."""

    name = PARAGRAPH_STAGE

    def __init__(self, cut: ParagraphCut):
        self._cut, self._top, self._texts = cut, set(), {}

    def begin(self, inputs: Any) -> None:
        cuts, top = inputs or ({}, ())
        self._cut.cuts, self._cut.candidates = dict(cuts or {}), set()
        self._top, self._texts = {h for h, _ in top}, {}

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


def part_hooks(steps: Sequence[tuple[str, Any]]) -> list[PartHook]:
    """The hooks of phase 2's per-document steps that need one."""
    return [ParagraphPart(step.stage) for _, step in steps if isinstance(getattr(step, "stage", None), ParagraphCut)]
