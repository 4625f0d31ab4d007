"""Servers and child processes: loopback only, and nothing left running when a run is stopped."""
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from pipeline.job.beam_options import loopback_only_grpc
from tests.conftest import CC_EXCERPT, WARC_DIR
from tests.reliability.hostile import REPO, alive, children_of, cmdline, processes_with


def descendants(root: int) -> dict:
    """{pid: command line} of every process below `root`."""
    found, frontier = {}, [root]
    while frontier:
        for child in children_of(frontier.pop()):
            if child not in found:
                found[child] = cmdline(child)
                frontier.append(child)
    return found


def listening_addresses(port: int):
    """Local addresses (hex, as /proc writes them) of TCP sockets listening on `port`."""
    found = []
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with open(table) as fh:
            for line in list(fh)[1:]:
                local, state = line.split()[1], line.split()[3]
                address, port_hex = local.rsplit(":", 1)
                if state == "0A" and int(port_hex, 16) == port:  # 0A = LISTEN
                    found.append(address)
    return found


def test_fnapi_worker_servers_bind_loopback_only():
    """What FnApiRunner's multi-process mode starts (worker_handlers.GrpcServer binds '[::]:0')."""
    from apache_beam.runners.portability.fn_api_runner import worker_handlers

    with loopback_only_grpc():
        server = worker_handlers.grpc.server(ThreadPoolExecutor(1))
        port = server.add_insecure_port("[::]:0")
        server.start()
    try:
        addresses = listening_addresses(port)
        loopback = {"0100007F", "00000000000000000000000001000000",  # 127.0.0.1, ::1
                    "0000000000000000FFFF00000100007F"}  # ::ffff:127.0.0.1
        assert addresses and set(addresses) <= loopback, addresses
    finally:
        server.stop(None)
    assert not isinstance(worker_handlers.grpc, type(server))  # the module is restored afterwards


def test_namespace_flag_is_refused_outside_a_loopback_only_namespace(tmp_path):
    env = dict(os.environ, REFINERY_LOCAL_CLUSTER_NETNS="1")
    proc = subprocess.run([sys.executable, "-m", "pipeline.engines.local_cluster", "--", "--input", str(CC_EXCERPT),
                           "--output", str(tmp_path / "o")], cwd=REPO, env=env, capture_output=True, text=True,
                          timeout=60)
    assert proc.returncode == 2 and "interfaces besides loopback" in proc.stderr


@pytest.mark.skipif(shutil.which("unshare") is None or os.geteuid() != 0, reason="needs unshare as root")
@pytest.mark.parametrize("engine, last_log, server", [("beam", "worker_pool.log", "worker_pool_main"),
                                                      ("dask", "dask_worker_1.log", "dask worker")])
