"""Bad arguments through torch.distributed's public calls: what the spec's checks cannot say.

The generated conformance suite (generated/tests/test_occl_conformance.py) breaks every check of
every op through the backend object and asserts its exact message, one way per check. What is
left here: the other ways to break a check whose message occl's runtime words (every reason of
split_sizes_unfit_reason, a negative root), and what depends on torch's Python layer: the error
is raised at the call itself (async_op=True returns no Work), a bad op inside batch_isend_irecv,
and the calls torch refuses before any backend sees them (why the generated tests call the
backend object). All at world size 2.
"""

from __future__ import annotations

import re
from datetime import timedelta

import pytest
import torch
import torch.distributed as dist

WS = 2  # the messages below are written for world size 2
ERRORS = (RuntimeError, ValueError)
PEER = "expected another rank of the group (0 <= rank < 2, not this rank, {rank})"


def _pg():
    return dist.distributed_c10d._get_default_group()


def _z(*shape, dtype=torch.float32):
    return torch.zeros(shape, dtype=dtype)


# ---- the runtime's reasons: one per way to break the check ---------------------------------

SPLITS = "occl.alltoall_base: {} does not fit {}: "


def w_runtime_reasons(rank, ws):
    bad = [
        (lambda: dist.all_to_all_single(_z(3), _z(3), output_split_sizes=[1, 2],
                                        input_split_sizes=[1, 1]),
         SPLITS.format("input_split_sizes", "input_tensor")
         + "the split sizes sum to 2, expected its first dimension, 3"),
        (lambda: dist.all_to_all_single(_z(3, 2), _z(4, 2), output_split_sizes=[2, 2]),
         SPLITS.format("output_split_sizes", "output_tensor")
         + "the split sizes sum to 4, expected its first dimension, 3"),
        (lambda: dist.all_to_all_single(_z(3), _z(3)),
         SPLITS.format("input_split_sizes", "input_tensor")
         + "no split sizes means equal splits, but its first dimension, 3, does not divide by the"
         " world size, 2"),
        (lambda: dist.all_to_all_single(_z(3), _z(3), output_split_sizes=[1, 2],
                                        input_split_sizes=[-1, 4]),
         SPLITS.format("input_split_sizes", "input_tensor") + "split size 0 is -1, expected >= 0"),
        (lambda: dist.broadcast(_z(4), src=-1),
         f"occl.broadcast: opts.rootRank is -1, expected a rank in [0, {ws})"),
    ]
    return raise_at_call_and_group_still_works(bad, ws)


def test_runtime_reasons(dist_pool, backend):
    if backend != "occl":
        pytest.skip("occl messages")
    assert dist_pool(WS).run(w_runtime_reasons) == [True] * WS


# ---- errors are raised at the call, before any communication ------------------------------


def w_error_raised_at_call(rank, ws):
    """With async_op=True the bad call itself raises; no Work is returned."""
    bad = [
        (lambda: dist.all_reduce(torch.zeros(4), op=dist.ReduceOp.BAND, async_op=True),
         "occl.allreduce: tensors[0] has dtype Float, which reduce op BAND does not support: "),
        (lambda: dist.all_gather([torch.zeros(4), torch.zeros(6)], torch.zeros(4), async_op=True),
         "occl.allgather: output_tensors[0][1] has 6 elements, expected 4 "
         "(= input_tensors[0].numel())"),
        (lambda: dist.broadcast(torch.zeros(4), src=ws, async_op=True),
         f"occl.broadcast: opts.rootRank is {ws}, expected a rank in [0, {ws})"),
        (lambda: dist.all_to_all_single(_z(3), _z(3), input_split_sizes=[1, 1],
                                        output_split_sizes=[1, 2], async_op=True),
         "occl.alltoall_base: input_split_sizes does not fit input_tensor: "),
        (lambda: dist.reduce(_z(4), dst=ws, async_op=True),
         f"occl.reduce: opts.rootRank is {ws}, expected a rank in [0, {ws})"),
        (lambda: dist.gather(_z(4), [_z(4)], dst=rank, async_op=True),
         "occl.gather: output_tensors[0] has 1 tensors, expected 2 (= world size)"),
        (lambda: dist.isend(_z(4), rank),
         f"occl.send: dst_rank is {rank}, " + PEER.format(rank=rank)),
        (lambda: dist.irecv(_z(4), 9),
         "occl.recv: src_rank is 9, " + PEER.format(rank=rank)),
        (lambda: dist.all_gather_coalesced([[_z(4)], [_z(5)]], [_z(4)], async_op=True),
         "occl.allgather_coalesced: output_tensor_lists[1][0] has 5 elements, expected 4"),
    ]
    return raise_at_call_and_group_still_works(bad, ws)


def raise_at_call_and_group_still_works(bad_calls, ws):
    """Each (call, message): the call raises at once (no .wait()); then a good all_reduce works."""
    for call, msg in bad_calls:
        with pytest.raises(ERRORS, match=re.escape(msg)):
            call()
    t = torch.ones(2)
    dist.all_reduce(t)
    assert t.tolist() == [float(ws)] * 2
    return True


def test_error_raised_at_call(dist_pool, backend):
    if backend != "occl":
        pytest.skip("occl messages; gloo reports some of these only from wait()")
    assert dist_pool(WS).run(w_error_raised_at_call) == [True] * WS


