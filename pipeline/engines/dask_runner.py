"""Beam on a Dask cluster: `--runner=pipeline.engines.dask_runner.RefineryDaskRunner --dask_client_address=tcp://H:8786`.

Beam 2.77's own `DaskRunner` runs this job silently wrong; this subclass keeps its options and result
type but builds the Dask graph itself, fixing each defect (tests/pipeline/engines/test_dask_runner.py shows
every one on a small pipeline, failing on the stock runner and passing here):
- tagged outputs: every element carries its output tag and each consumer reads only its own tag
  (stock: the main output's consumers also received the tagged elements);
- several sinks: every leaf of the graph is computed (stock: only the last one, the rest got nothing);
- `finish_bundle` output is kept (stock: collected before finish_bundle, so BatchElements lost its last
  batch and WriteToText wrote empty files);
- `Reshuffle` repartitions elements by their position (stock: a no-op, one input file = one task);
- metrics are collected per bundle and returned by `result.metrics()` (stock: NotImplementedError), so
  the job's conservation check runs;
- DoFns are set up once per worker thread and job, not once per bundle (models load in setup).

Scope: batch jobs in the global window (this job); other windowing, state and timers are refused.
It uses Beam internals (DoFnRunner, the state sampler), hence the apache-beam==2.77.* pin, checked
at run time and by a test. Workers need this package installed and `DASK_DISTRIBUTED__WORKER__DAEMON=False`
(the extraction stage starts a child process, which a daemonic worker may not).
"""
from __future__ import annotations

import asyncio
import hashlib
import logging
import pickle
import threading
import uuid
from dataclasses import dataclass
from typing import Any

import apache_beam as beam
from apache_beam import pvalue
from apache_beam.internal import pickler
from apache_beam.pipeline import PipelineVisitor, PTransformOverride
from apache_beam.runners.common import Receiver
from apache_beam.runners.dask.dask_runner import DaskOptions, DaskRunner, DaskRunnerResult
from apache_beam.runners.dask.overrides import _Create, _Flatten
from apache_beam.runners.runner import PipelineState
from apache_beam.transforms.window import GlobalWindow, GlobalWindows
from apache_beam.utils.windowed_value import WindowedValue

from pipeline import storage
from pipeline.engines import EngineLost

BEAM_SERIES = "2.77."  # the internals used here are checked against this release series
SHUFFLE_PARTITIONS_PER_THREAD = 2  # default partitions of a shuffle, per worker thread (--dask_npartitions sets them)
_METRICS = "\0metrics"  # the tag of the metric updates that close every bundle's output
_GLOBAL = (GlobalWindow(),)


class DaskRunnerError(RuntimeError):
    """A pipeline this runner cannot run correctly, or a missing scheduler address."""


class SchedulerLost(DaskRunnerError, EngineLost):
    """The scheduler went away while the job ran."""


def check_beam_version(version: str | None = None) -> None:
    version = version or beam.__version__
    if not version.startswith(BEAM_SERIES):
        raise DaskRunnerError(f"pipeline.engines.dask_runner is written against Beam {BEAM_SERIES}* internals, "
                              f"found apache-beam {version}")


# ---- what runs on the workers ---------------------------------------------------------------------

@dataclass(frozen=True)
class _Step:
    """One ParDo, as shipped to the workers: its DoFn pickled (each worker thread unpickles and sets up
    its own copy once), its arguments and the windowing of its input."""
    job: str
    label: str
    fn: bytes
    args: bytes
    windowing: bytes
    options: bytes = b""  # the job's pipeline options (pickled dict): its filesystems' settings (s3://, gs://)

    def __dask_tokenize__(self):
        return self.job, self.label


# (job, step, thread) -> (its DoFn, set up; (args, kwargs, side views); windowing), unpickled once; one job at a time
_SET_UP: dict[tuple[str, str, int], tuple] = {}


def _dofn(step: _Step) -> tuple:
    key = (step.job, step.label, threading.get_ident())
    if key not in _SET_UP:
        for other in [k for k in _SET_UP if k[0] != step.job]:  # an earlier job's models and child processes go
            try:
                _SET_UP.pop(other)[0].teardown()
            except Exception:  # noqa: BLE001 (a failing teardown of a finished job must not fail this one)
                pass
        if step.options:  # a worker process has no pipeline options of its own: Beam's S3 filesystem needs them
            from apache_beam.options.pipeline_options import PipelineOptions

            storage.use_options(PipelineOptions.from_dictionary(pickle.loads(step.options)))
        fn = pickler.loads(step.fn)
        fn.setup()
        _SET_UP[key] = (fn, pickler.loads(step.args), pickler.loads(step.windowing))
    return _SET_UP[key]


