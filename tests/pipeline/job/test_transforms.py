"""The Beam transforms one at a time, on documents made in the test (assert_that inside the
pipeline): routing and counting, errors, batched stages, exact dedup, mixing. Whole jobs are
tested elsewhere; these pin each transform's contract in seconds."""
import collections

import apache_beam as beam
import pytest
from apache_beam.metrics.metric import MetricsFilter
from apache_beam.options.pipeline_options import PipelineOptions
from apache_beam.testing.util import assert_that, equal_to

from pipeline.counters import NAMESPACE
from pipeline.job.globals.dedup import ExactDedup, SignDocuments
from pipeline.job.mix import Mix
from pipeline.job.signed import Signed
from pipeline.job.transforms import ApplyStage
from stages.dedup import DedupConfig
from stages.mix import approx_tokens, mix_rates
from stages.quality import QualityConfig, QualityScorer
from stages.record import Document, Drop, RuleStage, StageEnvironmentError
from stages.runner import Step
from tests.conftest import SENTENCES_DIR

EN = (SENTENCES_DIR / "en.txt").read_text(encoding="utf-8").splitlines()


def doc(i, text, source="web"):
    return Document(id=f"d{i:03d}", url=f"https://example.com/{i}", source=source, text=text)


class NoDigits(RuleStage):
    name = "no_digits"

    def evaluate(self, text, lang):
        return ("has_digits", text[:10]) if any(c.isdigit() for c in text) else None


class Explodes(RuleStage):
    name = "explodes"

    def evaluate(self, text, lang):
        if "boom" in text:
            raise ValueError("boom")
        return None


class Broken(RuleStage):
    name = "broken"

    def evaluate(self, text, lang):
        raise StageEnvironmentError("model missing")


def counters_of(result):
    return {c.key.metric.name: c.committed
            for c in result.metrics().query(MetricsFilter().with_namespace(NAMESPACE))["counters"]}


def apply(docs, transform, kept_ids, ledger_rows):
    with beam.Pipeline(options=PipelineOptions(["--runner=FnApiRunner"])) as p:
        kept, ledger = p | beam.Create(docs) | transform
        assert_that(kept | "KeptIds" >> beam.Map(lambda d: d.id), equal_to(kept_ids), label="Kept")
        assert_that(ledger | "Rows" >> beam.Map(lambda d: (d.id, d.stage, d.label)), equal_to(ledger_rows),
                    label="Ledger")
    return counters_of(p.result)


def test_a_stage_keeps_or_ledgers_each_document_and_counts_both():
    docs = [doc(0, "plain words"), doc(1, "year 2024"), doc(2, "more words")]
    counters = apply(docs, ApplyStage(NoDigits(None)), ["d000", "d002"], [("d001", "no_digits", "has_digits")])
    assert (counters["no_digits.in"], counters["no_digits.kept"], counters["no_digits.drop.has_digits"]) == (3, 2, 1)


def test_an_exception_is_one_ledger_row_and_the_job_goes_on():
    docs = [doc(0, "fine"), doc(1, "boom here"), doc(2, "fine too")]
    counters = apply(docs, ApplyStage(Explodes(None)), ["d000", "d002"], [("d001", "explodes", "error:ValueError")])
    assert counters["explodes.drop.error:ValueError"] == 1


def test_an_environment_error_fails_the_job():
    with pytest.raises(Exception, match="model missing"):
        apply([doc(0, "x")], ApplyStage(Broken(None)), [], [])


def test_injected_faults_hit_only_the_named_urls():
    docs = [doc(0, "a"), doc(1, "b")]
    apply(docs, ApplyStage(Step(NoDigits(None), fail_urls=("example.com/1",))), ["d000"],
          [("d001", "no_digits", "error:ValueError")])


def test_a_batched_stage_scores_every_document_and_drops_below_its_threshold():
    """QualityScorer has process_batch: documents are batched; the threshold drops low scores."""
    prose = [doc(i, " ".join(EN[i * 8:(i + 1) * 8])) for i in range(20)]
    junk = [doc(100 + i, "login cart cookie | menu | home | sale 50% off | sign in") for i in range(5)]
    scorer = QualityScorer(QualityConfig(threshold=0.5))
    scores = scorer.score([d.text for d in prose + junk])
    expected_kept = sorted(d.id for d, s in zip(prose + junk, scores) if s >= 0.5)
    expected_drops = [(d.id, "quality", "quality_below_threshold") for d, s in zip(prose + junk, scores) if s < 0.5]
    assert expected_kept and expected_drops  # the sample holds both
    counters = apply(prose + junk, ApplyStage(QualityScorer(QualityConfig(threshold=0.5))), expected_kept,
                     expected_drops)
    assert counters["quality.in"] == 25


def test_exact_dedup_keeps_one_copy_and_names_it():
    """Same text after case folding and whitespace collapsing; the survivor is the best-scored, then
    the longest (d002, with its extra whitespace), then the smallest id."""
    text = " ".join(EN[:12])
    docs = [doc(0, text), doc(1, text.upper()), doc(2, "  " + text + "\n"), doc(3, " ".join(EN[12:24]))]
    with beam.Pipeline(options=PipelineOptions(["--runner=FnApiRunner"])) as p:
        kept, ledger = p | beam.Create(docs) | SignDocuments(DedupConfig()) | ExactDedup()
        assert_that(kept | beam.Map(lambda packed: Signed.unpack(packed).id), equal_to(["d002", "d003"]), label="Kept")
        assert_that(ledger | beam.Map(lambda d: (d.id, str(d.reason), d.detail)),
                    equal_to([("d000", "exact_duplicate", "kept d002"), ("d001", "exact_duplicate", "kept d002")]),
                    label="Ledger")


def test_mix_downsamples_the_large_source_and_repeats_the_small_one():
    """The draw each part's writer makes (pipeline/job/finish.py), against rates from the sources' tokens."""
    web = [doc(i, " ".join(EN[i % 50 * 4:(i % 50 + 1) * 4])) for i in range(300)]
    books = [doc(1000 + i, " ".join(EN[i * 4:(i + 1) * 4]), source="books") for i in range(30)]
    tokens = {"web": sum(approx_tokens(d.text) for d in web), "books": sum(approx_tokens(d.text) for d in books)}
    mix = Mix({"web": 0.5, "books": 0.5}, seed=0, max_epochs=100)
    out = [mix.draw(d, mix_rates(mix.weights, tokens)) for d in web + books]
    kept = [copy for r in out if isinstance(r, list) for copy in r]
    drops = [r for r in out if isinstance(r, Drop)]
    shares = {s: sum(approx_tokens(d.text) for d in kept if d.source == s) for s in tokens}
    assert 0.8 < shares["books"] / shares["web"] < 1.25, shares  # about equal token shares
    copies_ = collections.Counter(d.source for d in kept)
    assert copies_["books"] > 30 and copies_["web"] < 300  # books repeated, web downsampled
    assert {d.label for d in drops} == {"mix_downsampled"} and len(kept) + len(drops) > len(web + books)
    assert len({d.id for d in kept}) == len(kept)  # repeats have ids of their own