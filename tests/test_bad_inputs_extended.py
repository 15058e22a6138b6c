"""Bad arguments to the extended-tier ops raise at the call with `occl.<c10d method>: <label>
<rule>` (texts from the `checks:` section of spec/collectives.yaml); the group stays usable.

Every case runs at world size 2 on every rank, and every rank's call is bad in the same way, so
nothing is sent and no rank waits for another. Where a case needs a root, each rank names
itself (or the other rank) as the root, which keeps the case symmetric. Each case is followed by
a good all_reduce on the same group.

What torch (2.13) intercepts before the backend, so the case calls the ProcessGroup
(`_pg().<method>`) or the backend object (`_be().<method>`) directly instead:
  * dist.send(dst=self): ValueError "Invalid destination rank: destination rank should not be
    the same as the rank of the current process." (dist.isend to self is not intercepted: the
    send_to_self case goes through dist.isend.)
  * dist.gather with a gather_list on a non-root rank / without one on the root, and
    dist.scatter with a scatter_list on a non-source rank / without one on the source:
    ValueError "Argument ``gather_list`` must NOT be specified on non-destination ranks." etc.
  * mixed dtypes in all_to_all_single / all_to_all / all_reduce_coalesced /
    all_gather_coalesced: ValueError "Invalid usage of tensors with different dtypes".
  * a sparse tensor in all_to_all_single (and every op but all_reduce): the c10d dispatcher has
    no SparseCPU kernel (NotImplementedError "Could not run 'c10d::alltoall_base_' with
    arguments from the 'SparseCPU' backend").
  * empty tensor lists (dist.all_reduce_coalesced([]), dist.all_gather_coalesced([[], []], [])):
    the dispatcher finds no tensor to dispatch on (NotImplementedError "There were no tensor
    arguments to this function").
Not intercepted (they reach the backend through the public API): split sizes of any kind,
list lengths, numels, root ranks out of range (dist.reduce(dst=2), dist.gather(dst=2)), send and
recv peers out of range (dist.send(dst=5), dist.recv(src=7)), dist.recv(src=self), reduce op /
dtype combinations.
test_torch_intercepts_before_backend pins these down.

With OCCL_TEST_BACKEND=gloo the occl message is replaced by gloo's (where gloo rejects the case
symmetrically at all) to validate the cases themselves.
"""

from __future__ import annotations

import re

import pytest
import torch
import torch.distributed as dist
from torch._C._distributed_c10d import (
    AllgatherOptions,
    AllreduceCoalescedOptions,
    AllToAllOptions,
    GatherOptions,
    ReduceOptions,
    ScatterOptions,
)

# World size, accepted errors and the ways to reach the group and its backend, as for the
# minimal tier's bad inputs.
from test_bad_inputs import (  # noqa: E402
    ERRORS,
    WS,
    _be,
    _pg,
    raise_at_call_and_group_still_works,
)


def _wait(work):
    if work is not None:
        work.wait()


def _z(*shape, dtype=torch.float32):
    return torch.zeros(shape, dtype=dtype)


# ---- cases: fn(rank) performs one bad call ---------------------------------------------------

# alltoall_base (dist.all_to_all_single)


def case_a2a_split_sizes_sum(rank):
    dist.all_to_all_single(_z(3), _z(3), output_split_sizes=[1, 2], input_split_sizes=[1, 1])


def case_a2a_split_sizes_wrong_length(rank):
    dist.all_to_all_single(_z(3), _z(3), output_split_sizes=[1, 2], input_split_sizes=[3])


def case_a2a_output_split_sizes_sum(rank):
    dist.all_to_all_single(_z(3, 2), _z(4, 2), output_split_sizes=[2, 2])


def case_a2a_equal_splits_not_divisible(rank):
    dist.all_to_all_single(_z(3), _z(3))


