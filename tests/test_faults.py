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

SMALL, LARGE = 16, 1 << 16  # the direct allreduce and the ring (or single copies)


def _premul(factor):
    return dist._make_nccl_premul_sum(factor)


def _reduce_scatter(op, dtype=torch.float32):
    ws = dist.get_world_size()
    dist.reduce_scatter_tensor(torch.zeros(N, dtype=dtype), torch.ones(N * ws, dtype=dtype), op=op)


CALLS = {
    "all_reduce": lambda: dist.all_reduce(torch.ones(N)),
    "all_reduce_f64": lambda: dist.all_reduce(torch.ones(N, dtype=torch.float64)),
    "all_reduce_short": lambda: dist.all_reduce(torch.ones(1000)),
    "all_reduce_max": lambda: dist.all_reduce(torch.ones(N), op=dist.ReduceOp.MAX),
    "all_reduce_small": lambda: dist.all_reduce(torch.ones(SMALL)),
    "all_reduce_small_max": lambda: dist.all_reduce(torch.ones(SMALL), op=dist.ReduceOp.MAX),
    "all_reduce_large": lambda: dist.all_reduce(torch.ones(LARGE)),
    "all_reduce_large_max": lambda: dist.all_reduce(torch.ones(LARGE), op=dist.ReduceOp.MAX),
    "premul_scalar": lambda: dist.all_reduce(torch.ones(N), op=_premul(0.5)),
    "premul_tensor": lambda: dist.all_reduce(torch.ones(N), op=_premul(torch.tensor([0.5]))),
    "reduce_scatter_sum": lambda: _reduce_scatter(dist.ReduceOp.SUM),
    "reduce_scatter_product": lambda: _reduce_scatter(dist.ReduceOp.PRODUCT),
    "reduce_min": lambda: dist.reduce(torch.ones(N), dst=0, op=dist.ReduceOp.MIN),
    "reduce_sum": lambda: dist.reduce(torch.ones(N), dst=0),
    "coalesced_one": lambda: dist.all_reduce_coalesced([torch.ones(12)]),
    "coalesced_two": lambda: dist.all_reduce_coalesced([torch.ones(4), torch.ones(8)]),
    "broadcast": lambda: dist.broadcast(torch.ones(N), src=0),
    "broadcast_root1": lambda: dist.broadcast(torch.ones(N), src=1),
    "all_gather": lambda: dist.all_gather(
        [torch.zeros(N) for _ in range(dist.get_world_size())], torch.ones(N)),
    "barrier": lambda: dist.barrier(),
    "all_reduce_empty": lambda: dist.all_reduce(torch.ones(0)),
    "all_reduce_empty_max": lambda: dist.all_reduce(torch.ones(0), op=dist.ReduceOp.MAX),
}

# (what rank 0 calls, what rank 1 calls, how rank 0's call reads, how rank 1's call reads)
MISMATCHES = {
    "op": ("all_reduce", "broadcast", "allreduce(float32, 1024 elements, SUM)",
           "broadcast(float32, 1024 elements, root 0)"),
    "dtype": ("all_reduce", "all_reduce_f64", "allreduce(float32, 1024 elements, SUM)",
              "allreduce(float64, 1024 elements, SUM)"),
    "size": ("all_reduce", "all_reduce_short", "allreduce(float32, 1024 elements, SUM)",
             "allreduce(float32, 1000 elements, SUM)"),
    "root": ("broadcast", "broadcast_root1", "broadcast(float32, 1024 elements, root 0)",
             "broadcast(float32, 1024 elements, root 1)"),
    "collective": ("all_gather", "barrier", "allgather(float32, 1024 elements)", "barrier()"),
    "reduce_op_small": ("all_reduce_small", "all_reduce_small_max",
                        "allreduce(float32, 16 elements, SUM)",
                        "allreduce(float32, 16 elements, MAX)"),
    "reduce_op_large": ("all_reduce_large", "all_reduce_large_max",
                        "allreduce(float32, 65536 elements, SUM)",
                        "allreduce(float32, 65536 elements, MAX)"),
    "premul_factor_kind": ("premul_scalar", "premul_tensor",
                           "allreduce(float32, 1024 elements, PREMUL_SUM(scalar factor))",
                           "allreduce(float32, 1024 elements, PREMUL_SUM(tensor factor))"),
    "reduce_scatter_op": ("reduce_scatter_sum", "reduce_scatter_product",
                          "_reduce_scatter_base(float32, 1024 elements, SUM)",
                          "_reduce_scatter_base(float32, 1024 elements, PRODUCT)"),
    "reduce_op_with_root": ("reduce_min", "reduce_sum",
                            "reduce(float32, 1024 elements, root 0, MIN)",
                            "reduce(float32, 1024 elements, root 0, SUM)"),
    "tensor_count": ("coalesced_one", "coalesced_two",
                     "allreduce_coalesced(float32, 12 elements, SUM)",
                     "allreduce_coalesced(float32, 2 tensors, 12 elements, SUM)"),
    # A small allreduce carries its signature in its data message; PREMUL_SUM and a large one
    # send it in a round of its own first: each side reads and drops what the other sent with it.
    "carried_and_premul": ("all_reduce", "premul_scalar", "allreduce(float32, 1024 elements, SUM)",
                           "allreduce(float32, 1024 elements, PREMUL_SUM(scalar factor))"),
    "carried_and_large": ("all_reduce_small", "all_reduce_large",
                          "allreduce(float32, 16 elements, SUM)",
                          "allreduce(float32, 65536 elements, SUM)"),
    # Nothing to send: the signatures still meet.
    "empty_reduce_op": ("all_reduce_empty", "all_reduce_empty_max",
                        "allreduce(float32, 0 elements, SUM)",
                        "allreduce(float32, 0 elements, MAX)"),
}


