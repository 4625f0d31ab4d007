"""An example global stage from another package: at most `max_pages` pages of each site, the best kept (the job groups
the pages' signature records by `group`, one site's on one worker, and ledgers what `decide` drops). Registered through
the `refinery.stages` entry point in pyproject.toml, like the package's document stage."""
from dataclasses import dataclass

from refinery import GLOBAL, GroupDrop, StageSpec, best_first  # Refinery's supported surface: `refinery` only


@dataclass(frozen=True)
class SiteCapConfig:
    """Pages per site (a stage package's example of a global stage)."""

    enabled: bool = True
    max_pages: int = 100000       # pages one site may give the output


class SiteCap:
    def __init__(self, config: SiteCapConfig):
        self.config = config

    def group(self, record):
        return record.site or None  # a page without a host is in no group

    def decide(self, site, records):
        for record in best_first(records)[self.config.max_pages:]:
            yield GroupDrop(record.id, "site_over_cap", f"{len(records)} pages of {site}")


SPEC = StageSpec(name="site_cap", order=85, runs=GLOBAL, config=SiteCapConfig, build=SiteCap,
                 about="keeps the best max_pages of each site",
                 reasons={"site_over_cap": "its site gave `max_pages` better pages"})