def case_a2a_negative_split_size(rank):
    dist.all_to_all_single(_z(3), _z(3), output_split_sizes=[1, 2],
                           input_split_sizes=[-1, 4])


def case_a2a_mixed_dtypes(rank):
    _wait(_pg().alltoall_base(_z(4, dtype=torch.float64), _z(4), [], [], AllToAllOptions()))


def case_a2a_sparse_input(rank):
    _wait(_be().alltoall_base(_z(4), _z(4).to_sparse(), [], [], AllToAllOptions()))


def case_a2a_own_slice_mismatch(rank):
    # Rank r keeps slice r of its own input: 2 rows in, but room for 1 row out.
    out_splits = [1, 3] if rank == 0 else [3, 1]
    dist.all_to_all_single(_z(4), _z(4), output_split_sizes=out_splits,
                           input_split_sizes=[2, 2])


def case_a2a_expanded_output(rank):
    dist.all_to_all_single(_z(1).expand(4), _z(4))


# alltoall (dist.all_to_all)


def case_a2a_list_too_short(rank):
    dist.all_to_all([_z(2)], [_z(2), _z(2)])


def case_a2a_list_mixed_dtypes(rank):
    _wait(_pg().alltoall([_z(2), _z(2)], [_z(2), _z(2, dtype=torch.float64)],
                         AllToAllOptions()))


def case_a2a_list_own_numel_mismatch(rank):
    dist.all_to_all([_z(3), _z(3)], [_z(2), _z(2)])


# gather


def case_gather_list_on_non_root(rank):
    opts = GatherOptions()
    opts.rootRank = 1 - rank  # every rank is a non-root
    _wait(_be().gather([[_z(4), _z(4)]], [_z(4)], opts))


def case_gather_list_missing_on_root(rank):
    opts = GatherOptions()
    opts.rootRank = rank  # every rank is the root
    _wait(_be().gather([], [_z(4)], opts))


def case_gather_list_too_short(rank):
    dist.gather(_z(4), [_z(4)], dst=rank)


def case_gather_wrong_numel(rank):
    dist.gather(_z(4), [_z(4), _z(5)], dst=rank)


def case_gather_dst_out_of_range(rank):
    dist.gather(_z(4), None, dst=WS)


def case_gather_expanded_output(rank):
    dist.gather(_z(4), [_z(1).expand(4), _z(4)], dst=rank)


def case_gather_meta_input(rank):
    opts = GatherOptions()
    opts.rootRank = 1 - rank
    _wait(_be().gather([], [torch.zeros(4, device="meta")], opts))


# scatter


def case_scatter_list_on_non_root(rank):
    opts = ScatterOptions()
    opts.rootRank = 1 - rank
    _wait(_be().scatter([_z(4)], [[_z(4), _z(4)]], opts))


def case_scatter_list_missing_on_root(rank):
    opts = ScatterOptions()
    opts.rootRank = rank
    _wait(_be().scatter([_z(4)], [], opts))


def case_scatter_list_too_short(rank):
    dist.scatter(_z(4), [_z(4)], src=rank)


def case_scatter_wrong_numel(rank):
    dist.scatter(_z(4), [_z(4), _z(3)], src=rank)


def case_scatter_mixed_dtypes(rank):
    opts = ScatterOptions()
    opts.rootRank = rank
    _wait(_be().scatter([_z(4)], [[_z(4), _z(4, dtype=torch.int32)]], opts))


# send / recv


def case_send_to_self(rank):
    _wait(dist.isend(_z(4), rank))


def case_send_out_of_range(rank):
    dist.send(_z(4), 5)


def case_send_negative_rank(rank):
    _wait(_be().send([_z(4)], -1, 0))


def case_send_two_tensors(rank):
    _wait(_be().send([_z(4), _z(4)], 1 - rank, 0))


def case_recv_from_self(rank):
    dist.recv(_z(4), rank)


def case_recv_into_expanded(rank):
    dist.recv(_z(1).expand(4), 1 - rank)