def _tear_down(job: str) -> int:
    """Run on every worker when a job ends: its DoFns' teardown (models, child processes)."""
    done = 0
    for key in [k for k in _SET_UP if k[0] == job]:
        try:
            _SET_UP.pop(key)[0].teardown()
            done += 1
        except Exception:  # noqa: BLE001 (the job's result is already decided)
            pass
    return done


class _TaggedList(Receiver):
    """A DoFnRunner receiver that appends (tag, element) to the bundle's output."""

    def __init__(self, tag, out: list):
        self.tag, self.out = tag, out

    def receive(self, windowed_value: WindowedValue) -> None:
        self.out.append((self.tag, windowed_value.value))


def _run_bundle(items, step: _Step, *side_values) -> list:
    """A bundle (one Dask partition) through a DoFn: start, process, finish; (tag, element) out, then the
    bundle's metric updates."""
    from apache_beam.metrics.execution import MetricsContainer
    from apache_beam.runners.common import DoFnRunner, DoFnState
    from apache_beam.runners.worker import statesampler
    from apache_beam.transforms import sideinputs
    from apache_beam.utils import counters

    fn, (args, kwargs, side_views), windowing = _dofn(step)
    side_inputs = [sideinputs.SideInputMap(view_class, options, [WindowedValue(v, 0, _GLOBAL) for v in values])
                   for (view_class, options), values in zip(side_views, side_values)]
    out: list = []
    receivers = _Receivers(out)
    factory = counters.CounterFactory()
    runner = DoFnRunner(fn, args, kwargs, side_inputs, windowing, tagged_receivers=receivers,
                        step_name=step.label, state=DoFnState(factory))
    container = MetricsContainer(step.label)
    # The tracker routes the DoFn's Metrics to `container`. Its sampling thread is not started: it only times
    # states (which nothing here reads), and stopping it can hang for good in Beam 2.77's statesampler_fast (a
    # race fixed upstream in apache/beam#38851 and #39129): the test of this runner hung so, rarely, in join().
    sampler = statesampler.StateSampler("dask", factory)
    statesampler.set_current_tracker(sampler)
    try:
        with sampler.scoped_state(step.label, "process", metrics_container=container):
            runner.start()
            for item in items:
                runner.process(WindowedValue(item, 0, _GLOBAL))
            runner.finish()
    finally:
        statesampler.set_current_tracker(None)
    out.append((_METRICS, container.get_cumulative()))
    return out


class _Receivers(dict):
    def __init__(self, out: list):
        super().__init__()
        self._out = out

    def __missing__(self, tag):
        self[tag] = _TaggedList(tag, self._out)
        return self[tag]


def _select(part: list, tag) -> list:
    return [value for t, value in part if t == tag]


def _drop(part) -> list:
    return []  # a leaf is computed for its effects; nothing comes back to the client


def _values(group) -> tuple:
    key, pairs = group
    return key, [value for _, value in pairs]


def _stable_hash(element) -> int:
    # the same in every worker process (Python's hash() of a str is not)
    return int.from_bytes(hashlib.blake2b(pickle.dumps(element, protocol=5), digest_size=8).digest(), "big")


def _numbered(part) -> list:
    # a Reshuffle spreads by position in the partition: no element is pickled just to choose its partition
    return list(enumerate(part))


def _first(pair):
    return pair[0]


def _second(pair):
    return pair[1]


def _concat(lists) -> list:
    return [x for part in lists for x in part]


# ---- graph construction (on the client) -----------------------------------------------------------

class _Reshuffle(beam.PTransform):
    """Primitive stand-in for beam.Reshuffle, translated into a real repartition."""

    def expand(self, pcoll):
        return pvalue.PCollection.from_(pcoll)


class _GroupByKey(beam.PTransform):
    """Primitive stand-in for beam.GroupByKey (global window only: no window reification)."""

    def expand(self, pcoll):
        return pvalue.PCollection.from_(pcoll)


