"""`refinery` console script: one entry point, one sub-command per job."""
from __future__ import annotations

import os
import sys
from collections.abc import Sequence

# Arrow's default allocator (mimalloc) reserves address space in large segments and keeps it; the system allocator
# gives it back, so a run stays within an address-space cap (ulimit -v, a container's) when it reads large Parquet
# values. Set before pyarrow is first used; a user's own choice stands.
os.environ.setdefault("ARROW_DEFAULT_MEMORY_POOL", "system")

from common.version import version

# command -> (the module whose main(argv) runs it, what it does): the dispatch and the usage text.
# Modules are imported only when their command is asked for: `refinery train` must not load Beam.
COMMANDS = {
    "run": ("pipeline.commands.run", "WARC files -> clean text Parquet shards + drop ledger + report.json + report.html\n"
                                "(`refinery run --help` lists every option)"),
    "plan": ("pipeline.commands.plan", "before a run: CPU-hours, memory per worker, intermediate, output and shuffle "
                                       "bytes,\npredicted from a measured sample (for the input and for one Common "
                                       "Crawl snapshot)"),
    "inspect": ("pipeline.commands.inspect_cli", "a run's output in the terminal: why pages were dropped (--reason R "
                                                 "--sample N,\n--id ID, --url TEXT, --lang L), what was kept (--kept)"),
    "calibrate": ("pipeline.commands.calibrate", "per-language thresholds from a corpus, for `refinery run "
                                                 "--thresholds FILE`"),
    "slurm": ("pipeline.commands.slurm", "the same run on a Slurm cluster: phase 1 as a job array, phase 2 as a "
                                         "dependent job;\n`refinery slurm status OUT` follows it"),
    "robots": ("pipeline.commands.robots", "robots check ROBOTS_FILE URL [--agent NAME]: allowed or disallowed "
                                           "under RFC 9309,\nand the line that decided"),
    "train-quality": ("pipeline.commands.train_quality_cli", "train the fastText quality classifier used for "
                                                             "`quality_score`"),
    "annotate": ("pipeline.commands.annotate", "grade a sample of a run with a model you serve (OpenAI-compatible "
                                               "API), then\ntrain a graded quality model on the grades (FineWeb-Edu's "
                                               "method; optional)"),
    "train-toxicity": ("pipeline.commands.train_quality_cli", "train the fastText toxicity classifier used for "
                                                              "`toxicity_score`\n(`make toxicity-model` rebuilds the "
                                                              "bundled one from shared/data)"),
    "train": ("training.launch", "train a small GPT on the shards (`--nproc-per-node N` starts N ranks\nthrough "
                                 "torchrun; `refinery train --help` lists every option)"),
    "train-tokenizer": ("training.tokenizer", "a byte-level BPE (Hugging Face tokenizers) from the shards, for "
                                              "`train --tokenizer`"),
    "tokenize": ("training.tokens", "token shards (flat uint16/uint32 ids + document index) for `train --tokens`"),
    "sample": ("training.sample", "continuations of a prompt from a training run's latest checkpoint"),
    "ablate": ("training.ablate", "compare mixtures or filter settings by the validation loss of small proxy models"),
    "report": ("training.report", "memory | parallel | numerics: what training a model of a given size costs\n"
                                  "(memory per GPU by ZeRO stage, communication, pipeline bubble, number formats);\n"
                                  "`--run OUT` sets a training run's measurements next to the predictions"),
}


def usage() -> str:
    lines = ["usage: refinery COMMAND [options]   (refinery --version; refinery COMMAND --help)", "", "commands:"]
    for name, (_, about) in COMMANDS.items():
        first, *more = about.split("\n")
        lines.append(f"  {name:<14} {first}" if len(name) <= 14 else f"  {name}  {first}")
        lines += [" " * 17 + line for line in more]
    return "\n".join(lines) + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] in ("-h", "--help", "help"):
        print(usage())
        return 0 if argv else 2
    if argv[0] in ("--version", "-V", "version"):
        print(f"refinery {version()}")
        return 0
    command, rest = argv[0], argv[1:]
    if command in ("train-quality", "train-toxicity"):
        from pipeline.commands.train_quality_cli import main as train_classifier

        return train_classifier(rest, command)
    if command in COMMANDS:
        import importlib

        from stages.table import PluginError

        try:
            return importlib.import_module(COMMANDS[command][0]).main(rest)
        except PluginError as exc:  # an installed stage package that does not load, or clashes with another
            print(f"refinery: error: {exc}", file=sys.stderr)
            return 2
    print(f"refinery: unknown command {command!r}\n\n{usage()}", file=sys.stderr)
    return 2


THREAD_STACK_BYTES = 4 << 20


def fit_address_space_limit() -> None:
    """Under an address-space limit (`ulimit -v`, a batch system's memory cap), glibc's per-thread
    malloc arenas (64 MiB of address space each, up to 8 per core) and Beam's many threads use the
    limit up long before memory runs out ("can't start new thread"). Cap the arenas, here and in the
    processes this one starts."""
    import resource

    soft, _ = resource.getrlimit(resource.RLIMIT_AS)
    if soft == resource.RLIM_INFINITY:
        return
    os.environ.setdefault("MALLOC_ARENA_MAX", "2")
    try:
        import ctypes

        ctypes.CDLL("libc.so.6").mallopt(-8, int(os.environ["MALLOC_ARENA_MAX"]))  # M_ARENA_MAX
    except (OSError, AttributeError, ValueError):  # not glibc: nothing to cap
        pass
    # Each thread reserves its stack (8 MiB, `ulimit -s`) of address space; Beam's runner starts dozens. Python
    # code needs far less (pages are parsed in the extraction worker, a process of its own): 4 MiB.
    import threading

    threading.stack_size(THREAD_STACK_BYTES)


def _end_children() -> None:
    """os._exit skips multiprocessing's exit handler, which would end our daemon children (the
    extraction worker): after an interrupt Beam may not have run the stage's teardown, so end them here."""
    import multiprocessing

    for child in multiprocessing.active_children():
        child.kill()
        child.join(timeout=5)


def console_main() -> None:
    """Entry point of the console script. It ends the process with os._exit after flushing: most
    likely pyarrow's native thread pool intermittently aborts during interpreter shutdown with
    "terminate called without an active exception" (a joinable std::thread destroyed at exit;
    apache/arrow#34314, open), after all outputs are written, which turned a finished run into exit
    code 134."""
    fit_address_space_limit()
    try:
        code = main()
        sys.stdout.flush()
    except BrokenPipeError:  # `refinery inspect ... | head`: the reader has gone, which is no error of ours
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        code = 141  # 128 + SIGPIPE, as a command that the signal ended
    _end_children()
    sys.stderr.flush()
    os._exit(code)


if __name__ == "__main__":
    console_main()
