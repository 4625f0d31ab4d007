"""Servers and child processes: loopback only, and nothing left running when a run is stopped."""
import os
import shutil
import signal
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from pipeline.beam_options import loopback_only_grpc
from tests.conftest import CC_EXCERPT
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
    proc = subprocess.run([sys.executable, "-m", "pipeline.local_cluster", "--", "--input", str(CC_EXCERPT),
                           "--output", str(tmp_path / "o")], cwd=REPO, env=env, capture_output=True, text=True,
                          timeout=60)
    assert proc.returncode == 2 and "interfaces besides loopback" in proc.stderr


@pytest.mark.skipif(shutil.which("unshare") is None or os.geteuid() != 0, reason="needs unshare as root")
@pytest.mark.parametrize("engine, last_log, server", [("beam", "worker_pool.log", "worker_pool_main"),
                                                      ("dask", "dask_worker_1.log", "dask worker")])
def test_sigterm_to_local_cluster_leaves_nothing_running(tmp_path, engine, last_log, server):
    marker = str(tmp_path / "marker-out")
    logs = tmp_path / "logs"
    proc = subprocess.Popen([sys.executable, "-m", "pipeline.local_cluster", "--engine", engine, "--log-dir", str(logs),
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
