"""Ranks as separate processes (tests/scripts/bootstrap_worker.py) joining through a TCPStore that
the test holds, for the tests of group formation: each prints `ok`, or `error <seconds since its
init began> <time.time()> <message>`."""

from __future__ import annotations

import os
import re
import subprocess
import sys

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
WORKER = os.path.join(REPO, "tests", "scripts", "bootstrap_worker.py")
TRANSPORTS = ["auto", "tcp"]
# As torch prefixes them; 1: the first generation of bootstrap keys in a new store.
KEYS = "default_pg/0//cpu//occl/1/"


def rank_env(transport, **extra):
    return {**os.environ, "OCCL_TRANSPORT": transport, "OMP_NUM_THREADS": "1",
            "PYTHONPATH": REPO + os.pathsep + os.environ.get("PYTHONPATH", ""), **extra}


def start_rank(rank, world_size, store, transport, **extra_env):
    env = rank_env(transport, MASTER_ADDR="127.0.0.1", MASTER_PORT=str(store.port),
                   TORCHELASTIC_USE_AGENT_STORE="True", RANK=str(rank),
                   WORLD_SIZE=str(world_size), **extra_env)
    return subprocess.Popen([sys.executable, WORKER], env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


def failure(rank, proc, timeout=90):
    """(seconds since its init began, time.time() when it failed, message) of a rank that must
    fail."""
    out, err = proc.communicate(timeout=timeout)
    match = re.match(r"error (\S+) (\S+) (.*)", out.strip())
    assert match, f"rank {rank}: {out!r} {err[-2000:]}"
    return float(match[1]), float(match[2]), match[3]


def succeeded(rank, proc, timeout=90):
    out, err = proc.communicate(timeout=timeout)
    assert out.strip() == "ok" and proc.returncode == 0, f"rank {rank}: {out!r} {err[-2000:]}"


def stop(procs):
    for proc in procs:
        if proc.poll() is None:
            proc.kill()
        proc.wait(timeout=10)
