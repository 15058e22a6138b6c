"""Ranks on two "hosts": two Linux network namespaces joined by a veth pair.

Each host runs two ranks. They reach the other host only over the veth addresses (each namespace
has nothing else but its own loopback), so the group mixes shared memory within a host and TCP
between hosts. Needs root and `ip netns`; skipped with the reason otherwise.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time

import pytest

from dist_harness import occl_only
from tcp_links import send_buffer_for
from torch_occl.bench.two_hosts import ADDRESSES, NamespacesUnavailable, network_namespaces

pytestmark = occl_only("occl's transports")

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
WORKER = os.path.join(REPO, "tests", "scripts", "two_hosts_worker.py")
RANKS_ON = {"a": [0, 1], "b": [2, 3]}


@pytest.fixture
def two_hosts():
    """{"a": netns name, "b": netns name}, wired with a veth pair; removed afterwards."""
    try:
        with network_namespaces() as hosts:
            yield {name: host.namespace for name, host in hosts.items()}
    except NamespacesUnavailable as e:
        pytest.skip(str(e))


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _read_line(proc, prefix, deadline):
    """The JSON after `prefix` on the next line of proc's stdout that starts with it."""
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        if not line:
            break
        if line.startswith(prefix + " "):
            return json.loads(line[len(prefix) + 1:])
    return None


def test_collectives_across_two_hosts_and_a_host_dying(two_hosts):
    world_size = sum(len(r) for r in RANKS_ON.values())
    # The port is picked on the test's own network, but namespace "a" has all its ports free.
    master = f"{ADDRESSES['a']}:{_free_port()}"
    env = {**os.environ, "PYTHONPATH": REPO + os.pathsep + os.environ.get("PYTHONPATH", ""),
           "OMP_NUM_THREADS": "1", "OCCL_TRANSPORT": "auto"}
    procs = {}
    try:
        for host, ranks in RANKS_ON.items():
            for rank in ranks:
                procs[rank] = subprocess.Popen(
                    ["ip", "netns", "exec", two_hosts[host], sys.executable, WORKER, master,
                     str(rank), str(world_size)],
                    stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
        deadline = time.monotonic() + 120
        for rank, proc in procs.items():
            checked = _read_line(proc, "checked", deadline)
            assert checked is not None, f"rank {rank} did not finish its checks: " + (
                proc.stderr.read() if proc.poll() is not None else "still running")
            regions = checked.pop("shared-memory regions")
            links = checked.pop("tcp links")
            assert all(checked.values()), f"rank {rank}: wrong results: {checked}"
            # Links within a host queue little (test_tcp_links); links to the other host keep
            # the kernel's sizing, which a real network needs.
            assert len(links) == 2 * (world_size - 1), f"rank {rank}: {links}"
            for local, peer, send_buffer in links:
                same_host = local == peer
                limited = send_buffer == send_buffer_for(256 * 1024)
                assert limited == same_host, f"rank {rank}: {links}"
            assert regions == 1, f"rank {rank}: {regions} shared-memory regions, expected 1 " \
                                 "(its host's other rank)"

        time.sleep(0.5)  # host b's ranks are inside 64 MiB allreduces now
        for rank in RANKS_ON["b"]:
            procs[rank].send_signal(signal.SIGKILL)
        deadline = time.monotonic() + 30
        for rank in RANKS_ON["a"]:
            failed = _read_line(procs[rank], "failed", deadline)
            assert failed is not None, f"rank {rank} did not raise after host b died"
            assert failed["elapsed"] < 5, f"rank {rank}: took {failed['elapsed']:.1f}s"
            assert "connection" in failed["error"], f"rank {rank}: {failed['error']}"
            assert procs[rank].wait(timeout=30) == 0, f"rank {rank} did not exit cleanly"
    finally:
        for proc in procs.values():
            if proc.poll() is None:
                proc.kill()
            proc.wait(timeout=10)
