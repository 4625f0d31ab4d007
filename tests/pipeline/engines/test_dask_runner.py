"""Beam's DaskRunner defects, one small pipeline each, on a real Dask scheduler with 2 worker processes:
each fails on the stock runner (the defect is real) and passes on pipeline.engines.dask_runner."""
from __future__ import annotations

import pathlib

import apache_beam as beam
import pytest
from apache_beam.metrics import Metrics
from apache_beam.options.pipeline_options import PipelineOptions

pytest.importorskip("distributed", reason="the dask extra is not installed")
from apache_beam.runners.dask.dask_runner import DaskRunner  # noqa: E402 (needs dask)

from pipeline.engines.dask_runner import DaskRunnerError, RefineryDaskRunner, check_beam_version  # noqa: E402


@pytest.fixture(scope="module")
def scheduler():
    from distributed import LocalCluster

    # worker processes, one thread each, everything on loopback (the dashboard too, explicitly)
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, host="127.0.0.1",
                      dashboard_address="127.0.0.1:0") as cluster:
        yield cluster.scheduler_address


def run(build, runner, scheduler, tmp_path=None):
    """Builds a pipeline with `build(p)` -> dict of name: PCollection, and returns {name: sorted elements}
    as the pipeline wrote them (one file per name, read back here)."""
    p = beam.Pipeline(runner=runner(), options=PipelineOptions([f"--dask_client_address={scheduler}"]))
    outputs = build(p)
    folder = pathlib.Path(tmp_path)
    for name, pcoll in outputs.items():
        _ = pcoll | f"Write{name}" >> beam.Map(repr) | f"Text{name}" >> beam.io.WriteToText(
            str(folder / name), shard_name_template="")
    result = p.run()
    try:
        result.wait_until_finish()
    finally:
        result.client.close()  # ours closes its client itself; the stock runner leaves it open
    found = {name: sorted(line for line in (folder / name).read_text().splitlines()) if (folder / name).exists()
             else None for name in outputs}
    return found, result


class _EvenOdd(beam.DoFn):
    def process(self, x):
        Metrics.counter("test", "seen").inc()
        yield x if x % 2 == 0 else beam.pvalue.TaggedOutput("odd", x)


def _tagged(p):
    parts = p | beam.Create(range(20)) | beam.ParDo(_EvenOdd()).with_outputs("odd", main="even")
    return {"even": parts.even, "odd": parts.odd}


def _each_sink(p):
    numbers = p | beam.Create(range(20))
    return {"squares": numbers | "Sq" >> beam.Map(lambda x: x * x), "halves": numbers | "Half" >> beam.Map(str)}


def _batched(p):
    return {"sizes": p | beam.Create(range(20)) | beam.BatchElements(min_batch_size=8, max_batch_size=8)
            | beam.Map(len)}


def _spread(p):
    # one input element fans out to 2,000: after a Reshuffle they are spread over several bundles
    return {"bundles": p | beam.Create([2000]) | beam.FlatMap(lambda n: list(range(n))) | beam.Reshuffle()
            | beam.ParDo(_BundleIds()) | beam.Distinct()}


class _BundleIds(beam.DoFn):
    def start_bundle(self):
        import uuid

        self._bundle = uuid.uuid4().hex

    def process(self, x):
        yield self._bundle


def _side_inputs_and_combines(p):
    numbers = p | "N" >> beam.Create(range(10))
    total = numbers | "Sum" >> beam.CombineGlobally(sum)
    names = p | "Names" >> beam.Create([(1, "one"), (2, "two")])
    nothing = p | "Nothing" >> beam.Create([])
    joined = numbers | "Join" >> beam.Map(
        lambda x, total, listed, named, empty: (x, total, len(listed), named.get(x, "-"), empty),
        beam.pvalue.AsSingleton(total), beam.pvalue.AsList(numbers), beam.pvalue.AsDict(names),
        beam.pvalue.AsSingleton(nothing, default_value="default"))
    twice = (numbers, numbers) | "Twice" >> beam.Flatten()
    return {"joined": joined, "per_key": twice | beam.Map(lambda x: (x % 3, x)) | beam.CombinePerKey(sum)}


def _expected_tagged(found):
    return found["even"] == sorted(repr(x) for x in range(0, 20, 2)) and \
        found["odd"] == sorted(repr(x) for x in range(1, 20, 2))


@pytest.mark.timeout(300)
def test_tagged_outputs_go_only_to_their_consumers(scheduler, tmp_path):
    ours, _ = run(_tagged, RefineryDaskRunner, scheduler, tmp_path / "ours")
    assert _expected_tagged(ours)
    stock, _ = run(_tagged, DaskRunner, scheduler, tmp_path / "stock")
    assert not _expected_tagged(stock)  # the main output's consumer also got the odd numbers, or nothing ran


@pytest.mark.timeout(300)
def test_every_sink_runs(scheduler, tmp_path):
    expected = {"squares": sorted(repr(x * x) for x in range(20)), "halves": sorted(repr(str(x)) for x in range(20))}
    ours, _ = run(_each_sink, RefineryDaskRunner, scheduler, tmp_path / "ours")
    assert ours == expected
    stock, _ = run(_each_sink, DaskRunner, scheduler, tmp_path / "stock")
    assert stock != expected  # only the last leaf was computed


