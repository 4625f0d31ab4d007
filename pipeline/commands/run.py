"""`refinery run`: the job (pipeline/job/run.py) with one error line and an exit code for every way it can
end: 2 for a mistake, 3 for a failed check, 130 on Ctrl-C, 143 on SIGTERM (docs/guarantees.md, "Exit
codes"); a traceback only with REFINERY_DEBUG=1."""
from __future__ import annotations

import errno
import os
import signal
import sys
from collections.abc import Sequence

from pipeline.job.config import ConfigError, flag_value


def main(argv: Sequence[str]) -> int:
    """`refinery run`: one error line and exit 2 for a mistake, 3 for a failed check, 130 on Ctrl-C, 143 on
    SIGTERM (docs/guarantees.md, "Exit codes")."""
    from pipeline.job.publish import RunFailed
    from pipeline.job.run import run
    from stages.record import StageEnvironmentError

    output = flag_value(argv, "--output")
    for sig in (signal.SIGINT, signal.SIGTERM):  # Ctrl-C, `timeout`, a scheduler's kill: unwind (lock, temp files)
        signal.signal(sig, interrupt)
    if not os.environ.get("REFINERY_DEBUG"):  # Beam logs each failing bundle's traceback; we print one line
        import logging
        import threading

        for name in BEAM_ERROR_LOGGERS:
            logging.getLogger(name).setLevel(logging.CRITICAL)
        threading.excepthook = _thread_error
    try:
        run(argv, interrupted=lambda: INTERRUPTED)
    except BaseException as exc:  # noqa: B036  (every way out is one line; see below)
        if INTERRUPTED or isinstance(exc, KeyboardInterrupt):  # first: Beam may re-raise it as another type
            where = f" {output}" if output else ""
            state = (f"{where} holds the previous complete output again (put back)"
                     if output and os.path.exists(os.path.join(output, "manifest.json"))
                     else f" the output{where} is incomplete and has no manifest")
            print(f"\nrefinery run: interrupted by {signal.Signals(INTERRUPTED or signal.SIGINT).name};{state}. Run the "
                  "same command with --resume to continue (input files already prepared are not read again), or with "
                  "--overwrite to start over.", file=sys.stderr)
            return 128 + (INTERRUPTED or signal.SIGINT)  # 130 for Ctrl-C, 143 for SIGTERM, as shells expect
        if isinstance(exc, RunFailed):
            print(f"refinery run: error: {exc}", file=sys.stderr)
            return RunFailed.exit_code
        cause = _cause(exc)
        if isinstance(cause, OSError) and cause.errno in (errno.ENOSPC, errno.EDQUOT):
            print(f"refinery run: error: no space left on the device ({_one_line(exc)}); nothing was published. "
                  "Free space, then run the same command with --resume (input files already prepared are kept)",
                  file=sys.stderr)
            return 1
        if _is_grpc_error(cause):
            print(f"refinery run: error: the Beam job service stopped answering ({_grpc_summary(cause)}); the job's "
                  "state is unknown and nothing was published: check the runner, then rerun with --resume",
                  file=sys.stderr)
            return 1
        if isinstance(cause, (ConfigError, StageEnvironmentError, OSError, ValueError)):
            print(f"refinery run: error: {_one_line(exc)}", file=sys.stderr)
            return 2
        return _internal_error(exc)
    return 0


# Beam loggers that print a traceback for an error our one line reports (a DoFn's, a worker's).
BEAM_ERROR_LOGGERS = ("apache_beam.runners.common", "apache_beam.runners.portability.local_job_service",
                      "apache_beam.runners.worker.sdk_worker")


def _cause(exc: BaseException) -> BaseException:
    """The exception behind Beam's wrapping: Beam re-raises a DoFn's error as RuntimeError('OSError: ... [while
    running STEP]') when it cannot rebuild its type (an OSError with an errno), from inside the handler."""
    seen = exc
    for _ in range(10):
        if not isinstance(seen, RuntimeError) or type(seen).__module__ != "builtins":
            return seen
        inner = seen.__cause__ or seen.__context__
        if inner is None:
            return seen
        seen = inner
    return seen


def _thread_error(args) -> None:
    """A background thread's exception: Beam's portable runner has threads that die with the job service's
    connection (the main thread reports that, in one line); anything else is one warning line."""
    if _is_grpc_error(args.exc_value):
        return
    print(f"[refinery] warning: thread {args.thread.name if args.thread else '?'} failed: "
          f"{type(args.exc_value).__name__}: {_one_line(args.exc_value)}", file=sys.stderr)


def _is_grpc_error(exc: BaseException) -> bool:
    return any(cls.__module__.startswith("grpc") for cls in type(exc).__mro__)


def _grpc_summary(exc: BaseException) -> str:
    code, details = getattr(exc, "code", None), getattr(exc, "details", None)
    try:
        return f"{code().name}: {details()}" if callable(code) and callable(details) else type(exc).__name__
    except Exception:
        return type(exc).__name__


def _internal_error(exc: BaseException) -> int:
    """A bug, not a user's mistake: still one line, the traceback on request."""
    if os.environ.get("REFINERY_DEBUG") or not isinstance(exc, Exception):
        raise exc
    print(f"refinery run: internal error: {_one_line(exc)} (set REFINERY_DEBUG=1 for the traceback)",
          file=sys.stderr)
    return 1


INTERRUPTED = 0  # the signal that interrupted the run (the handler sets it: Beam re-raises a KeyboardInterrupt as
#                 another type)


def interrupt(signum, frame):
    """SIGINT/SIGTERM: remember it, silence Beam's logging of the unwinding bundle, unwind."""
    global INTERRUPTED
    INTERRUPTED = INTERRUPTED or signum
    import logging

    logging.getLogger("apache_beam").setLevel(logging.CRITICAL + 1)
    raise KeyboardInterrupt


def _one_line(exc: BaseException) -> str:
    from common.settings import error_text

    return error_text(exc)
