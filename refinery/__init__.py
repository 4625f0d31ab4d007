"""Refinery's Python API: run the job, apply the stages to documents in memory, read a finished run.
The same settings, outputs and one-line errors as the `refinery` command (README "Python API";
the implementation is pipeline/api.py)."""
from pipeline.api import Run, RunError, RunResult, apply, open_run, run
from pipeline.job.config import RunConfig, load_config
from stages.record import Document, Drop

__all__ = ["Document", "Drop", "Run", "RunConfig", "RunError", "RunResult", "apply", "load_config", "open_run", "run"]
