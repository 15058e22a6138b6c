"""Ranks that die while their group forms, and jobs that torchrun restarts.

A rank killed during bootstrap: the survivors raise within 5 s naming it (not after the 60 s
init timeout), whichever rank it was and on both transports. A job restarted by torchrun (whose
store outlives every attempt, with every key an attempt left in it): each attempt forms a fresh
group, with static and with c10d rendezvous.
"""

from __future__ import annotations

import datetime
import os
import re
import signal
import socket
import subprocess
import sys
import time

import pytest
import torch.distributed as dist

from dist_harness import occl_only
from rank_processes import KEYS, REPO, TRANSPORTS, failure, rank_env, start_rank, stop

pytestmark = occl_only("occl's bootstrap")

RESTART_WORKER = os.path.join(REPO, "tests", "scripts", "restart_worker.py")


# (victim, ranks started before it is killed): each kill lands at another step of bootstrap.
# 0: listening, before anyone connects; the others are refused where it published its address.
# 1: connected to rank 0, waiting for rank 2; rank 2 is refused by it, rank 0 loses its link.
# 2: connected to rank 0, waiting for rank 1's address; rank 1 finds it gone when it probes it.
DEATHS = {0: [0], 1: [0, 1], 2: [0, 2]}


@pytest.mark.parametrize("transport", TRANSPORTS)
@pytest.mark.parametrize("victim", sorted(DEATHS), ids=lambda v: f"rank{v}dies")
def test_survivors_of_a_death_during_bootstrap_name_it_within_5s(victim, transport):
    store = dist.TCPStore("127.0.0.1", 0, is_master=True, wait_for_workers=False,
                          timeout=datetime.timedelta(seconds=60))
    procs = {r: start_rank(r, 3, store, transport) for r in DEATHS[victim]}
    try:
        store.wait([KEYS + f"collective/address/{victim}"])
        time.sleep(1.0)  # let it go on to its next step: connecting, or waiting
        procs[victim].send_signal(signal.SIGKILL)
        killed_at = time.time()
        procs[victim].wait(timeout=10)
        for r in range(3):
            if r not in procs:
                procs[r] = start_rank(r, 3, store, transport)
        for r, proc in sorted(procs.items()):
            if r == victim:
                continue
            since_init, failed_at, message = failure(r, proc)
            # From the kill for the ranks waiting already, else from the start of their init.
            seconds = failed_at - killed_at if r in DEATHS[victim] else since_init
            assert f"rank {victim} left during bootstrap" in message, f"rank {r}: {message}"
            assert seconds < 5, f"rank {r}: raised after {seconds:.1f}s: {message}"
    finally:
        stop(procs.values())


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_a_restart_after_rank_0_accepted_rank_1_forms_the_group(transport):
    """The interrupted attempt left its pointer and rank 0's record of accepting rank 1. The new
    rank 1 starts first, follows that pointer and is refused there: an old attempt, not an
    impostor, so it starts over once the new rank 0 starts."""
    store = dist.TCPStore("127.0.0.1", 0, is_master=True, wait_for_workers=False,
                          timeout=datetime.timedelta(seconds=60))
    old = [start_rank(r, 3, store, transport) for r in (0, 1)]
    new = {}
    try:
        store.wait([KEYS + "collective/joined/0/1"])
        stop(old)
        new[1] = start_rank(1, 3, store, transport)
        time.sleep(1.0)  # within the 2 s it waits for the pointer to move on
        new.update({r: start_rank(r, 3, store, transport) for r in (0, 2)})
        for rank, proc in sorted(new.items()):
            out, err = proc.communicate(timeout=90)
            assert out.strip() == "ok", f"rank {rank}: {out!r} {err[-2000:]}"
    finally:
        stop(old + list(new.values()))


def _free_port():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


RENDEZVOUS = {
    "static": ["--master-addr", "127.0.0.1", "--master-port", "{port}"],
    "c10d": ["--standalone"],
}
RESTARTS = 3


@pytest.mark.parametrize("transport", TRANSPORTS)
@pytest.mark.parametrize("rendezvous", sorted(RENDEZVOUS))
def test_every_torchrun_restart_forms_a_fresh_group(rendezvous, transport):
    launch = [arg.format(port=_free_port()) for arg in RENDEZVOUS[rendezvous]]
    result = subprocess.run(
        [sys.executable, "-m", "torch.distributed.run", *launch, "--nproc-per-node", "2",
         "--max-restarts", str(RESTARTS), "--monitor-interval", "0.1", RESTART_WORKER],
        env=rank_env(transport), capture_output=True, text=True, timeout=240)
    done = set(re.findall(r"attempt (\d+) rank (\d+) ok ", result.stdout))
    expected = {(str(a), str(r)) for a in range(RESTARTS + 1) for r in range(2)}
    assert result.returncode == 0 and done == expected, (
        f"rc {result.returncode}, missing {sorted(expected - done)}\n{result.stdout}\n"
        f"{result.stderr[-4000:]}")


def test_torchrun_restarts_after_a_worker_dies_in_a_collective():
    # Every attempt but the last loses a random worker in an all_reduce; the others raise at
    # once (not at the 30 s timeout), and the last attempt forms a group that works.
    before = sorted(os.listdir("/dev/shm"))
    result = subprocess.run(
        [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "3",
         "--max-restarts", str(RESTARTS), "--monitor-interval", "0.1", RESTART_WORKER],
        env=rank_env("auto", OCCL_TEST_KILL="1"), capture_output=True, text=True, timeout=240)
    output = f"rc {result.returncode}\n{result.stdout}\n{result.stderr[-4000:]}"
    assert result.returncode == 0, output
    raised = re.findall(r"attempt (\d+) rank \d+ raised after (\S+) s: (.*?(?=attempt|$))",
                        result.stdout, re.MULTILINE)
    assert "returned" not in result.stdout, output
    assert sorted(int(a) for a, _, _ in raised) == [a for a in range(RESTARTS) for _ in "xy"], output
    for _, seconds, error in raised:
        assert float(seconds) < 10, output
        assert "closed the connection" in error or "gave up" in error, output
    # The last attempt's workers map one region each: their own group's.
    assert sorted(re.findall(rf"attempt {RESTARTS} rank (\d+) ok regions (\d+)", result.stdout)) == [
        ("0", "1"), ("1", "1"), ("2", "1")], output
    assert sorted(os.listdir("/dev/shm")) == before