def w_bad_batch_isend_irecv(rank, ws):
    """A bad op inside batch_isend_irecv (send to self) raises at the call with occl's message.

    torch then leaves the group in coalescing mode: _coalescing_manager never reaches its
    cleanup, so `_world.pg_coalesce_state[group]` stays set (later dist.all_reduce calls on the
    group are silently captured instead of run, and the next batch_isend_irecv raises "non-empty
    op list"), and the backend never gets endCoalescing. That is torch's behaviour for any
    coalescing backend, not occl's; this test pins it down and shows the group works again
    once both are closed by hand.
    """
    from torch.distributed.distributed_c10d import _world

    with pytest.raises(ERRORS, match=re.escape(f"occl.send: dst_rank is {rank}, ")):
        dist.batch_isend_irecv([dist.P2POp(dist.isend, _z(4), rank),
                                dist.P2POp(dist.irecv, _z(4), 1 - rank)])
    assert _pg() in _world.pg_coalesce_state, "torch cleaned up its coalescing state"
    _world.pg_coalesce_state.pop(_pg())
    work = _pg()._end_coalescing(torch.device("cpu"))
    if work is not None:
        work.wait()
    out = _z(4)
    reqs = dist.batch_isend_irecv([dist.P2POp(dist.isend, torch.full((4,), float(rank)),
                                              1 - rank),
                                   dist.P2POp(dist.irecv, out, 1 - rank)])
    for r in reqs:
        r.wait()
    assert out.tolist() == [float(1 - rank)] * 4, out
    t = torch.ones(2)
    dist.all_reduce(t)
    assert t.tolist() == [float(ws)] * 2
    return True


def test_bad_op_in_batch_isend_irecv(fresh_pool, backend):
    if backend != "occl":
        pytest.skip("occl messages")
    # A private pool: the case leaves torch's coalescing state behind until repaired.
    assert fresh_pool(WS).run(w_bad_batch_isend_irecv) == [True] * WS


# ---- documented torch interceptions (why the generated tests call the backend object) -------


def w_torch_intercepts_minimal(rank, ws):
    # A meta tensor never reaches any backend through dist.all_reduce: c10d's Meta kernels
    # return without communicating.
    m = torch.zeros(4, device="meta")
    work = dist.all_reduce(m, async_op=True)
    if work is not None:
        work.wait(timedelta(seconds=5))
    # Mixed dtypes are rejected by the Python layer with ValueError.
    with pytest.raises(ValueError, match="Invalid usage of tensors with different dtypes"):
        dist.all_gather([torch.zeros(4), torch.zeros(4, dtype=torch.float64)], torch.zeros(4))
    with pytest.raises(ValueError, match="Invalid usage of tensors with different dtypes"):
        dist.reduce_scatter(torch.zeros(4), [torch.zeros(4), torch.zeros(4, dtype=torch.float64)])
    t = torch.ones(2)
    dist.all_reduce(t)
    assert t.tolist() == [float(ws)] * 2
    return True


def w_torch_intercepts(rank, ws):
    intercepted = [
        (lambda: dist.send(_z(4), rank),
         "Invalid destination rank: destination rank should not be the same as the rank of "
         "the current process"),
        (lambda: dist.gather(_z(4), [_z(4), _z(4)], dst=1 - rank),
         "Argument ``gather_list`` must NOT be specified on non-destination ranks"),
        (lambda: dist.gather(_z(4), None, dst=rank),
         "Argument ``gather_list`` must be specified on destination rank"),
        (lambda: dist.scatter(_z(4), [_z(4), _z(4)], src=1 - rank),
         "Argument ``scatter_list`` must NOT be specified on non-source ranks"),
        (lambda: dist.scatter(_z(4), None, src=rank),
         "Argument ``scatter_list`` must be specified on source rank"),
        (lambda: dist.all_to_all_single(_z(4, dtype=torch.float64), _z(4)),
         "Invalid usage of tensors with different dtypes"),
        (lambda: dist.all_to_all([_z(2), _z(2)], [_z(2), _z(2, dtype=torch.float64)]),
         "Invalid usage of tensors with different dtypes"),
        (lambda: dist.all_reduce_coalesced([_z(3), _z(3, dtype=torch.float64)]),
         "Invalid usage of tensors with different dtypes"),
        (lambda: dist.all_gather_coalesced([[_z(3), _z(3, dtype=torch.float64)]] * 2,
                                           [_z(3), _z(3, dtype=torch.float64)]),
         "Invalid usage of tensors with different dtypes"),
    ]
    for call, msg in intercepted:
        with pytest.raises(ValueError, match=re.escape(msg)):
            call()
    with pytest.raises(NotImplementedError, match=re.escape(
            "Could not run 'c10d::alltoall_base_' with arguments from the 'SparseCPU' backend")):
        dist.all_to_all_single(_z(4), _z(4).to_sparse())
    with pytest.raises(NotImplementedError, match="There were no tensor arguments"):
        dist.all_reduce_coalesced([])
    t = torch.ones(2)
    dist.all_reduce(t)
    assert t.tolist() == [float(ws)] * 2
    return True


def test_torch_intercepts_before_backend(dist_pool):
    """Documents torch-side behaviour; if it changes, the generated tests' calls gain paths."""
    assert dist_pool(WS).run(w_torch_intercepts_minimal) == [True] * WS
    assert dist_pool(WS).run(w_torch_intercepts) == [True] * WS