def _override(beam_class, make):
    class Override(PTransformOverride):
        def matches(self, applied) -> bool:
            return applied.transform.__class__ is beam_class

        def get_replacement_transform_for_applied_ptransform(self, applied):
            return make(applied.transform)

    return Override()


def _overrides() -> list[PTransformOverride]:
    return [_override(beam.Create, lambda t: _Create(t.values)),
            _override(beam.Reshuffle, lambda t: _Reshuffle()),
            _override(beam.GroupByKey, lambda t: _GroupByKey()),
            _override(beam.Flatten, lambda t: _Flatten())]


class _GraphBuilder(PipelineVisitor):
    """Beam primitives -> Dask bags, one per PCollection; remembers the leaves and the metric bags."""

    def __init__(self, job: str, partitions: int, create_partitions: int | None = None, options: bytes = b""):
        self.job, self._partitions, self._create_partitions = job, partitions, create_partitions
        self.options = options
        self.bags: dict[pvalue.PCollection, Any] = {}
        self.consumed: set[pvalue.PCollection] = set()
        self.metric_bags: list = []

    def visit_transform(self, node) -> None:
        import dask.bag as db

        t = node.transform
        inputs = [self.bags[p] for p in node.inputs if isinstance(p, pvalue.PCollection)]
        self.consumed.update(p for p in node.inputs if isinstance(p, pvalue.PCollection))
        self.consumed.update(si.pvalue for si in node.side_inputs)
        outputs = node.outputs
        if isinstance(t, _Create):
            items = list(t.values)
            n = max(1, min(len(items), self._create_partitions or 64))
            bag = db.from_sequence(items, npartitions=n) if items else db.from_sequence([None]).filter(bool)
        elif isinstance(t, beam.Impulse):
            bag = db.from_sequence([b""], npartitions=1)
        elif isinstance(t, _Flatten):
            bag = db.concat(inputs) if inputs else db.from_sequence([None]).filter(bool)
            if bag.npartitions > self._partitions:
                bag = bag.repartition(self._partitions)
        elif isinstance(t, _GroupByKey):
            bag = self._shuffle(inputs[0], _first).map(_values)
        elif isinstance(t, _Reshuffle):
            bag = self._shuffle(inputs[0].map_partitions(_numbered), _first).map(_values).map(_second).flatten()
        elif isinstance(t, beam.ParDo):
            self._par_do(node, inputs[0])
            return
        else:
            raise DaskRunnerError(f"{node.full_label}: {type(t).__name__} is not supported by the Dask runner")
        for pcoll in outputs.values():
            self.bags[pcoll] = bag

    def _shuffle(self, bag, key):
        """Every element to the partition its key's pickle hashes to (Dask's default hash tokenizes the key,
        which for objects it does not know may differ between processes); groups by key equality there.
        A task shuffle keeps the partition count, so set it first."""
        from dask.bag.core import groupby_tasks

        if bag.npartitions != self._partitions:
            bag = bag.repartition(self._partitions)
        return groupby_tasks(bag, key, hash=_stable_hash)

    def _par_do(self, node, bag) -> None:
        from apache_beam.transforms.userstate import is_stateful_dofn

        t = node.transform
        if is_stateful_dofn(t.fn):
            raise DaskRunnerError(f"{node.full_label}: state and timers are not supported by the Dask runner")
        windowing = node.inputs[0].windowing
        if not isinstance(windowing.windowfn, GlobalWindows) or (
                isinstance(t, beam.WindowInto) and not isinstance(t.windowing.windowfn, GlobalWindows)):
            raise DaskRunnerError(f"{node.full_label}: only the global window is supported by the Dask runner")
        side_views = [(type(si), si._view_options()) for si in node.side_inputs]  # noqa: SLF001 (Beam's)
        side_values = [self.bags[si.pvalue].reduction(list, _concat).to_delayed(optimize_graph=False)
                       for si in node.side_inputs]
        step = _Step(job=self.job, label=node.full_label, fn=pickler.dumps(t.fn),
                     args=pickler.dumps((getattr(t, "args", []), getattr(t, "kwargs", {}), side_views)),
                     windowing=pickler.dumps(windowing), options=self.options)
        import dask

        step_value = dask.delayed(step, name=f"dofn-{self.job}-{len(self.metric_bags)}", pure=True)
        results = bag.map_partitions(_run_bundle, step_value, *side_values)
        for tag, pcoll in node.outputs.items():
            self.bags[pcoll] = results.map_partitions(_select, None if tag == "None" else tag)
        self.metric_bags.append(results.map_partitions(_select, _METRICS))

    def leaves(self) -> list:
        return [bag.map_partitions(_drop) for pcoll, bag in self.bags.items() if pcoll not in self.consumed]


