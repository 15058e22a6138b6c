"""A rank stopped (SIGSTOP) while its group runs collectives.

The others give up after their timeout and name the stopped rank as the one they wait for, also
those that were only waiting for a rank stuck behind it; once resumed, the stopped rank raises
within a second, naming the ranks that gave up (they told it why, see mesh.hpp), instead of
waiting out its own timeout for ranks that left.
"""

from __future__ import annotations

import os
import re
import signal
import threading
import time

import pytest
import torch
import torch.distributed as dist

from dist_harness import DistPool, occl_only

pytestmark = occl_only("occl's own error texts")

GROUP_TIMEOUT = 3.0
STOPPED = 1
# What a healthy rank's error must contain: the stopped rank as the one awaited, directly or as
# the rank that another awaited rank reported it was waiting for.
WAITS_FOR_STOPPED = re.compile(rf"(from|to) rank {STOPPED}$|rank\(s\) {STOPPED} did not join$")


def _pids():
    pids = [None] * dist.get_world_size()
    dist.all_gather_object(pids, os.getpid())
    dist.barrier()
    return pids


def _all_reduce_until_it_fails(x, attempts):
    start = time.monotonic()
    for _ in range(attempts):
        try:
            dist.all_reduce(x)
        except RuntimeError as e:
            return time.monotonic(), time.monotonic() - start, str(e)
    return time.monotonic(), time.monotonic() - start, None


def _wait_for(flag):
    while not os.path.exists(flag):
        time.sleep(0.01)


def w_resumed_between_collectives(rank, ws, flags):
    """Rank 1 is stopped between two collectives (once it says it is done with the first); the
    others call one and give up; rank 1, resumed, calls it too (at once: rank 0 raises the
    resumed flag before it resumes rank 1)."""
    idle, resumed_flag = flags
    pids = _pids()
    x = torch.ones(1024)
    if rank == STOPPED:
        open(idle, "w").close()
        _wait_for(resumed_flag)  # stopped in here
        return _all_reduce_until_it_fails(x, 3)
    if rank == 0:
        _wait_for(idle)
        os.kill(pids[STOPPED], signal.SIGSTOP)
    time.sleep(0.1)
    outcome = _all_reduce_until_it_fails(x, 1)
    if rank == 0:
        time.sleep(0.5)  # every healthy rank has given up by now
        open(resumed_flag, "w").close()
        resumed = time.monotonic()
        os.kill(pids[STOPPED], signal.SIGCONT)
        outcome = outcome + (resumed,)
    time.sleep(3)  # stay alive: rank 1 must learn of it through the links, not a closed socket
    return outcome


@pytest.mark.parametrize("world_size", [2, 3], ids=lambda n: f"ws{n}")
def test_a_rank_resumed_after_the_others_gave_up_fails_at_once(world_size, tmp_path):
    with DistPool(world_size, group_timeout=GROUP_TIMEOUT) as pool:
        flags = (str(tmp_path / "idle"), str(tmp_path / "resumed"))
        results = pool.run(w_resumed_between_collectives, flags, timeout=60)
    resumed = results[0][3]
    for rank, (_, elapsed, error, *_) in enumerate(results):
        if rank == STOPPED:
            continue
        assert error is not None, f"rank {rank}: returned without rank {STOPPED}"
        assert WAITS_FOR_STOPPED.search(error), f"rank {rank}: {error}"
        assert elapsed < GROUP_TIMEOUT + 2, f"rank {rank}: raised after {elapsed:.1f}s"
    failed_at, _, error = results[STOPPED]
    assert error is not None, f"rank {STOPPED}: succeeded after the others gave up"
    assert failed_at - resumed < 1.0, \
        f"rank {STOPPED}: raised {failed_at - resumed:.1f}s after it resumed: {error}"
    assert re.search(r"rank [02] gave up: .*rank\(s\) 1 did not join$", error), error


def w_stopped_in_the_middle(rank, ws, delay):
    """Rank 0 stops rank 1 while every rank runs all_reduces of 4 MiB, so that ranks end up
    waiting for ranks that wait for rank 1, some of them one collective ahead."""
    pids = _pids()
    if rank == 0:
        threading.Timer(delay, os.kill, (pids[STOPPED], signal.SIGSTOP)).start()
    outcome = _all_reduce_until_it_fails(torch.ones(1 << 20), 100_000)
    if rank == 0:
        time.sleep(0.5)
        resumed = time.monotonic()
        os.kill(pids[STOPPED], signal.SIGCONT)
        outcome = outcome + (resumed,)
        time.sleep(2)
    elif rank != STOPPED:
        time.sleep(2.5)
    return outcome


@pytest.mark.parametrize("delay", [0.3, 0.7])
def test_ranks_waiting_behind_a_stopped_rank_name_it(delay):
    with DistPool(3, group_timeout=GROUP_TIMEOUT) as pool:
        results = pool.run(w_stopped_in_the_middle, delay, timeout=60)
    for rank in (0, 2):
        _, elapsed, error, *_ = results[rank]
        assert error is not None, f"rank {rank}: returned without rank {STOPPED}"
        assert WAITS_FOR_STOPPED.search(error), f"rank {rank}: {error}"
        assert elapsed < delay + GROUP_TIMEOUT + 2, f"rank {rank}: raised after {elapsed:.1f}s"
    failed_at, _, error = results[STOPPED]
    assert error is not None, f"rank {STOPPED}: succeeded after the others gave up"
    assert failed_at - results[0][3] < 1.0, \
        f"rank {STOPPED}: raised {failed_at - results[0][3]:.1f}s after it resumed: {error}"
    assert re.search(r"rank [02] (gave up|was waiting too)", error), error
