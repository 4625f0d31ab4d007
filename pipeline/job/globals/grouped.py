"""A global stage written in plain Python that decides within groups (stages/grouped.py): the default job of a global
spec without `job`, run by the shared grouping GroupedGlobal (groupings.py): one GroupByKey by the stage's group, so
each group's records meet on one worker."""
from __future__ import annotations

from pipeline.job.config import ConfigError
from pipeline.job.globals.base import GlobalStage
from pipeline.job.globals.groupings import GroupedGlobal
from stages.grouped import GroupedStage


class Grouped(GlobalStage):
    reads_site = True  # a plain-Python stage may group by site or language

    def __init__(self, spec, config, facts):
        super().__init__(spec, config, facts)
        self._stage = spec.make(config) if spec.build is not None else None
        if not isinstance(self._stage, GroupedStage):
            raise ConfigError(f"stage {spec.name}: runs over all documents, but its spec names no `job` and its build "
                              "gives no GroupedStage (stages/grouped.py)")

    def decide(self, flow):
        flow.signed, decided = flow.signed | f"Stage_{self.name}" >> GroupedGlobal(self.name, self._stage,
                                                                                   self.spec.reasons)
        return decided