def test_sigterm_to_local_cluster_leaves_nothing_running(tmp_path, engine, last_log, server):
    marker = str(tmp_path / "marker-out")
    logs = tmp_path / "logs"
    proc = subprocess.Popen([sys.executable, "-m", "pipeline.engines.local_cluster", "--engine", engine, "--log-dir", str(logs),
                             "--", "--input", str(CC_EXCERPT), "--output", marker], cwd=REPO,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and not [p for p in processes_with(marker) if "pipeline.cli" in cmdline(p)]:
        time.sleep(0.2)  # until the servers and workers are up and the job is submitted
    time.sleep(4)
    assert (logs / last_log).exists() and processes_with(marker), "the job should be running"
    started = descendants(proc.pid)  # this cluster's servers, workers, submitter (other tests may run theirs)
    assert any(server in command for command in started.values()), started
    proc.send_signal(signal.SIGTERM)
    proc.wait(timeout=60)
    time.sleep(2)
    left = processes_with(marker) + processes_with(str(logs))
    assert not left, [open(f"/proc/{p}/cmdline", "rb").read() for p in left if os.path.exists(f"/proc/{p}")]
    still = {pid: command for pid, command in started.items() if alive(pid) and cmdline(pid) == command}
    assert not still, still


def _listeners(pids: set[int]) -> list[tuple[str, int]]:
    """(local address, pid) of every listening TCP socket of `pids`, as `ss -ltnp` shows them."""
    out = subprocess.run(["ss", "-ltnpH"], capture_output=True, text=True, timeout=10).stdout
    found = []
    for line in out.splitlines():
        fields = line.split()
        for pid in map(int, re.findall(r"pid=(\d+)", line)):
            if pid in pids:
                found.append((fields[3], pid))
    return found


@pytest.mark.skipif(shutil.which("ss") is None, reason="needs ss (iproute2)")
def test_multi_processing_run_listens_on_loopback_only(tmp_path):
    """Every server of a `--direct_running_mode=multi_processing` job (FnApiRunner's control/data/state/logging
    servers and each SDK worker's logging server), listed by `ss -ltnp` while the job runs."""
    proc = subprocess.Popen([sys.executable, "-m", "pipeline.cli", "run", "--input", str(CC_EXCERPT), "--output",
                             str(tmp_path / "out"), "--quiet", "--direct_running_mode=multi_processing",
                             "--direct_num_workers=2"], cwd=REPO, stderr=subprocess.PIPE, text=True)
    seen = set()
    while proc.poll() is None:
        tree = {proc.pid, *descendants(proc.pid)}
        seen.update(_listeners(tree))
        time.sleep(0.1)
    assert proc.returncode == 0, proc.stderr.read()[-3000:]
    assert len({address for address, _ in seen}) >= 5, seen  # the runner's four servers and a worker's logging server
    loopback = ("127.0.0.1:", "[::1]:", "[::ffff:127.0.0.1]:", "localhost:")
    assert all(address.startswith(loopback) for address, _ in seen), sorted(seen)


@pytest.mark.skipif(shutil.which("unshare") is None or os.geteuid() != 0, reason="needs unshare as root")
@pytest.mark.parametrize("engine, server", [("beam", "local_job_service_main"), ("dask", "dask scheduler")])
def test_kill_9_of_local_cluster_leaves_nothing_running(tmp_path, engine, server):
    """SIGKILL of the process a user started (it cannot tidy up): the namespace's init dies with it, and the
    kernel ends the servers, workers and the submission, which must not go on to publish."""
    marker = str(tmp_path / "marker-out")
    proc = subprocess.Popen([sys.executable, "-m", "pipeline.engines.local_cluster", "--engine", engine, "--log-dir",
                             str(tmp_path / "logs"), "--", "--input", str(CC_EXCERPT), "--output", marker], cwd=REPO,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and not [p for p in processes_with(marker) if "pipeline.cli" in cmdline(p)]:
        time.sleep(0.2)
    started = descendants(proc.pid)
    assert any(server in command for command in started.values()), started
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=30)
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline and any(alive(pid) for pid in started):
        time.sleep(0.2)
    still = {pid: command for pid, command in started.items() if alive(pid) and cmdline(pid) == command}
    assert not still, still
    time.sleep(2)
    assert not (tmp_path / "marker-out" / "manifest.json").exists()


@pytest.mark.skipif(shutil.which("unshare") is None or os.geteuid() != 0, reason="needs unshare as root")
def test_job_service_death_is_one_error_line(tmp_path):
    """The Beam job service dies mid-job: the submission says so in one line (no gRPC repr, no traceback of
    Beam's threads) and publishes nothing."""
    out = tmp_path / "out"
    proc = subprocess.Popen([sys.executable, "-m", "pipeline.engines.local_cluster", "--log-dir", str(tmp_path / "logs"),
                             "--", "--input", str(WARC_DIR / "*.warc.gz"), "--output", str(out)], cwd=REPO,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline and not list(out.glob("prepared/*.done.json")):
        time.sleep(0.1)  # phase 1 under way: the job is running
    services = [pid for pid, command in descendants(proc.pid).items() if "local_job_service_main" in command]
    assert services, "the job service should be running"
    for pid in services:
        os.kill(pid, signal.SIGKILL)
    _, err = proc.communicate(timeout=180)
    assert proc.returncode == 1, err[-3000:]
    assert "Traceback" not in err and "_MultiThreadedRendezvous" not in err, err[-3000:]
    errors = [line for line in err.splitlines() if "error:" in line]
    assert len(errors) == 1 and "the Beam job service stopped answering" in errors[0], err[-3000:]
    assert not (out / "manifest.json").exists()