def case_recv_out_of_range(rank):
    dist.recv(_z(4), 7)


def case_recv_any_source_two_tensors(rank):
    _wait(_be().recv_anysource([_z(4), _z(4)], 0))


# coalesced ops


def case_allgather_coalesced_list_length(rank):
    dist.all_gather_coalesced([[_z(4), _z(3)], [_z(4)]], [_z(4), _z(3)])


def case_allgather_coalesced_rank_count(rank):
    dist.all_gather_coalesced([[_z(4)], [_z(4)], [_z(4)]], [_z(4)])


def case_allgather_coalesced_wrong_numel(rank):
    dist.all_gather_coalesced([[_z(4), _z(3)], [_z(5), _z(3)]], [_z(4), _z(3)])


def case_allgather_coalesced_no_inputs(rank):
    _wait(_be().allgather_coalesced([[], []], [], AllgatherOptions()))


def case_allreduce_coalesced_empty(rank):
    _wait(_be().allreduce_coalesced([], AllreduceCoalescedOptions()))


def case_allreduce_coalesced_mixed_dtypes(rank):
    _wait(_pg().allreduce_coalesced([_z(3), _z(3, dtype=torch.float64)],
                                    AllreduceCoalescedOptions()))


def case_allreduce_coalesced_band_float(rank):
    dist.all_reduce_coalesced([_z(3), _z(2)], op=dist.ReduceOp.BAND)


def case_allgather_into_tensor_coalesced_wrong_numel(rank):
    with dist._coalescing_manager():
        dist.all_gather_into_tensor(_z(8), _z(4))
        dist.all_gather_into_tensor(_z(5), _z(3))


def case_allgather_into_tensor_coalesced_lengths(rank):
    _wait(_pg().allgather_into_tensor_coalesced([_z(8)], [_z(4), _z(4)], AllgatherOptions()))


def case_reduce_scatter_tensor_coalesced_wrong_numel(rank):
    with dist._coalescing_manager():
        dist.reduce_scatter_tensor(_z(4), _z(8))
        dist.reduce_scatter_tensor(_z(4), _z(7))


def case_reduce_scatter_tensor_coalesced_bxor_float(rank):
    with dist._coalescing_manager():
        dist.reduce_scatter_tensor(_z(4), _z(8), op=dist.ReduceOp.BXOR)


# reduce


def case_reduce_dst_out_of_range(rank):
    dist.reduce(_z(4), dst=WS)


def case_reduce_band_float(rank):
    dist.reduce(_z(4), dst=0, op=dist.ReduceOp.BAND)


def case_reduce_avg_bool(rank):
    dist.reduce(_z(4, dtype=torch.bool), dst=1, op=dist.ReduceOp.AVG)


def case_reduce_two_tensors(rank):
    _wait(_pg().reduce([_z(4), _z(4)], ReduceOptions()))


def case_reduce_root_tensor_1(rank):
    opts = ReduceOptions()
    opts.rootTensor = 1
    _wait(_be().reduce([_z(4)], opts))


PEER = "expected another rank of the group (0 <= rank < 2, not this rank, {rank})"

