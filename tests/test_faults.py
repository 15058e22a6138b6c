"""Faults between ranks: mismatched collectives, ranks that never join, abort and shutdown.

Every case must end in an exception from the call or from wait(), naming what went wrong, never
in a hang or a crash. (A killed peer: tests/test_shm.py, per transport.)
"""

from __future__ import annotations

import re
import time
from datetime import timedelta

import pytest
import torch
import torch.distributed as dist

from dist_harness import occl_only

pytestmark = occl_only("occl's own error texts")

N = 1024

# (what rank 0 calls, what rank 1 calls, how rank 0's call reads, how rank 1's call reads)
MISMATCHES = {
    "op": ("all_reduce", "broadcast", "allreduce(float32, 1024 elements)",
           "broadcast(float32, 1024 elements, root 0)"),
    "dtype": ("all_reduce", "all_reduce_f64", "allreduce(float32, 1024 elements)",
              "allreduce(float64, 1024 elements)"),
    "size": ("all_reduce", "all_reduce_short", "allreduce(float32, 1024 elements)",
             "allreduce(float32, 1000 elements)"),
    "root": ("broadcast", "broadcast_root1", "broadcast(float32, 1024 elements, root 0)",
             "broadcast(float32, 1024 elements, root 1)"),
    "collective": ("all_gather", "barrier", "allgather(float32, 1024 elements)", "barrier()"),
}


def _call(what):
    if what == "all_reduce":
        dist.all_reduce(torch.ones(N))
    elif what == "all_reduce_f64":
        dist.all_reduce(torch.ones(N, dtype=torch.float64))
    elif what == "all_reduce_short":
        dist.all_reduce(torch.ones(1000))
    elif what == "broadcast":
        dist.broadcast(torch.ones(N), src=0)
    elif what == "broadcast_root1":
        dist.broadcast(torch.ones(N), src=1)
    elif what == "all_gather":
        dist.all_gather([torch.zeros(N) for _ in range(dist.get_world_size())], torch.ones(N))
    elif what == "barrier":
        dist.barrier()


def w_mismatch(rank, ws, case):
    mine = MISMATCHES[case][rank]
    dist.all_reduce(torch.ones(4))  # a few matching collectives first: sequence 0, 1
    dist.all_reduce(torch.ones(4))
    start = time.monotonic()
    try:
        _call(mine)
        error = None
    except RuntimeError as e:
        error = str(e)
    elapsed = time.monotonic() - start
    # The group stays usable: every rank sent and received exactly one signature.
    t = torch.full((8,), float(rank))
    dist.all_reduce(t)
    return error, elapsed, t.tolist()


@pytest.mark.parametrize("case", sorted(MISMATCHES))
def test_mismatched_collectives_fail_on_every_rank_naming_both(occl_pool, case):
    _, _, first, second = MISMATCHES[case]
    sequences = set()
    for rank, (error, elapsed, after) in enumerate(occl_pool.run(w_mismatch, case)):
        assert error is not None, f"rank {rank}: the mismatched call returned"
        found = re.search(r"mismatched collectives at sequence (\d+): (.*)", error)
        assert found, f"rank {rank}: {error}"
        sequences.add(found.group(1))
        assert found.group(2) == (f"rank {rank} called {first if rank == 0 else second}, "
                                  f"rank {1 - rank} called {second if rank == 0 else first}"), \
            f"rank {rank}: {error}"
        assert elapsed < 5, f"rank {rank}: took {elapsed:.1f}s to notice"
        assert after == [1.0] * 8, f"rank {rank}: the group is broken after the mismatch: {after}"
    assert len(sequences) == 1, f"the ranks disagree on the sequence number: {sequences}"


def w_absent_ranks(rank, ws, group_timeout):
    if rank == ws - 1:
        return None  # alive, but never joins
    start = time.monotonic()
    try:
        dist.all_reduce(torch.ones(16))
    except RuntimeError as e:
        return time.monotonic() - start, str(e)
    return time.monotonic() - start, None


def test_timeout_names_the_op_group_sequence_and_absent_ranks(fresh_pool):
    group_timeout = 2.0
    pool = fresh_pool(3, group_timeout=group_timeout)
    results = pool.run(w_absent_ranks, group_timeout, timeout=30)
    for rank in (0, 1):
        elapsed, error = results[rank]
        assert error is not None, f"rank {rank}: returned without rank 2"
        assert elapsed < group_timeout + 2, f"rank {rank}: raised after {elapsed:.1f}s"
        assert (f"occl.allreduce #0 in group 0 (rank {rank} of 3): timed out after 2000 ms, "
                "rank(s) 2 did not join") in error, f"rank {rank}: {error}"


def w_destroy_with_ops_in_flight(rank, ws, peer_joins):
    works = []
    if peer_joins or rank == 0:
        works = [dist.all_reduce(torch.ones(1 << 20), async_op=True) for _ in range(8)]
    start = time.monotonic()
    dist.destroy_process_group()
    elapsed = time.monotonic() - start
    outcomes = []
    for work in works:
        try:
            work.wait(timeout=timedelta(seconds=10))
            outcomes.append("ok")
        except RuntimeError as e:
            outcomes.append(str(e))
    return elapsed, outcomes


def test_destroy_with_collectives_in_flight_returns(fresh_pool):
    pool = fresh_pool(2, group_timeout=3)
    for rank, (elapsed, outcomes) in enumerate(pool.run(w_destroy_with_ops_in_flight, True)):
        assert elapsed < 10, f"rank {rank}: destroy_process_group() took {elapsed:.1f}s"
        assert outcomes == ["ok"] * 8, f"rank {rank}: {outcomes}"


def test_destroy_while_a_peer_never_joins_returns_within_the_timeout(fresh_pool):
    pool = fresh_pool(2, group_timeout=3)
    elapsed, outcomes = pool.run(w_destroy_with_ops_in_flight, False)[0]
    assert elapsed < 3 + 2, f"destroy_process_group() took {elapsed:.1f}s"
    # Rank 1 destroys its group too, closing its links: rank 0's ops fail on that at once.
    assert len(outcomes) == 8 and "ok" not in outcomes, outcomes
    assert all("closed the connection" in o or "did not join" in o for o in outcomes), outcomes


def w_abort_in_flight(rank, ws):
    pg = dist.distributed_c10d._get_default_group()
    backend = pg._get_backend(torch.device("cpu"))
    if rank == 1:
        return None  # never joins: rank 0's ops stay pending until it aborts
    works = [dist.all_reduce(torch.ones(16), async_op=True) for _ in range(3)]
    time.sleep(0.5)
    start = time.monotonic()
    backend.abort()
    errors = []
    for work in works:
        try:
            work.wait(timeout=timedelta(seconds=10))
            errors.append(None)
        except RuntimeError as e:
            errors.append(str(e))
    return time.monotonic() - start, errors


def test_abort_fails_pending_collectives_at_once(fresh_pool):
    pool = fresh_pool(2, group_timeout=30)
    elapsed, errors = pool.run(w_abort_in_flight, timeout=60)[0]
    assert elapsed < 2, f"abort took {elapsed:.1f}s to fail the pending ops (timeout 30s)"
    assert all(errors), f"an op pending at abort() succeeded: {errors}"
    assert "aborted" in errors[0], errors[0]
