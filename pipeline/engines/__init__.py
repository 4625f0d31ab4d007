"""Where the job runs: Beam's options and local runners (`beam_options`), the Dask runner
(`dask_runner`), Slurm (`slurm`: phase 1 as a job array, phase 2 as a job after it), and the local job service / worker pools / Dask cluster bound to loopback for the
portable and Dask demos and tests (`local_cluster`)."""
