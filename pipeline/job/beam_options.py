"""Beam's side of the command line: unknown flags are errors, local worker servers stay on loopback, and a
local run's process gives freed groupings back to the system.

`refinery run` passes every flag it does not know to Beam, and Beam only logs a warning for flags it
does not know either, so `--langauges en` ran every language and exited 0. Here a flag that is
neither ours nor a registered Beam pipeline option is refused, with the nearest known flag.
"""
from __future__ import annotations

import argparse
import contextlib
import ctypes
import difflib
import sys
from collections.abc import Iterator, Sequence

from apache_beam.options.pipeline_options import PipelineOptions, _BeamArgumentParser

from pipeline.job.config import ConfigError


def _beam_parser() -> argparse.ArgumentParser:
    parser = _BeamArgumentParser(allow_abbrev=False)
    classes = {}
    for cls in PipelineOptions.__subclasses__():  # what PipelineOptions.get_all_options parses
        classes.setdefault(str(cls), cls)
    for cls in classes.values():
        cls._add_argparse_args(parser)  # noqa: SLF001  (Beam's own registration hook)
    return parser


STOCK_DASK_RUNNER = "apache_beam.runners.dask.dask_runner.DaskRunner"


def _dask_options(beam_args: Sequence[str]) -> None:
    """Beam registers the --dask_* options only once its Dask runner module is imported; refuse Beam's own
    DaskRunner, which runs this job silently wrong (pipeline/engines/dask_runner.py lists how)."""
    from apache_beam.options.pipeline_options import StandardOptions

    runner = PipelineOptions(list(beam_args)).view_as(StandardOptions).runner or ""
    if runner in ("DaskRunner", STOCK_DASK_RUNNER):
        raise ConfigError("Beam's DaskRunner loses tagged outputs, sinks, finish_bundle output and metrics in this "
                          "job: use --runner=pipeline.engines.dask_runner.RefineryDaskRunner (same --dask_* options)")
    if "dask" in runner.lower() or any(a.startswith("--dask_") for a in beam_args):
        try:
            import apache_beam.runners.dask.dask_runner  # noqa: F401  (registers DaskOptions)
            import distributed  # noqa: F401
        except ImportError as exc:
            raise ConfigError(f"the Dask runner needs the dask extra: pip install 'refinery[dask]' ({exc})") from exc


def check_beam_args(beam_args: Sequence[str], ours: argparse.ArgumentParser) -> None:
    """Raise ConfigError naming each flag that neither `ours` nor Beam knows."""
    _dask_options(beam_args)
    beam = _beam_parser()
    _, unknown = beam.parse_known_args(list(beam_args))
    bad = [arg for arg in unknown if arg.startswith("-")]
    if not bad:
        if unknown:
            raise ConfigError(f"unexpected argument(s) {' '.join(unknown)} (flags take the form --name=value)")
        return
    known: list[str] = [opt for parser in (ours, beam) for action in parser._actions  # noqa: SLF001
                        for opt in action.option_strings if opt.startswith("--")]
    messages = []
    for arg in bad:
        name = arg.split("=", 1)[0]
        close = difflib.get_close_matches(name, known, n=1)
        messages.append(f"{name}" + (f" (did you mean {close[0]}?)" if close else ""))
    raise ConfigError(f"unknown option {', '.join(messages)}: not a `refinery run` option nor a Beam pipeline "
                      "option (`refinery run --help` lists ours)")


class _LoopbackServer:
    """A grpc.Server whose insecure ports bind loopback instead of every interface."""

    def __init__(self, server):
        self._server = server

    def __getattr__(self, name):
        return getattr(self._server, name)

    def add_insecure_port(self, address: str) -> int:
        host, _, port = address.rpartition(":")
        if host in ("[::]", "0.0.0.0", "", "[::0]"):
            address = f"localhost:{port}"  # 127.0.0.1 and ::1; workers dial localhost:PORT
        return self._server.add_insecure_port(address)


class _LoopbackGrpc:
    def __init__(self, grpc_module):
        self._grpc = grpc_module

    def __getattr__(self, name):
        return getattr(self._grpc, name)

    def server(self, *args, **kwargs):
        return _LoopbackServer(self._grpc.server(*args, **kwargs))


# Beam modules that start gRPC servers for a local run's workers, each bound to [::] (every interface):
# FnApiRunner's control/data/state/logging servers, and the logging server each SDK worker subprocess of
# `--direct_running_mode=multi_processing` gets (local_job_service.SubprocessSdkWorker).
_SERVER_MODULES = ("apache_beam.runners.portability.fn_api_runner.worker_handlers",
                   "apache_beam.runners.portability.local_job_service",
                   "apache_beam.runners.portability.abstract_job_service")


@contextlib.contextmanager
def loopback_only_grpc() -> Iterator[None]:
    """While active, the gRPC servers that Beam starts for a local run's worker processes listen on loopback
    only: Beam binds them to [::] (every interface), unauthenticated. Affects only those Beam modules."""
    import importlib

    patched = []
    for name in _SERVER_MODULES:
        module = importlib.import_module(name)
        original = getattr(module, "grpc", None)
        if original is not None:  # a Beam release that no longer starts servers there: nothing to narrow
            module.grpc = _LoopbackGrpc(original)
            patched.append((module, original))
    try:
        yield
    finally:
        for module, original in patched:
            module.grpc = original


M_MMAP_THRESHOLD = -3  # glibc's mallopt parameter
MMAP_THRESHOLD_BYTES = 128 << 10


def give_freed_buffers_back() -> bool:
    """glibc only (else a no-op, False): allocations of 128 KiB and more are mapped on their own and given
    back to the system when freed. By default glibc raises that threshold to the largest block freed so far
    (up to 32 MiB), after which FnApiRunner's encoded groupings (tens of MB, freed stage after stage) come
    from the heap and the heap keeps them: fixing it cut the peak of dedup over 300,000 documents by 17 %
    (bench/RESULTS.md, "Phase 2 at under 1 KB per document")."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        return bool(ctypes.CDLL("libc.so.6").mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD_BYTES))
    except (OSError, AttributeError):  # another C library (musl): it has no such threshold to fix
        return False