@pytest.mark.parametrize("case", sorted(MISMATCHES))
def test_mismatched_collectives_fail_on_every_rank_naming_both(occl_pool, case):
    _, _, first, second = MISMATCHES[case]
    sequences = set()
    results = occl_pool.run(w_mismatch_of, MISMATCHES[case][:2])
    for rank, (error, elapsed, after) in enumerate(results):
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


ROWS = 100_000  # float32 rows of the all_to_all cases: 400000 bytes a slice
SLICE = 4 * ROWS


def _all_to_all_single(rows_to_rank0):
    """ROWS to every rank (rows_to_rank0 to rank 0); expects ROWS from every rank."""
    ws = dist.get_world_size()
    splits = [rows_to_rank0] + [ROWS] * (ws - 1)
    dist.all_to_all_single(torch.empty(ws * ROWS), torch.ones(sum(splits)),
                           output_split_sizes=[ROWS] * ws, input_split_sizes=splits)


def _all_to_all(numel_to_rank0):
    ws = dist.get_world_size()
    dist.all_to_all([torch.empty(4) for _ in range(ws)],
                    [torch.ones(numel_to_rank0)] + [torch.ones(4) for _ in range(ws - 1)])


def _sparse(*shape):
    return torch.sparse_coo_tensor(torch.zeros(len(shape), 1, dtype=torch.long), torch.ones(1),
                                   shape)


CALLS.update({
    "coalesced_4_8": lambda: dist.all_reduce_coalesced([torch.ones(4), torch.ones(8)]),
    "coalesced_8_4": lambda: dist.all_reduce_coalesced([torch.ones(8), torch.ones(4)]),
    "all_to_all_single": lambda: _all_to_all_single(ROWS),
    "all_to_all_single_more_to_0": lambda: _all_to_all_single(2 * ROWS),
    "all_to_all": lambda: _all_to_all(4),
    "all_to_all_more_to_0": lambda: _all_to_all(8),
    "sparse_2x3": lambda: dist.all_reduce(_sparse(2, 3)),
    "sparse_3x2": lambda: dist.all_reduce(_sparse(3, 2)),
    "dense_6": lambda: dist.all_reduce(torch.ones(6)),
})

