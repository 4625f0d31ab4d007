"""Connected components in Beam (unrolled large-star / small-star rounds) against union-find."""
import random

import apache_beam as beam
import pytest
from apache_beam.metrics.metric import MetricsFilter
from apache_beam.options.pipeline_options import PipelineOptions
from apache_beam.testing.util import assert_that, equal_to

from pipeline.counters import NAMESPACE
from pipeline.job.globals.dedup import ConnectedComponents, rounds_to_converge
from stages.dedup import components_in_memory
from tests.union_find import union_find_components


def beam_components(edges, expected=None, max_rounds=30, counters_out=None):
    """Runs the transform; asserts (inside the pipeline) that its output equals `expected`."""
    with beam.Pipeline(options=PipelineOptions(["--runner=FnApiRunner"])) as p:
        found = p | beam.Create(edges) | ConnectedComponents(max_rounds)
        if expected is not None:
            assert_that(found, equal_to(sorted(expected.items())))
    counters = {c.key.metric.name: c.committed for c in
                p.result.metrics().query(MetricsFilter().with_namespace(NAMESPACE))["counters"]}
    if counters_out is not None:
        counters_out.update(counters)
    return rounds_to_converge(counters, max_rounds)


def ids(n, seed=0):
    names = [f"doc{i:06d}" for i in range(n)]
    random.Random(seed).shuffle(names)
    return names


GRAPHS = {
    "chain of 4,000 (shuffled ids)": lambda: [(a, b) for a, b in zip(ids(4_000), ids(4_000)[1:])],
    "star of 2,000 leaves, centre not the smallest": lambda: [("m-centre", f"leaf{i:05d}") for i in range(2_000)],
    "1,000 triangles": lambda: [e for i in range(1000) for e in
                                ((f"t{i}a", f"t{i}b"), (f"t{i}b", f"t{i}c"), (f"t{i}c", f"t{i}a"))],
    "pairs and a duplicate edge": lambda: [("x1", "x2"), ("x2", "x1"), ("y1", "y2"), ("z", "z2")],
}


@pytest.mark.parametrize("name", sorted(GRAPHS))
def test_components_equal_union_find(name):
    edges = GRAPHS[name]()
    counters = {}
    rounds, converged = beam_components(edges, union_find_components(edges), counters_out=counters)
    assert converged and rounds <= 30
    # the Beam rounds carry exactly the edges of the in-memory reference, round by round: settled
    # components leave, and the rounds after convergence take in nothing
    _, reference = components_in_memory(edges, 30)
    carried = [counters.get(f"near_dedup.cc.round{i}.edges", 0) for i in range(30)]
    assert carried == [r["edges"] for r in reference]
    assert carried[rounds + 1:] == [0] * (30 - rounds - 1)


def test_isolated_documents_never_enter_the_graph():
    # only nodes with an edge get a component; documents without candidate links are kept as they are
    beam_components([("a", "b")], {"a": "a", "b": "a"})


def test_too_few_rounds_is_reported_as_not_converged():
    edges = [(a, b) for a, b in zip(ids(2_000), ids(2_000)[1:])]
    rounds, converged = beam_components(edges, max_rounds=2)
    assert not converged


def test_output_check_ledgers_what_parquet_cannot_store_and_keeps_the_rest():
    from pipeline.job.schema import OutputCheck
    from stages.record import Document, Drop

    good = Document(id="a", url="http://x.example/", source="web", text="fine text", record_id="r1")
    assert OutputCheck()(good) is good
    bad = good.replace(text="broken \ud83d here")
    dropped = OutputCheck()(bad)
    assert isinstance(dropped, Drop) and str(dropped.reason) == "unwritable" and "text" in dropped.detail
    assert isinstance(OutputCheck()(good.replace(id="")), Drop)
