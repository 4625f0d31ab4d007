"""`refinery` console script: one entry point, one sub-command per job."""
from __future__ import annotations

import os
import sys
from typing import Optional, Sequence

USAGE = """usage: refinery COMMAND [options]

commands:
  run            WARC files -> clean text Parquet shards + drop ledger + report.json
                 (`refinery run --help` lists every option)
  train-quality  train the fastText quality classifier used for `quality_score`
  train          train a small GPT on the shards (`--nproc-per-node N` starts N ranks
                 through torchrun; `refinery train --help` lists every option)
  train-tokenizer  a byte-level BPE (Hugging Face tokenizers) from the shards, for `train --tokenizer`
  report         memory | parallel | numerics: what training a model of a given size costs
                 (memory per GPU by ZeRO stage, communication, pipeline bubble, number formats);
                 `--run OUT` sets a training run's measurements next to the predictions
"""


def main(argv: Optional[Sequence[str]] = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] in ("-h", "--help", "help"):
        print(USAGE)
        return 0 if argv else 2
    command, rest = argv[0], argv[1:]
    if command == "run":
        from pipeline.config import ConfigError
        from pipeline.run import run
        from stages.record import StageEnvironmentError

        try:
            run(rest)
        except (ConfigError, FileNotFoundError, ValueError, StageEnvironmentError) as exc:
            print(f"refinery run: error: {exc}", file=sys.stderr)
            return 2
        return 0
    if command == "train-quality":
        from pipeline.train_quality_cli import main as train_quality

        return train_quality(rest)
    if command == "train":
        from training.launch import main as train

        return train(rest)
    if command == "train-tokenizer":
        from training.tokenizer import main as train_tokenizer

        return train_tokenizer(rest)
    if command == "report":
        from training.report import main as report

        return report(rest)
    print(f"refinery: unknown command {command!r}\n\n{USAGE}", file=sys.stderr)
    return 2


def console_main() -> None:
    """Entry point of the console script. It ends the process with os._exit after flushing: most
    likely pyarrow's native thread pool intermittently aborts during interpreter shutdown with
    "terminate called without an active exception" (a joinable std::thread destroyed at exit;
    apache/arrow#34314, open), after all outputs are written, which turned a finished run into exit
    code 134."""
    code = main()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


if __name__ == "__main__":
    console_main()
