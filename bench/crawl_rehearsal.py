"""A crawl rehearsal (issue 60): phase 1 on a Common Crawl-sized file against `refinery plan`'s prediction, and the
whole job on a Dask cluster of memory-capped workers as documents grow, with workers killed mid-run.

    .venv/bin/python bench/crawl_warc.py /work/rehearsal/crawl-00000.warc.gz            # ~1.1 GB, 40 k responses
    .venv/bin/python bench/crawl_rehearsal.py phase1 /work/rehearsal/crawl-00000.warc.gz
    .venv/bin/python bench/crawl_rehearsal.py dask 300000 1000000 [--workers 4 --memory-limit 1.5GB]
    .venv/bin/python bench/crawl_rehearsal.py dask 300000 --kill-at 0.6 --kill-at 0.85 --same-as-local
    .venv/bin/python bench/crawl_rehearsal.py slurm [--files 20 --docs-per-file 5000]   # needs `make slurm`
    .venv/bin/python bench/crawl_rehearsal.py plot bench/runs/crawl_rehearsal.jsonl

Each line of output is one JSON result; `bench/runs/crawl_rehearsal.jsonl` keeps them for the plot.

phase1: the PrepareFile task (pipeline/job/prepare.py, what a Slurm array task or a Dask worker runs per input
file) over the whole file in a fresh process, models loaded first as a worker does: wall and CPU seconds (its
process and the extraction child), each process's peak memory, the prepared part's bytes; then `refinery plan` on
the same file (a 300-record sample) and the ratios measured/predicted.

dask: `bench/run_scale.py`'s synthetic corpus (60 words from a 50,000-word vocabulary, 10 % near and 5 % exact
copies; JSONL files of 50,000 documents: one phase-1 task each) through a whole `refinery run` on
`python -m pipeline.engines.local_cluster --engine dask` (scheduler and workers on 127.0.0.1 in a loopback-only
namespace), each worker under `--memory-limit`: time, each worker's peak memory (pipeline/engines/worker_watch.py),
Dask's memory kills. --kill-at F kills a worker's process at F x the uninterrupted run's time at that size (run
first); --same-as-local also runs the size in one local process (FnApiRunner) and compares the outputs byte for byte.
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from bench.run_scale import CONFIG, write_inputs  # noqa: E402

HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RESULTS = os.path.join(HERE, "bench", "runs", "crawl_rehearsal.jsonl")

# The phase-1 task over one file in a fresh process (printed as one JSON line); main() guarded, as the extraction
# worker's spawn may import __main__.
PHASE1 = """\
import json, os, resource, sys, time
from pipeline.counters import capture_counts
from pipeline.job.config import load_config
from pipeline.job.inputs import input_files, input_root
from pipeline.job.parts import part_paths
from pipeline.job.steps import phase1_task


def child_stats():
    import multiprocessing
    cpu = peak = 0
    for child in multiprocessing.active_children():
        with open(f"/proc/{child.pid}/stat") as fh:
            f = fh.read().rsplit(")", 1)[1].split()
        cpu += (int(f[11]) + int(f[12])) / os.sysconf("SC_CLK_TCK")
        with open(f"/proc/{child.pid}/status") as fh:
            peak = max(peak, next(int(l.split()[1]) for l in fh if l.startswith("VmHWM")) * 1024)
    return cpu, peak


def main():
    path, out = sys.argv[1], sys.argv[2]
    config = load_config(None, {"inputs": [path], "output": out})
    files = input_files(config)
    task, _ = phase1_task(config, input_root([f.path for f in files]))
    t0 = time.monotonic()
    task.setup()
    setup_s = time.monotonic() - t0
    cpu0, child0 = time.process_time(), child_stats()[0]
    t0 = time.monotonic()
    with capture_counts() as counts:
        part = task.run(files[0])
    wall = time.monotonic() - t0
    child_cpu, child_peak = child_stats()
    cpu = time.process_time() - cpu0 + child_cpu - child0
    paths = part_paths(out, part.key)
    prepared = sum(os.path.getsize(p) for kind, p in paths.items() if kind != "done.json" and os.path.exists(p))
    task.teardown()
    print(json.dumps({"records": part.records, "setup_s": round(setup_s, 1), "wall_s": round(wall, 1),
                      "cpu_s": round(cpu, 1), "peak_rss_bytes": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
                      "child_peak_rss_bytes": child_peak, "prepared_bytes": prepared,
                      "records_by_type": {k: v for k, v in counts.items() if k.startswith("warc.record.")}}))


if __name__ == "__main__":
    main()
