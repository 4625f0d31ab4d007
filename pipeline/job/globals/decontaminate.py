"""Decontamination: a per-document step in phase 2 with the benchmarks' 13-gram index loaded once here (its size
goes into the report's facts); it cuts matched spans or drops the document (stages/decontam.py)."""
from __future__ import annotations

import collections
import sys

from pipeline.job.globals.base import GlobalStage
from stages.decontam import DecontaminationIndex, Decontaminator, read_benchmarks
from stages.runner import Step


class Decontaminate(GlobalStage):
    edits_text = True

    def __init__(self, spec, config, facts):
        super().__init__(spec, config, facts)
        c = config.decontam
        index = DecontaminationIndex(read_benchmarks(c.benchmarks), c.n, c.min_words)
        loaded = collections.Counter(item.benchmark for item in index.items)
        facts["decontamination"] = {b: {"items": n, "too_short": index.skipped.get(b, 0)}
                                    for b, n in sorted(loaded.items())}
        print("[refinery] decontamination: " + ", ".join(
            f"{b} {n:,} items" + (f" ({index.skipped[b]} too short to match)" if index.skipped.get(b) else "")
            for b, n in sorted(loaded.items())), file=sys.stderr)
        self.step = Step(Decontaminator(index, c), timeout_s=config.stage_timeout_s)
