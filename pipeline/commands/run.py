"""`refinery run`: the job (pipeline/api.py `run_argv`) with one error line and an exit code for every way it can
end: 2 for a mistake, 3 for a failed check, 130 on Ctrl-C, 143 on SIGTERM (docs/guarantees.md, "Exit
codes"); a traceback only with REFINERY_DEBUG=1."""
from __future__ import annotations

import os
import signal
import sys
from collections.abc import Sequence


def main(argv: Sequence[str]) -> int:
    from pipeline.api import RunError, is_grpc_error, one_line, run_argv

    for sig in (signal.SIGINT, signal.SIGTERM):  # Ctrl-C, `timeout`, a scheduler's kill: unwind (lock, temp files)
        signal.signal(sig, interrupt)
    if not os.environ.get("REFINERY_DEBUG"):  # Beam logs each failing bundle's traceback; we print one line
        import logging
        import threading

        for name in BEAM_ERROR_LOGGERS:
            logging.getLogger(name).setLevel(logging.CRITICAL)

        def thread_error(args) -> None:
            """A background thread's exception: Beam's portable runner has threads that die with the job
            service's connection (the main thread reports that, in one line); anything else is one warning."""
            if not is_grpc_error(args.exc_value):
                print(f"[refinery] warning: thread {args.thread.name if args.thread else '?'} failed: "
                      f"{type(args.exc_value).__name__}: {one_line(args.exc_value)}", file=sys.stderr)

        threading.excepthook = thread_error
    try:
        run_argv(argv, interrupted=lambda: INTERRUPTED)
    except RunError as exc:
        if exc.internal and os.environ.get("REFINERY_DEBUG") or not isinstance(exc.__cause__, Exception) \
                and exc.exit_code < 128:
            raise exc.__cause__ from None  # a bug (or a SystemExit): the traceback on request
        print(("\n" if exc.exit_code >= 128 else "") + f"refinery run: {exc.line}", file=sys.stderr)
        return exc.exit_code
    return 0


# Beam loggers that print a traceback for an error our one line reports (a DoFn's, a worker's).
BEAM_ERROR_LOGGERS = ("apache_beam.runners.common", "apache_beam.runners.portability.local_job_service",
                      "apache_beam.runners.worker.sdk_worker")

INTERRUPTED = 0  # the signal that interrupted the run (the handler sets it: Beam re-raises a KeyboardInterrupt as
#                 another type)


def interrupt(signum, frame):
    """SIGINT/SIGTERM: remember it, silence Beam's logging of the unwinding bundle, unwind."""
    global INTERRUPTED
    INTERRUPTED = INTERRUPTED or signum
    import logging

    logging.getLogger("apache_beam").setLevel(logging.CRITICAL + 1)
    raise KeyboardInterrupt
