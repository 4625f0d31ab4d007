"""Each global stage's hooks on rows in memory (the unit tier: no Beam pipeline runs here): what the table names for
each, the checks before work, the report sections and problems, and the shared grouping's decision over a group."""
import json

import pytest

from pipeline.job.config import ConfigError, load_config
from pipeline.job.globals import build, stage_class
from pipeline.job.globals.base import Flow, GlobalStage, decides
from pipeline.job.globals.groupings import _decide
from pipeline.job.output import STATS_DIR
from pipeline.job.signed import Signed
from stages.grouped import GroupDrop, best_first
from stages.table import GLOBAL, StageSpec, stage_table

GLOBAL_SPECS = [spec for spec in stage_table() if spec.runs == GLOBAL]


def config(tmp_path=None, **overrides):
    values = {"output": str(tmp_path / "out") if tmp_path else "/nonexistent/out"}
    values.update(overrides)
    return load_config(overrides=values)


def record(doc_id, site="a.example", quality=0.5, chars=100):
    return Signed(doc_id, "part-0", 0, None, None, quality, chars, chars // 4, site=site, lang="en")


def test_every_global_stage_of_the_table_has_a_global_stage_class_and_the_deciders_say_so():
    classes = {spec.name: stage_class(spec) for spec in GLOBAL_SPECS}
    assert all(issubclass(c, GlobalStage) for c in classes.values())
    deciding = {name for name, c in classes.items() if c.decide is not GlobalStage.decide}
    assert deciding == {"robots", "dedup_against", "exact_dedup", "near_dedup"}
    assert [c.deduplicates for name, c in sorted(classes.items())] == [
        name in ("exact_dedup", "near_dedup") for name in sorted(classes)]
    assert {name for name, c in classes.items() if c.edits_text} == {"paragraph_dedup", "decontaminate"}


def test_a_global_spec_without_a_job_needs_a_grouped_stage(tmp_path):
    spec = StageSpec(name="nothing_grouped", order=85, runs=GLOBAL, build=lambda settings: object(), reasons={})
    with pytest.raises(ConfigError, match="nothing_grouped: .* no GroupedStage"):
        build(spec, config(tmp_path), {})


class CapPerSite:
    def group(self, r):
        return r.site or None

    def decide(self, site, records):
        for r in best_first(records)[1:]:
            yield GroupDrop(r.id, "over_cap", f"{len(records)} pages of {site}")


def test_the_grouped_stage_keeps_the_best_of_a_group_and_refuses_a_reason_its_spec_lacks(tmp_path):
    spec = StageSpec(name="cap", order=85, runs=GLOBAL, build=lambda settings: CapPerSite(),
                     reasons={"over_cap": "its site gave enough"})
    stage = build(spec, config(tmp_path), {})
    assert decides(stage) and stage.step is None and stage.part_edit() is None and stage.writes() is None
    assert stage.reads_site and not any(stage_class(s).reads_site for s in GLOBAL_SPECS if s.job)  # ~25 B a record
    members = [record("b", quality=0.9), record("a", quality=0.2), record("c", quality=0.9, chars=300)]
    out = list(_decide(("a.example", [m.pack() for m in members]), "cap", CapPerSite(), frozenset({"over_cap"})))
    kept = [Signed.unpack(o) for o in out if isinstance(o, bytes)]
    drops = [o.value for o in out if not isinstance(o, bytes)]
    assert [k.id for k in kept] == ["c"]  # best first: quality, then length
    assert sorted((d.id, d.reason, d.detail) for d in drops) == [("a", "over_cap", "3 pages of a.example"),
                                                                ("b", "over_cap", "3 pages of a.example")]
    with pytest.raises(ValueError, match="reason 'over_cap', which its spec does not declare"):
        list(_decide(("a.example", [m.pack() for m in members]), "cap", CapPerSite(), frozenset({"other"})))


def test_the_first_dedup_stage_sets_what_near_dedup_bands():
    exact = stage_class(next(s for s in GLOBAL_SPECS if s.name == "exact_dedup"))
    stage, flow = exact.__new__(exact), Flow(signed="records", keys="keys")
    assert stage._entering(flow) == "records" and flow.entering == "records"
    flow.signed = "after exact dedup"
    assert stage._entering(flow) == "records"  # near dedup's: what entered exact dedup


def test_dedup_reports_its_s_curve_and_refuses_to_publish_an_unconverged_clustering():
    near = next(stage_class(s) for s in GLOBAL_SPECS if s.name == "near_dedup")
    c = config()
    counters = {"near_dedup.cc.round0.large": 3, "near_dedup.cc.round0.edges": 10, "near_dedup.note.cluster_size.2": 4}
    section = near.report(c, counters, {})["dedup"]
    assert (section["bands"], section["rows"]) == c.dedup.band_rows() and section["cluster_sizes"]["2"] == 4
    assert 0 < section["s_curve"]["0.5"] < section["s_curve"]["0.9"] <= 1
    assert near.problems(c, {"dedup": {"converged": True}}) == []
    assert "did not converge in" in near.problems(c, {"dedup": {"converged": False}})[0]


def test_the_mix_reports_requested_and_achieved_shares_and_the_capped_sources():
    mix = next(stage_class(s) for s in GLOBAL_SPECS if s.name == "mix")
    c = config(mix="web=0.5,books=0.5")
    report = {"output": {"tokens": 400, "sources": {"web": {"rows": 3, "tokens": 300}, "books": {"rows": 1, "tokens": 100}}}}
    section = mix.report(c, {"mix.note.capped.books": 2, "mix.note.capped.web": 0}, report)["mix"]
    assert section == {"requested": {"web": 0.5, "books": 0.5}, "achieved": {"books": 0.25, "web": 0.75},
                       "max_epochs": c.mix_max_epochs, "capped_sources": ["books"]}


def test_robots_and_paragraph_dedup_add_what_they_wrote_to_their_sections(tmp_path):
    c = config(tmp_path)
    stats = tmp_path / "out" / STATS_DIR
    stats.mkdir(parents=True)
    (stats / "robots_unreadable-00000").write_text(json.dumps({"file": "b.warc.gz", "where": "@0", "why": "gzip"})
                                                   + "\n" + json.dumps({"file": "a.warc.gz", "where": "@9", "why": "x"})
                                                   + "\n", encoding="utf-8")
    robots = next(stage_class(s) for s in GLOBAL_SPECS if s.name == "robots")
    optout = robots.report(c, {}, {"optout": {"agents": ["GPTBot"], "robots_unreadable": []}})["optout"]
    assert optout["agents"] == ["GPTBot"] and [u["file"] for u in optout["robots_unreadable"]] == ["a.warc.gz", "b.warc.gz"]

    paragraphs = next(stage_class(s) for s in GLOBAL_SPECS if s.name == "paragraph_dedup")
    assert paragraphs.report(c, {}, {}) == {}  # nothing cut, nothing counted: no section
    (stats / "repeated_paragraphs-00000").write_text(
        json.dumps({"documents": 3, "text": "Subscribe.", "sites": ["a.example"]}) + "\n"
        + json.dumps({"documents": 9, "text": "Cookies.", "sites": ["b.example"]}) + "\n", encoding="utf-8")
    book = {"decontaminate": {"documents": 1, "paragraphs": 1, "chars": 5, "share_of_text": None}}
    edits = paragraphs.report(c, {"paragraph_dedup.note.repeated_paragraphs": 2}, {"edits": book})["edits"]
    assert edits["decontaminate"] == book["decontaminate"]
    assert [t["text"] for t in edits["paragraph_dedup"]["most_repeated"]] == ["Cookies.", "Subscribe."]
    assert edits["paragraph_dedup"]["repeated_paragraphs"] == 2


def test_dedup_against_its_own_output_is_refused_before_work(tmp_path):
    against = next(stage_class(s) for s in GLOBAL_SPECS if s.name == "dedup_against")
    c = config(tmp_path, dedup_against=[str(tmp_path / "out")])
    with pytest.raises(ConfigError, match="names this run's own --output"):
        against.preflight(c)
    with pytest.raises(ConfigError, match="no manifest.json there"):
        against.preflight(config(tmp_path, dedup_against=[str(tmp_path / "elsewhere")]))