@pytest.mark.timeout(300)
def test_finish_bundle_output_is_kept(scheduler, tmp_path):
    ours, _ = run(_batched, RefineryDaskRunner, scheduler, tmp_path / "ours")
    assert sum(int(n) for n in ours["sizes"]) == 20  # BatchElements emits its last batch in finish_bundle
    stock, _ = run(_batched, DaskRunner, scheduler, tmp_path / "stock")
    assert stock["sizes"] is None or sum(int(n) for n in stock["sizes"]) != 20


@pytest.mark.timeout(300)
def test_reshuffle_spreads_elements_over_bundles(scheduler, tmp_path):
    ours, _ = run(_spread, RefineryDaskRunner, scheduler, tmp_path / "ours")
    assert len(ours["bundles"]) > 1
    stock, _ = run(_spread, DaskRunner, scheduler, tmp_path / "stock")
    assert stock["bundles"] is None or len(stock["bundles"]) == 1  # a no-op: one bundle, as it came in


@pytest.mark.timeout(300)
def test_side_inputs_flatten_and_combines(scheduler, tmp_path):
    found, _ = run(_side_inputs_and_combines, RefineryDaskRunner, scheduler, tmp_path / "ours")
    names = {1: "one", 2: "two"}
    assert found["joined"] == sorted(repr((x, 45, 10, names.get(x, "-"), "default")) for x in range(10))
    assert found["per_key"] == sorted(repr((k, 2 * sum(x for x in range(10) if x % 3 == k))) for k in range(3))


@pytest.mark.timeout(300)
def test_metrics_are_collected(scheduler, tmp_path):
    _, result = run(_tagged, RefineryDaskRunner, scheduler, tmp_path / "ours")
    counters = result.metrics().query()["counters"]
    assert [(c.key.metric.name, c.committed) for c in counters] == [("seen", 20)]
    _, stock = run(_tagged, DaskRunner, scheduler, tmp_path / "stock")
    with pytest.raises(NotImplementedError):
        stock.metrics()


class _Lifecycle(beam.DoFn):
    def __init__(self, log):
        self._log = log

    def _note(self, what):
        import os

        with open(self._log, "a") as fh:
            fh.write(f"{what} {os.getpid()}\n")

    def setup(self):
        self._note("setup")

    def process(self, x):
        yield x

    def teardown(self):
        self._note("teardown")


@pytest.mark.timeout(300)
def test_dofns_are_set_up_once_per_worker_and_torn_down_when_the_job_ends(scheduler, tmp_path):
    log = tmp_path / "lifecycle.log"
    p = beam.Pipeline(runner=RefineryDaskRunner(), options=PipelineOptions([f"--dask_client_address={scheduler}",
                                                                            "--dask_npartitions=16"]))
    _ = p | beam.Create(range(400)) | beam.Reshuffle() | beam.ParDo(_Lifecycle(str(log)))
    p.run().wait_until_finish()
    events = log.read_text().split("\n")[:-1]
    setups = sorted(e.split()[1] for e in events if e.startswith("setup"))
    teardowns = sorted(e.split()[1] for e in events if e.startswith("teardown"))
    assert 1 <= len(setups) <= 2 and len(set(setups)) == len(setups)  # 16 bundles, one set-up per worker process
    assert teardowns == setups


def test_a_run_without_a_scheduler_address_is_refused(tmp_path):
    # a bare Client() would start a LocalCluster whose dashboard listens on every interface
    p = beam.Pipeline(runner=RefineryDaskRunner(), options=PipelineOptions([]))
    _ = p | beam.Create([1]) | beam.Map(str)
    with pytest.raises(DaskRunnerError, match="--dask_client_address"):
        p.run()


def test_beam_version_pin():
    from importlib.metadata import requires

    check_beam_version()  # the installed Beam is the series the runner is written against
    with pytest.raises(DaskRunnerError, match="2.77"):
        check_beam_version("2.78.0")
    pins = [r for r in requires("refinery") if r.startswith("apache-beam")]
    assert pins == ["apache-beam==2.77.*"], pins


@pytest.mark.parametrize("runner", [["--runner=DaskRunner"], ["--runner=apache_beam.runners.dask.dask_runner.DaskRunner"],
                                    ["--runner", "apache_beam.runners.dask.dask_runner.DaskRunner"]])
def test_beams_own_dask_runner_is_refused_before_anything_runs(runner, tmp_path):
    from pipeline.job.config import ConfigError
    from pipeline.job.run import run as refinery_run
    from tests.conftest import WARCIO_EXAMPLE

    with pytest.raises(ConfigError, match="RefineryDaskRunner"):
        refinery_run(["--input", str(WARCIO_EXAMPLE), "--output", str(tmp_path / "out"), *runner,
                      "--dask_client_address=tcp://127.0.0.1:1"])
    assert not (tmp_path / "out").exists()
