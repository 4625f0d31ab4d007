"""The mix: each source's documents are repeated or sampled while shards are written, at the rates that give the
requested token shares (computed from every part's finished tokens; pipeline/job/mix.py)."""
from __future__ import annotations

from pipeline.counters import notes_of
from pipeline.job.globals.base import GlobalStage
from pipeline.job.mix import STAGE
from pipeline.job.mix import Mix as MixDraw
from stages.mix import parse_weights


class Mix(GlobalStage):
    def __init__(self, spec, config, facts):
        super().__init__(spec, config, facts)
        self._draw = MixDraw(parse_weights(config.mix), config.seed, config.mix_max_epochs)

    def writes(self):
        return self._draw

    @classmethod
    def report(cls, config, counters, report):
        tokens, by_source = report["output"]["tokens"], report["output"]["sources"]
        return {"mix": {"requested": parse_weights(config.mix),
                        "achieved": {k: round(v["tokens"] / max(tokens, 1), 4) for k, v in sorted(by_source.items())},
                        "max_epochs": config.mix_max_epochs,
                        "capped_sources": sorted(k for k, v in notes_of(counters or {}, STAGE, "capped.").items()
                                                 if v)}}