# case -> (the call of each rank, what each rank must say after "mismatched collectives at
# sequence N: ")
SHAPE_MISMATCHES = {
    "coalesced_sizes": (("coalesced_4_8", "coalesced_8_4"), [
        "rank 0 and rank 1 both called allreduce_coalesced(float32, 2 tensors, 12 elements, SUM), "
        "with tensors of other sizes (rank 0's: [4, 8])",
        "rank 1 and rank 0 both called allreduce_coalesced(float32, 2 tensors, 12 elements, SUM), "
        "with tensors of other sizes (rank 1's: [8, 4])"]),
    "sparse_shapes": (("sparse_2x3", "sparse_3x2"), [
        "rank 0 and rank 1 both called allreduce(float32 sparse, 6 elements, SUM), with tensors "
        "of other shapes (rank 0's: [2, 3])",
        "rank 1 and rank 0 both called allreduce(float32 sparse, 6 elements, SUM), with tensors "
        "of other shapes (rank 1's: [3, 2])"]),
    "sparse_and_dense": (("sparse_2x3", "dense_6"), [
        "rank 0 called allreduce(float32 sparse, 6 elements, SUM), "
        "rank 1 called allreduce(float32, 6 elements, SUM)",
        "rank 1 called allreduce(float32, 6 elements, SUM), "
        "rank 0 called allreduce(float32 sparse, 6 elements, SUM)"]),
    # Rank 1 sends rank 0 twice what rank 0 expects; with 3 ranks, rank 2 (whose own pairs
    # agree) must raise too: a rank that went on would wait for data that never comes.
    "all_to_all_single": (("all_to_all_single", "all_to_all_single_more_to_0"),
                          [f"alltoall_base(float32): rank 1 sends rank 0 {2 * SLICE} bytes, "
                           f"rank 0 expects {SLICE}"] * 2),
    "all_to_all_single_3_ranks": (
        ("all_to_all_single", "all_to_all_single_more_to_0", "all_to_all_single"),
        [f"alltoall_base(float32): rank 1 sends rank 0 {2 * SLICE} bytes, "
         f"rank 0 expects {SLICE}"] * 3),
    "all_to_all_3_ranks": (("all_to_all", "all_to_all_more_to_0", "all_to_all"),
                           ["alltoall(float32): rank 1 sends rank 0 32 bytes, rank 0 expects 16"]
                           * 3),
    # A broadcast carries its signature to every rank, the ranks that receive nothing included.
    "broadcast_3_ranks": (("broadcast", "broadcast", "all_reduce"), [
        "rank 0 called broadcast(float32, 1024 elements, root 0), "
        "rank 2 called allreduce(float32, 1024 elements, SUM)",
        "rank 1 called broadcast(float32, 1024 elements, root 0), "
        "rank 2 called allreduce(float32, 1024 elements, SUM)",
        "rank 2 called allreduce(float32, 1024 elements, SUM), "
        "rank 0 called broadcast(float32, 1024 elements, root 0)"]),
}


def w_mismatch_of(rank, ws, calls):
    """Rank r calls CALLS[calls[r]] after a matching collective, then checks the group works."""
    dist.all_reduce(torch.ones(4))
    start = time.monotonic()
    try:
        CALLS[calls[rank]]()
        error = None
    except RuntimeError as e:
        error = str(e)
    elapsed = time.monotonic() - start
    t = torch.full((8,), float(rank))
    dist.all_reduce(t)
    return error, elapsed, t.tolist()


@pytest.mark.parametrize("case", sorted(SHAPE_MISMATCHES))
def test_tensor_sizes_and_pairs_that_disagree_fail_on_every_rank(dist_pool, case):
    """What the coalesced ops' tensors hold, a sparse tensor's shape and what each pair of an
    all_to_all exchanges must agree: every rank raises before any data moves (no one-sided
    success), naming both sides; then the group still works."""
    calls, messages = SHAPE_MISMATCHES[case]
    ws = len(calls)
    results = dist_pool(ws).run(w_mismatch_of, calls)
    for rank, (error, elapsed, after) in enumerate(results):
        assert error is not None, f"rank {rank}: the mismatched call returned"
        assert re.search(r"mismatched collectives at sequence \d+: " + re.escape(messages[rank]),
                         error), f"rank {rank}: {error}\nexpected: {messages[rank]}"
        assert elapsed < 5, f"rank {rank}: took {elapsed:.1f}s to notice"
        assert after == [ws * (ws - 1) / 2] * 8, f"rank {rank}: the group is broken: {after}"


def w_broadcast_of_another_dtype(rank, ws):
    """Rank 0 broadcasts float32, rank 1 expects int32 of as many bytes."""
    dist.all_reduce(torch.ones(4))
    tensor = torch.ones(N) if rank == 0 else torch.full((N,), 7, dtype=torch.int32)
    try:
        dist.broadcast(tensor, src=0)
        error = None
    except RuntimeError as e:
        error = str(e)
    return error, tensor.tolist()


def test_a_mismatched_broadcast_leaves_the_receivers_tensor_alone(occl_pool):
    """The root's data comes in the message that carries its signature: a receiver that runs
    another collective must drop it, not write it over its own tensor."""
    (error0, _), (error1, received) = occl_pool.run(w_broadcast_of_another_dtype)
    for rank, error in enumerate((error0, error1)):
        assert error is not None and "mismatched collectives" in error, f"rank {rank}: {error}"
    assert "rank 1 called broadcast(int32, 1024 elements, root 0), rank 0 called " \
           "broadcast(float32, 1024 elements, root 0)" in error1, error1
    assert received == [7] * N, "rank 1's tensor was written by a broadcast that did not match"


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
        # Its own timeout, or the report of the other rank that gave up first (the same words).
        assert re.search(rf"^occl.allreduce #0 in group 0 \(rank {rank} of 3\): (rank [01] gave up: "
                         rf"occl.allreduce #0 in group 0 \(rank [01] of 3\): )?timed out after "
                         r"2000 ms, rank\(s\) 2 did not join; this rank's flight recorder: ",
                         error), f"rank {rank}: {error}"


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
