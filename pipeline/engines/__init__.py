"""Where the job runs: the Dask runner (`dask_runner`), Slurm (`slurm`: phase 1 as a job array, phase 2 as a
job after it), and the local job service / worker pools / Dask cluster bound to loopback for the portable and
Dask demos and tests (`local_cluster`). Beam's options of a run are the job's (pipeline/job/beam_options.py)."""


class EngineLost(RuntimeError):
    """The engine running the job lost its state (a Dask scheduler gone): nothing was published and the committed
    parts of phase 1 stay for `--resume`."""