# name -> (case, exact occl message or its start ({rank} is filled in), gloo regex or None =
# gloo accepts the input, fails asymmetrically or hangs, so the case is skipped on gloo)
CASES = {
    "a2a_split_sizes_sum": (
        case_a2a_split_sizes_sum,
        "occl.alltoall_base: input_split_sizes does not fit input_tensor: the split sizes sum "
        "to 2, expected its first dimension, 3",
        r"Split sizes doesn't match total dim 0 size"),
    "a2a_split_sizes_wrong_length": (
        case_a2a_split_sizes_wrong_length,
        "occl.alltoall_base: input_split_sizes does not fit input_tensor: it has 1 split sizes, "
        "expected 2 (one per rank) or none (equal splits)",
        r"Number of tensor splits not equal to group size"),
    "a2a_output_split_sizes_sum": (
        case_a2a_output_split_sizes_sum,
        "occl.alltoall_base: output_split_sizes does not fit output_tensor: the split sizes "
        "sum to 4, expected its first dimension, 3",
        r"Split sizes doesn't match total dim 0 size"),
    "a2a_equal_splits_not_divisible": (
        case_a2a_equal_splits_not_divisible,
        "occl.alltoall_base: input_split_sizes does not fit input_tensor: no split sizes means "
        "equal splits, but its first dimension, 3, does not divide by the world size, 2",
        None),  # gloo accepts it
    "a2a_negative_split_size": (
        case_a2a_negative_split_size,
        "occl.alltoall_base: input_split_sizes does not fit input_tensor: split size 0 is -1, "
        "expected >= 0",
        None),
    "a2a_mixed_dtypes": (
        case_a2a_mixed_dtypes,
        "occl.alltoall_base: output_tensor has dtype Double, expected Float "
        "(the dtype of input_tensor)",
        None),
    "a2a_sparse_input": (
        case_a2a_sparse_input,
        "occl.alltoall_base: input_tensor has layout Sparse, expected a dense (strided) tensor",
        None),
    "a2a_own_slice_mismatch": (
        case_a2a_own_slice_mismatch,
        "occl.alltoall_base: slice_bytes(output_split_sizes, output_tensor, rank, world_size) "
        "is 4, expected 8 (= slice_bytes(input_split_sizes, input_tensor, rank, world_size))",
        None),
    "a2a_expanded_output": (
        case_a2a_expanded_output,
        "occl.alltoall_base: output_tensor has elements that share memory (e.g. an expand()ed "
        "view), expected a tensor results can be written into",
        None),
    "a2a_list_own_numel_mismatch": (
        case_a2a_list_own_numel_mismatch,
        "occl.alltoall: output_tensors[rank].numel() is 3, expected 2 "
        "(= input_tensors[rank].numel())",
        None),
    "a2a_list_too_short": (
        case_a2a_list_too_short,
        "occl.alltoall: output_tensors has 1 entries, expected 2 (= world size)",
        None),
    "a2a_list_mixed_dtypes": (
        case_a2a_list_mixed_dtypes,
        "occl.alltoall: input_tensors[1] has dtype Double, expected Float "
        "(the dtype of input_tensors[0])",
        None),
    "gather_list_on_non_root": (
        case_gather_list_on_non_root,
        "occl.gather: output_tensors has 1 entries, expected none on a non-root rank",
        r"requires empty output on non-root"),
    "gather_list_missing_on_root": (
        case_gather_list_missing_on_root,
        "occl.gather: output_tensors has 0 entries, expected exactly 1 (one tensor per process)",
        r"requires a single-element output list"),
    "gather_list_too_short": (
        case_gather_list_too_short,
        "occl.gather: output_tensors[0] has 1 tensors, expected 2 (= world size)",
        r"Incorrect output list size 1"),
    "gather_wrong_numel": (
        case_gather_wrong_numel,
        "occl.gather: output_tensors[0][1] has 5 elements, expected 4 "
        "(= input_tensors[0].numel())",
        r"invalid tensor size at index 1"),
    "gather_dst_out_of_range": (
        case_gather_dst_out_of_range,
        "occl.gather: opts.rootRank is 2, expected a rank in [0, 2)",
        r"invalid root rank: 2"),
    "gather_expanded_output": (
        case_gather_expanded_output,
        "occl.gather: output_tensors[0][0] has elements that share memory (e.g. an expand()ed "
        "view), expected a tensor results can be written into",
        None),
    "gather_meta_input": (
        case_gather_meta_input,
        "occl.gather: input_tensors[0] is on device meta, expected one of: cpu",
        None),
    "scatter_list_on_non_root": (
        case_scatter_list_on_non_root,
        "occl.scatter: input_tensors has 1 entries, expected none on a non-root rank",
        r"requires empty input on non-root"),
    "scatter_list_missing_on_root": (
        case_scatter_list_missing_on_root,
        "occl.scatter: input_tensors has 0 entries, expected exactly 1 (one tensor per process)",
        r"requires a single-element input list"),
    "scatter_list_too_short": (
        case_scatter_list_too_short,
        "occl.scatter: input_tensors[0] has 1 tensors, expected 2 (= world size)",
        r"Incorrect input list size 1"),
    "scatter_wrong_numel": (
        case_scatter_wrong_numel,
        "occl.scatter: input_tensors[0][1] has 3 elements, expected 4 "
        "(= output_tensors[0].numel())",
        r"invalid tensor size at index 1"),
    "scatter_mixed_dtypes": (
        case_scatter_mixed_dtypes,
        "occl.scatter: input_tensors[0][1] has dtype Int, expected Float "
        "(the dtype of output_tensors[0])",
        r"invalid tensor type at index 1"),
    "send_to_self": (
        case_send_to_self,
        "occl.send: dst_rank is {rank}, " + PEER,
        None),
    "send_out_of_range": (
        case_send_out_of_range,
        "occl.send: dst_rank is 5, " + PEER,
        None),
    "send_negative_rank": (
        case_send_negative_rank,
        "occl.send: dst_rank is -1, " + PEER,
        None),
    "send_two_tensors": (
        case_send_two_tensors,
        "occl.send: tensors has 2 entries, expected exactly 1 (one tensor per process)",
        r"takes a single tensor"),
    "recv_from_self": (
        case_recv_from_self,
        "occl.recv: src_rank is {rank}, " + PEER,
        None),
    "recv_into_expanded": (
        case_recv_into_expanded,
        "occl.recv: tensors[0] has elements that share memory (e.g. an expand()ed view), "
        "expected a tensor results can be written into",
        None),
    "recv_out_of_range": (
        case_recv_out_of_range,
        "occl.recv: src_rank is 7, " + PEER,
        None),
    "recv_any_source_two_tensors": (
        case_recv_any_source_two_tensors,
        "occl.recvAnysource: tensors has 2 entries, expected exactly 1 (one tensor per process)",
        r"takes a single tensor"),
    "allgather_coalesced_list_length": (
        case_allgather_coalesced_list_length,
        "occl.allgather_coalesced: output_tensor_lists[1] has 1 tensors, expected 2 "
        "(as many as input_tensors)",
        None),
    "allgather_coalesced_rank_count": (
        case_allgather_coalesced_rank_count,
        "occl.allgather_coalesced: output_tensor_lists has 3 entries, expected 2 (= world size)",
        r"output lists should be equal to world size"),
    "allgather_coalesced_wrong_numel": (
        case_allgather_coalesced_wrong_numel,
        "occl.allgather_coalesced: output_tensor_lists[1][0] has 5 elements, expected 4 "
        "(= input_tensors[i1].numel())",
        None),
    "allgather_coalesced_no_inputs": (
        case_allgather_coalesced_no_inputs,
        "occl.allgather_coalesced: input_tensors is empty, expected at least one tensor",
        r"requires non-empty input tensor list"),
    "allreduce_coalesced_empty": (
        case_allreduce_coalesced_empty,
        "occl.allreduce_coalesced: tensors is empty, expected at least one tensor",
        r"requires non-empty tensor list"),
    "allreduce_coalesced_mixed_dtypes": (
        case_allreduce_coalesced_mixed_dtypes,
        "occl.allreduce_coalesced: tensors[1] has dtype Double, expected Float "
        "(the dtype of tensors[0])",
        r"tensors must all have the same type"),
    "allreduce_coalesced_band_float": (
        case_allreduce_coalesced_band_float,
        "occl.allreduce_coalesced: tensors[0] has dtype Float, which reduce op BAND does not "
        "support: ",
        r"Cannot use ReduceOp.BAND with non-integral dtype"),
    "allgather_into_tensor_coalesced_wrong_numel": (
        case_allgather_into_tensor_coalesced_wrong_numel,
        "occl.allgather_into_tensor_coalesced: outputs[1] has 5 elements, expected 6 "
        "(= inputs[i0].numel() * world_size)",
        None),
    "allgather_into_tensor_coalesced_lengths": (
        case_allgather_into_tensor_coalesced_lengths,
        "occl.allgather_into_tensor_coalesced: outputs has 1 tensors, expected 2 "
        "(as many as inputs)",
        None),
    "reduce_scatter_tensor_coalesced_wrong_numel": (
        case_reduce_scatter_tensor_coalesced_wrong_numel,
        "occl.reduce_scatter_tensor_coalesced: inputs[1] has 7 elements, expected 8 "
        "(= outputs[i0].numel() * world_size)",
        None),
    "reduce_scatter_tensor_coalesced_bxor_float": (
        case_reduce_scatter_tensor_coalesced_bxor_float,
        "occl.reduce_scatter_tensor_coalesced: outputs[0] has dtype Float, which reduce op BXOR "
        "does not support: ",
        None),
    "reduce_dst_out_of_range": (
        case_reduce_dst_out_of_range,
        "occl.reduce: opts.rootRank is 2, expected a rank in [0, 2)",
        r"invalid root rank: 2"),
    "reduce_band_float": (
        case_reduce_band_float,
        "occl.reduce: tensors[0] has dtype Float, which reduce op BAND does not support: ",
        r"Cannot use ReduceOp.BAND with non-integral dtype"),
    "reduce_avg_bool": (
        case_reduce_avg_bool,
        "occl.reduce: tensors[0] has dtype Bool, which reduce op AVG does not support: ",
        None),
    "reduce_two_tensors": (
        case_reduce_two_tensors,
        "occl.reduce: tensors has 2 entries, expected exactly 1 (one tensor per process)",
        r"requires a single-element tensor list"),
    "reduce_root_tensor_1": (
        case_reduce_root_tensor_1,
        "occl.reduce: opts.rootTensor is 1, expected 0 (one tensor per process)",
        r"invalid root tensor: 1"),
}


