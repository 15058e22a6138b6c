"""Strangers on a rank's port: a flood of malformed connections while the group forms.

A rank listens only while its group bootstraps (the listener closes once every higher rank has
connected). The test finds rank 0's port through the store, as a port scan would, and throws
10,000 connections at it before rank 1 even starts: random bytes, truncated and silent
handshakes, handshakes with a wrong secret, rank or size. The group must still form, compute
correctly, and afterwards refuse connections outright.
"""

from __future__ import annotations

import datetime
import os
import random
import secrets
import socket
import struct
import subprocess
import sys
import threading
import time

import pytest
import torch.distributed as dist

from dist_harness import occl_only
from occl_handshake import hello

pytestmark = occl_only("occl's bootstrap")

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TARGET = os.path.join(REPO, "tests", "scripts", "stranger_target.py")
# As torch prefixes it; 1: the first generation of bootstrap keys in a new store.
ADDRESS_KEY = "default_pg/0//cpu//occl/1/collective/address/0"
ATTEMPTS = 10_000


def _hello(rank=1, size=2, **fields):
    return hello(rank, size, os.urandom(16), **fields)  # a random secret: never the group's


def _malformed(rng):
    """One stranger's bytes: never a valid Hello (the secret is never known)."""
    kind = rng.randrange(7)
    if kind == 0:
        return os.urandom(rng.randrange(0, 64))
    if kind == 1:
        return _hello()[: rng.randrange(1, 72)]  # truncated
    if kind == 2:
        return _hello()  # the right shape, a wrong secret
    if kind == 3:
        return _hello(rank=rng.choice([-1, 0, 2, 1 << 30]))
    if kind == 4:
        return _hello(size=rng.choice([0, 1, 3, -2]))
    if kind == 5:
        return _hello(magic=rng.getrandbits(32), version=rng.getrandbits(32))
    return os.urandom(rng.randrange(64, 65536))  # far more than a Hello


def _flood(host, port, rng):
    silent = []  # connections that never say anything, held open through the flood
    for i in range(ATTEMPTS):
        with socket.create_connection((host, port), timeout=5) as s:
            if i % 100 == 0:
                silent.append(socket.create_connection((host, port), timeout=5))
            try:
                s.sendall(_malformed(rng))
                if i % 3 == 0:  # some vanish with a reset instead of a close
                    s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            except OSError:
                pass  # the rank hung up on us first: fine
    return silent


def _start_rank(rank, port, **extra_env):
    env = {**os.environ, **extra_env, "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port),
           "TORCHELASTIC_USE_AGENT_STORE": "True", "RANK": str(rank), "WORLD_SIZE": "2",
           "OCCL_TRANSPORT": "tcp", "OMP_NUM_THREADS": "1",
           "PYTHONPATH": REPO + os.pathsep + os.environ.get("PYTHONPATH", "")}
    return subprocess.Popen([sys.executable, TARGET], env=env, stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def test_flood_of_strangers_during_bootstrap_leaves_the_group_intact():
    store = dist.TCPStore("127.0.0.1", 0, is_master=True, wait_for_workers=False,
                          timeout=datetime.timedelta(seconds=60))
    ranks = [_start_rank(0, store.port)]
    try:
        store.wait([ADDRESS_KEY])
        host, port = store.get(ADDRESS_KEY).decode().split()[:2]
        start = time.monotonic()
        silent = _flood(host, int(port), random.Random(7))
        flood_seconds = time.monotonic() - start
        assert ranks[0].poll() is None, f"rank 0 died under the flood: {ranks[0].stderr.read()}"

        ranks.append(_start_rank(1, store.port))
        for rank, proc in enumerate(ranks):
            line = proc.stdout.readline()
            assert line.strip() == "ok 3.0", (
                f"rank {rank} after {ATTEMPTS} strangers in {flood_seconds:.1f}s: {line!r} "
                f"{proc.stderr.read() if proc.poll() is not None else ''}")
        for s in silent:
            s.close()

        # Bootstrap is over: the port is closed, a stranger cannot even connect.
        with pytest.raises(ConnectionRefusedError):
            socket.create_connection((host, int(port)), timeout=5).close()
        for rank, proc in enumerate(ranks):
            proc.stdin.write("\n")
            proc.stdin.flush()
        for rank, proc in enumerate(ranks):
            assert proc.stdout.readline().strip() == "ok 3.0", f"rank {rank}: second allreduce"
            proc.stdin.write("\n")
            proc.stdin.flush()
            assert proc.wait(timeout=30) == 0, f"rank {rank}: {proc.stderr.read()}"
    finally:
        for proc in ranks:
            if proc.poll() is None:
                proc.kill()
            proc.wait(timeout=10)


def _hold_silent_connections(host, port, flooding):
    held = []
    while flooding.is_set():
        try:
            held.append(socket.create_connection((host, port), timeout=1))
        except OSError:
            time.sleep(0.01)  # refused once the rank stops listening
        if len(held) > 300:
            held.pop(0).close()
    for s in held:
        s.close()


@pytest.mark.parametrize("keyed", [False, True], ids=["no-key", "key"])
def test_strangers_that_keep_every_slot_full_cannot_crowd_out_a_rank(keyed):
    """Eight threads hold open more silent connections than a rank hears out at once, while rank
    1 joins: a connection that showed the secret keeps its place, and one crowded out before it
    could is tried again."""
    key = {"OCCL_AUTH_KEY": secrets.token_hex(32)} if keyed else {}
    for group in range(2):
        store = dist.TCPStore("127.0.0.1", 0, is_master=True, wait_for_workers=False,
                              timeout=datetime.timedelta(seconds=60))
        ranks = [_start_rank(0, store.port, **key)]
        flooding = threading.Event()
        flooding.set()
        try:
            store.wait([ADDRESS_KEY])
            host, port = store.get(ADDRESS_KEY).decode().split()[:2]
            for _ in range(8):
                threading.Thread(target=_hold_silent_connections,
                                 args=(host, int(port), flooding), daemon=True).start()
            time.sleep(0.5)
            ranks.append(_start_rank(1, store.port, **key))
            for rank, proc in enumerate(ranks):
                line = proc.stdout.readline()
                assert line.strip() == "ok 3.0", (
                    f"group {group}, rank {rank}: {line!r} "
                    f"{proc.stderr.read() if proc.poll() is not None else ''}")
        finally:
            flooding.clear()
            for proc in ranks:
                proc.kill()
                proc.wait(timeout=10)
