"""The `refinery` sub-commands besides `run` (pipeline/job/run.py), each a thin front-end: `plan`,
`slurm`, `calibrate`, `inspect`, `annotate`, `train-quality`, and `docs` (the generated config and README tables).
`pipeline/cli.py` dispatches to them."""