class RefineryDaskResult(DaskRunnerResult):
    """Waits for every leaf and metric bag; `metrics()` holds the committed counters once the job is done."""

    def __init__(self, client, futures, n_leaves: int, job: str):
        super().__init__(client, futures)
        from apache_beam.runners.direct.direct_metrics import DirectMetrics

        self._n_leaves, self._job = n_leaves, job
        self._metrics = DirectMetrics()

    def wait_until_finish(self, duration=None) -> str:
        if self._state in (PipelineState.DONE, PipelineState.FAILED):
            return self._state
        try:
            results = self.client.gather(self.futures)
            for updates in (u for bag in results[self._n_leaves:] for u in bag):
                bundle = object()
                self._metrics.commit_logical(bundle, updates)
                self._metrics.commit_physical(bundle, updates)
            self._state = PipelineState.DONE
        except BaseException as exc:
            self._state = PipelineState.FAILED
            if isinstance(exc, (Exception, asyncio.CancelledError)) and self.client.status != "running":
                # the scheduler is gone (killed, its machine lost; the client's futures are cancelled or it cannot
                # connect): it held the job's state, so the job cannot go on; phase 1's committed parts stay
                why = str(exc).split(". ")[0][:200]  # Dask's messages go on with advice that does not apply here
                raise SchedulerLost(f"lost the Dask scheduler ({type(exc).__name__}: {why}); rerun with --resume once "
                                    "a scheduler runs again (prepared parts are reused)") from exc
            raise  # a task's own error, as it is
        finally:
            try:
                if self.client.status == "running":  # with the scheduler gone there is no worker to reach
                    self.client.run(_tear_down, self._job)
            finally:
                self.client.close()
        return self._state

    def metrics(self):
        return self._metrics


class RefineryDaskRunner(DaskRunner):
    """Beam's DaskRunner, with the graph built by `_GraphBuilder` (see the module docstring)."""

    def run_pipeline(self, pipeline, options):
        import dask.distributed as ddist

        check_beam_version()
        dask_options = options.view_as(DaskOptions).get_all_options(drop_default=True, current_only=True)
        bag_kwargs = DaskOptions._extract_bag_kwargs(dask_options)  # noqa: SLF001 (Beam's own parser)
        if not dask_options.get("address") and not dask_options.get("scheduler_file"):
            # a Client() without an address starts a LocalCluster whose dashboard listens on every interface
            raise DaskRunnerError("give the scheduler: --dask_client_address=tcp://HOST:8786 or --dask_scheduler_file "
                                  "(`python -m pipeline.engines.local_cluster --engine dask` starts one on 127.0.0.1)")
        # A lost scheduler is reported by wait_until_finish in one line; the client's own logs of it are tracebacks
        # of its reconnection attempts
        logging.getLogger("distributed.client").setLevel(logging.CRITICAL)
        client = ddist.Client(**dask_options)
        try:
            # each task holds its partition in memory and every task costs scheduling (~16k tasks at 8
            # partitions on the bundled WARCs, 62 s; 3.4k at 2, 31 s): a few partitions per worker thread
            threads = sum(client.nthreads().values())
            partitions = bag_kwargs.get("npartitions") or max(2, SHUFFLE_PARTITIONS_PER_THREAD * threads)
            pipeline.replace_all(_overrides())
            job = uuid.uuid4().hex[:12]
            shipped = {k: v for k, v in options.get_all_options(drop_default=True).items() if k not in dask_options}
            builder = _GraphBuilder(job, partitions, bag_kwargs.get("npartitions"), pickle.dumps(shipped))
            pipeline.visit(builder)
            leaves = builder.leaves()
            # unoptimized: Dask's fusing made this job twice as slow (81 s vs 43 s on the bundled WARCs)
            futures = client.compute(leaves + builder.metric_bags, optimize_graph=False)
        except BaseException:
            client.close()
            raise
        return RefineryDaskResult(client, futures, len(leaves), job)