"""


def _save(found: dict) -> None:
    print(json.dumps(found), flush=True)
    os.makedirs(os.path.dirname(RESULTS), exist_ok=True)
    with open(RESULTS, "a", encoding="utf-8") as fh:
        fh.write(json.dumps(dict(found, date=time.strftime("%Y-%m-%d"))) + "\n")


def phase1(path: str, sample: int | None, measured: dict | None = None, sample_from: str = "spread") -> None:
    env = dict(os.environ, PYTHONPATH=HERE)
    with tempfile.TemporaryDirectory(prefix="rehearsal-p1-") as work:
        plan_path = os.path.join(work, "plan.json")
        subprocess.run([sys.executable, "-m", "pipeline.cli", "plan", "--input", path, "--save", plan_path,
                        "--sample-from", sample_from, *(["--sample", str(sample)] if sample else [])],
                       check=True, env=env, cwd=HERE, stdout=subprocess.DEVNULL)
        with open(plan_path, encoding="utf-8") as fh:
            plan = json.load(fh)
        if measured is None:  # (--measured: the task's figures from an earlier line, to compare another plan)
            done = subprocess.run([sys.executable, "-c", PHASE1, path, os.path.join(work, "out")], check=True,
                                  env=env, cwd=HERE, capture_output=True, text=True)
            measured = json.loads(done.stdout.strip().splitlines()[-1])
    predicted = plan["input"]
    sample_cpu_per_record = plan["sample"]["phase1_cpu_s"] / plan["sample"]["records"]
    _save({"bench": "phase1", "file": os.path.basename(path), "bytes": os.path.getsize(path), "measured": measured,
           "plan_sample": plan["sample"]["records"], "sample_from": sample_from,
           "predicted": {"cpu_s": round(predicted["cpu_hours_phase1"] * 3600, 1),
                         "peak_rss_bytes": predicted["peak_memory_per_worker_bytes"]["phase1"],
                         "prepared_bytes": predicted["prepared_bytes"], "records": predicted["records"]},
           "measured_over_predicted": {
               "cpu": round(measured["cpu_s"] / (predicted["cpu_hours_phase1"] * 3600), 2),
               "peak_memory": round(max(measured["peak_rss_bytes"], measured["child_peak_rss_bytes"])
                                    / predicted["peak_memory_per_worker_bytes"]["phase1"], 2),
               "prepared_bytes": round(measured["prepared_bytes"] / predicted["prepared_bytes"], 2),
               "records": round(measured["records"] / predicted["records"], 2)},
           "sample": {"records": plan["sample"]["records"], "cpu_s_per_record": round(sample_cpu_per_record, 4)}})


def _cluster_run(inputs: str, out: str, config: str, args, kill_after: list[float], logs: str,
                 same_as: str | None = None) -> dict:
    cmd = [sys.executable, "-m", "pipeline.engines.local_cluster", "--engine", "dask", "--workers", str(args.workers),
           "--memory-limit", args.memory_limit, "--timeout", str(args.timeout), "--log-dir", logs,
           *[a for s in kill_after for a in ("--kill-worker-after", f"{s:.1f}")],
           *(["--same-as", same_as] if same_as else []),
           "--", "--source", f"bench={inputs}/*.jsonl", "--output", out, "--config", config, "--overwrite", "--quiet"]
    started = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True, env=dict(os.environ, PYTHONPATH=HERE), cwd=HERE)
    wall = time.perf_counter() - started
    found: dict = {"seconds": round(wall, 1), "exit_code": proc.returncode}
    if proc.returncode:
        found["error"] = proc.stderr[-1500:]
    try:
        with open(os.path.join(logs, "dask_workers.json"), encoding="utf-8") as fh:
            found["workers"] = json.load(fh)
        with open(os.path.join(out, "report.json"), encoding="utf-8") as fh:
            report = json.load(fh)
        found.update(kept=report["kept"], conservation=report["conservation"]["holds"])
    except (OSError, ValueError):
        pass
    if same_as:
        found["same_as_local"] = proc.returncode == 0 and "byte-identical" in proc.stdout
    return found


def _local_run(inputs: str, out: str, config: str) -> dict:
    started = time.perf_counter()
    subprocess.run([sys.executable, "-m", "pipeline.cli", "run", "--source", f"bench={inputs}/*.jsonl", "--output",
                    out, "--config", config, "--overwrite", "--quiet"], check=True, cwd=HERE,
                   env=dict(os.environ, PYTHONPATH=HERE))
    peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024
    return {"seconds": round(time.perf_counter() - started, 1), "peak_rss_bytes_of_any_child_so_far": peak}


def dask(args) -> None:
    with tempfile.TemporaryDirectory(prefix="rehearsal-dask-", dir=args.work) as work:
        config = os.path.join(work, "bench.yaml")
        with open(config, "w", encoding="utf-8") as fh:
            fh.write(CONFIG)
        for n in args.sizes:
            inputs = os.path.join(work, f"in-{n}")
            os.makedirs(inputs)
            write_inputs(n, inputs)
            local = os.path.join(work, f"local-{n}")
            base = {"bench": "dask", "documents": n, "n_workers": args.workers, "memory_limit": args.memory_limit}
            if args.same_as_local:
                _save(dict(base, runner="FnApiRunner, one process", **_local_run(inputs, local, config)))
            clean = _cluster_run(inputs, os.path.join(work, f"dask-{n}"), config, args, [],
                                 os.path.join(work, f"logs-{n}"), local if args.same_as_local else None)
            _save(dict(base, runner="dask", kills=0, **clean))
            if args.kill_at and not clean["exit_code"]:
                kill_after = [f * clean["seconds"] for f in args.kill_at]
                killed = _cluster_run(inputs, os.path.join(work, f"dask-killed-{n}"), config, args, kill_after,
                                      os.path.join(work, f"logs-killed-{n}"), os.path.join(work, f"dask-{n}"))
                _save(dict(base, runner="dask", kills=len(kill_after), kill_at=args.kill_at, **killed))
            for folder in (inputs, local):
                subprocess.run(["rm", "-rf", folder], check=False)


def plot(path: str, out: str, workers: int = 4) -> None:
    """Time and each worker's peak memory against documents, from the uninterrupted runs of `path` on `workers`
    workers (rows before `n_workers` was recorded ran on 4)."""
    from training.curves import pyplot

    plt = pyplot()
    with open(path, encoding="utf-8") as fh:
        rows = [json.loads(line) for line in fh if line.strip()]
    dask_rows = sorted((r for r in rows if r["bench"] == "dask" and r.get("runner") == "dask" and not r.get("kills")
                        and not r.get("exit_code") and r.get("n_workers", 4) == workers), key=lambda r: r["documents"])
    local = sorted((r for r in rows if r["bench"] == "dask" and r.get("runner", "").startswith("FnApiRunner")),
                   key=lambda r: r["documents"])
    fig, (left, right) = plt.subplots(1, 2, figsize=(10, 4))
    docs = [r["documents"] / 1e6 for r in dask_rows]
    left.plot(docs, [r["seconds"] for r in dask_rows], "o-", label=f"Dask, {workers} capped workers")
    if local:
        left.plot([r["documents"] / 1e6 for r in local], [r["seconds"] for r in local], "s--", label="one process")
    left.set(xlabel="documents (millions)", ylabel="seconds, whole run", title="time")
    left.legend()
    names = sorted({name for r in dask_rows for name in r["workers"]["workers"]})
    for name in names:
        right.plot(docs, [r["workers"]["workers"][name]["peak_rss_mb"] for r in dask_rows], "o-", label=name)
    limits = {r["workers"]["memory_limit_mb"] for r in dask_rows}
    for limit in limits:
        right.axhline(limit, color="red", linestyle=":", label=f"memory limit {limit} MB")
    right.set(xlabel="documents (millions)", ylabel="peak resident MB", title="peak memory per worker", ylim=(0, None))
    right.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(out, dpi=100)
    print(out)


def slurm(args) -> None:
    """Phase 1 as a Slurm job array of one file per task on the local one-node Slurm (pipeline/engines/local_slurm.py),
    one running task SIGKILLed once 3 parts are committed, then `submit --resume`; the output against a local run's."""
    import glob
    import re
    import signal

    from bench.dedup_scale import corpus
    from pipeline.engines.local_slurm import LocalSlurm, missing_tools
    from pipeline.job.outdir import compare_outputs

    if missing_tools():
        raise SystemExit(f"needs the local Slurm (`make slurm`): missing {missing_tools()}")
    with tempfile.TemporaryDirectory(prefix="rehearsal-slurm-", dir=args.work) as work:
        config = os.path.join(work, "bench.yaml")
        with open(config, "w", encoding="utf-8") as fh:
            fh.write(CONFIG)
        inputs = os.path.join(work, "in")
        os.makedirs(inputs)
        docs = corpus(args.files * args.docs_per_file)
        for i in range(args.files):
            with open(os.path.join(inputs, f"part-{i:04d}.jsonl"), "w", encoding="utf-8") as fh:
                for d in docs[i * args.docs_per_file:(i + 1) * args.docs_per_file]:
                    fh.write(json.dumps({"text": d.text, "url": f"https://bench.example/{d.id}"}) + "\n")
        run_args = ["--source", f"bench={inputs}/*.jsonl", "--config", config, "--quiet"]
        local = os.path.join(work, "local")
        local_s = _local_run(inputs, local, config)["seconds"]
        out = os.path.join(work, "slurm")
        cluster = LocalSlurm.in_new_namespace()
        found: dict = {"bench": "slurm", "files": args.files, "documents": args.files * args.docs_per_file,
                       "local_seconds": local_s}
        try:
            started = time.perf_counter()
            done = cluster.refinery("slurm", "submit", "--files-per-task", "1", "--cpus-per-task", "1", *run_args,
                                    "--output", out)
            if done.returncode:
                raise SystemExit(done.stderr)
            array = re.findall(r"^phase \d: job (\d+)", done.stdout, re.M)[0]
            parts = os.path.join(out, "prepared", "*.done.json")
            def running_tasks() -> list[str]:
                return subprocess.run(["pgrep", "-f", f"pipeline.cli slurm task {out}"], capture_output=True,
                                      text=True).stdout.split()

            # a task running once 3 parts are committed (tasks come and go: wait for one between them)
            cluster.wait(lambda: len(glob.glob(parts)) >= 3 and running_tasks(), 1800, "3 parts and a running task")
            killed = 0
            for pid in running_tasks()[:1]:
                try:
                    os.kill(int(pid), signal.SIGKILL)
                    killed += 1
                except ProcessLookupError:  # it ended between the look and the kill
                    pass
            found.update(killed_tasks=killed, parts_when_killed=len(glob.glob(parts)))
            cluster.wait(lambda: not any(line.startswith(f"{array}_") for line in cluster.queued()), 3600,
                         "the array to end")
            status = cluster.refinery("slurm", "status", out).stdout
            found["status_after_kill"] = [line.strip() for line in status.splitlines() if "array" in line
                                          or "prepared" in line][:3]
            again = cluster.refinery("slurm", "submit", "--files-per-task", "1", "--cpus-per-task", "1", *run_args,
                                     "--output", out, "--resume")
            found["resubmitted"] = re.findall(r"(\d+) array task\(s\)", again.stdout)
            cluster.wait(lambda: os.path.exists(os.path.join(out, "manifest.json")) or not cluster.queued(), 3600,
                         "phase 2")
            found["seconds"] = round(time.perf_counter() - started, 1)
        finally:
            cluster.close()
        found["differences_from_local"] = compare_outputs(local, out)
        _save(found)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="command", required=True)
    p1 = sub.add_parser("phase1")
    p1.add_argument("path")
    p1.add_argument("--sample", type=int, default=None, help="records for `refinery plan` (default: its own)")
    p1.add_argument("--sample-from", choices=("spread", "head"), default="spread", help="as `refinery plan`'s")
    p1.add_argument("--measured", metavar="JSONL", help="take the task's figures from this file's last phase1 line "
                    "for the same file instead of running it again (another plan against the same measurement)")
    dk = sub.add_parser("dask")
    dk.add_argument("sizes", nargs="+", type=int)
    dk.add_argument("--workers", type=int, default=4)
    dk.add_argument("--memory-limit", default="1.5GB")
    dk.add_argument("--kill-at", type=float, action="append", default=[])
    dk.add_argument("--same-as-local", action="store_true")
    dk.add_argument("--timeout", type=float, default=7200)
    dk.add_argument("--work", default=None, help="folder for inputs and outputs (default: the system's temp)")
    sl = sub.add_parser("slurm")
    sl.add_argument("--files", type=int, default=20)
    sl.add_argument("--docs-per-file", type=int, default=5000)
    sl.add_argument("--work", default=None)
    pl = sub.add_parser("plot")
    pl.add_argument("path", nargs="?", default=RESULTS)
    pl.add_argument("--out", default=os.path.join(HERE, "bench", "runs", "crawl_rehearsal.png"))
    args = ap.parse_args()
    if args.command == "phase1":
        measured = None
        if args.measured:
            with open(args.measured, encoding="utf-8") as fh:
                lines = [json.loads(line) for line in fh if line.strip()]
            measured = [r for r in lines if r["bench"] == "phase1" and r["file"] == os.path.basename(args.path)][-1]
            measured = measured["measured"]
        phase1(args.path, args.sample, measured, args.sample_from)
    elif args.command == "plot":
        plot(args.path, args.out)
    elif args.command == "slurm":
        slurm(args)
    else:
        dask(args)


if __name__ == "__main__":
    main()