def w_bad_input(rank, ws, name, backend):
    fn, occl_msg, gloo_regex = CASES[name]
    if backend == "occl":
        pattern = re.escape(occl_msg.format(rank=rank))
    else:
        pattern = gloo_regex
    with pytest.raises(ERRORS, match=pattern) as info:
        fn(rank)
    # The group is still usable afterwards.
    t = torch.full((3,), float(rank + 1))
    dist.all_reduce(t)
    assert t.tolist() == [ws * (ws + 1) / 2] * 3, t
    return f"{info.type.__name__}: {info.value}"


@pytest.mark.parametrize("name", list(CASES))
def test_bad_input(dist_pool, backend, name):
    if backend != "occl" and CASES[name][2] is None:
        pytest.skip(f"not checkable on {backend} (it accepts the input, fails asymmetrically "
                    "or waits for a peer)")
    messages = dist_pool(WS).run(w_bad_input, name, backend, timeout=60)
    if backend == "occl" and "{rank}" not in CASES[name][1]:
        assert messages[0] == messages[1], messages  # every rank rejects the same way


# ---- errors are raised at the call, before any communication ------------------------------


def w_error_raised_at_call(rank, ws):
    """With async_op=True the bad call itself raises; no Work is returned."""
    bad = [
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


def test_error_raised_at_call(dist_pool, backend):
    if backend != "occl":
        pytest.skip("occl messages")
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


# ---- documented torch interceptions (they explain why some cases bypass dist.*) -----------


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
    """Documents torch-side behaviour; if it changes, the backend-level cases above gain paths."""
    assert dist_pool(WS).run(w_torch_intercepts) == [True] * WS
