"""Bad arguments raise at the call, `occl.<c10d method>: <label> <rule>`; the group stays usable.

All cases run at world size 2 in the shared pool. Argument errors are raised before any
communication, so every case is followed by a good all_reduce on the same group.

What torch intercepts before the backend (torch 2.13, checked against gloo):
  * meta tensors through `dist.all_reduce`: the c10d ops have Meta kernels, so the call returns
    without error and never reaches the backend -> the device check is exercised by calling the
    backend object directly (`pg._get_backend(cpu).allreduce(...)`).
  * mixed dtypes through `dist.all_gather` / `dist.reduce_scatter`: the Python layer raises
    ValueError("Invalid usage of tensors with different dtypes...") -> the dtype check is
    exercised through the ProcessGroup object (`pg.allgather(...)`), which skips that layer.
  * everything else here (sparse, list lengths, numels, root rank, reduce op/dtype) reaches the
    backend through the public API unchanged; `dist.broadcast(src=world_size)` arrives as
    opts.rootRank == world_size (no Python range check for the default group).

With OCCL_TEST_BACKEND=gloo the occl message is replaced by gloo's (where gloo rejects the case
at all) to validate the cases themselves.
"""

from __future__ import annotations

import re
from datetime import timedelta

import pytest
import torch
import torch.distributed as dist
from torch._C._distributed_c10d import AllgatherOptions, ReduceScatterOptions

WS = 2  # the messages below are written for world size 2
ERRORS = (RuntimeError, ValueError)


def _pg():
    return dist.distributed_c10d._get_default_group()


def _be():
    """The occl (or gloo) c10d::Backend object itself, below the ProcessGroup dispatcher."""
    return _pg()._get_backend(torch.device("cpu"))


# Each case performs one bad call (and waits on the returned work, if any, so an error raised
# late is still seen -- the wait must not be needed for occl, see test_error_raised_at_call).


def case_meta_tensor():
    opts = dist.AllreduceOptions()
    _be().allreduce([torch.zeros(4, device="meta")], opts).wait()


def case_sparse_tensor():
    # torch's dispatcher has no sparse broadcast kernel, so this goes to the backend directly.
    _be().broadcast([torch.zeros(4).to_sparse()], dist.BroadcastOptions())


def case_mixed_dtypes_allgather():
    out = [torch.zeros(4), torch.zeros(4, dtype=torch.float64)]
    _pg().allgather([out], [torch.zeros(4)], AllgatherOptions()).wait()


def case_allgather_list_too_long():
    dist.all_gather([torch.zeros(4) for _ in range(WS + 1)], torch.zeros(4))


def case_allgather_wrong_numel():
    dist.all_gather([torch.zeros(4), torch.zeros(6)], torch.zeros(4))


def case_allgather_into_tensor_wrong_numel():
    dist.all_gather_into_tensor(torch.zeros(7), torch.zeros(4))


def case_reduce_scatter_tensor_wrong_numel():
    dist.reduce_scatter_tensor(torch.zeros(4), torch.zeros(7))


def case_broadcast_src_world_size():
    dist.broadcast(torch.zeros(4), src=WS)


def case_broadcast_root_5_direct():
    opts = dist.BroadcastOptions()
    opts.rootRank = 5
    opts.rootTensor = 0
    _be().broadcast([torch.zeros(4)], opts).wait()


def case_broadcast_negative_src():
    dist.broadcast(torch.zeros(4), src=-1)


def case_band_float32():
    dist.all_reduce(torch.zeros(4), op=dist.ReduceOp.BAND)


# ---- further cases derived from spec/collectives.yaml (same message scheme) ----------------


def case_avg_bool():
    dist.all_reduce(torch.zeros(4, dtype=torch.bool), op=dist.ReduceOp.AVG)


def case_premul_sum_bool():
    dist.all_reduce(torch.zeros(4, dtype=torch.bool), op=dist._make_nccl_premul_sum(2.0))


def case_bxor_bfloat16():
    out = torch.zeros(4, dtype=torch.bfloat16)
    dist.reduce_scatter_tensor(out, torch.zeros(4 * WS, dtype=torch.bfloat16),
                               op=dist.ReduceOp.BXOR)


def case_allreduce_two_tensors():
    opts = dist.AllreduceOptions()
    _pg().allreduce([torch.zeros(4), torch.zeros(4)], opts).wait()


def case_broadcast_root_tensor_1():
    opts = dist.BroadcastOptions()
    opts.rootRank = 0
    opts.rootTensor = 1
    _be().broadcast([torch.zeros(4)], opts).wait()


def case_reduce_scatter_list_too_short():
    dist.reduce_scatter(torch.zeros(4), [torch.zeros(4)])


def case_reduce_scatter_wrong_numel():
    dist.reduce_scatter(torch.zeros(4), [torch.zeros(4), torch.zeros(5)])


def case_reduce_scatter_mixed_dtypes():
    inputs = [torch.zeros(4), torch.zeros(4, dtype=torch.float64)]
    _pg().reduce_scatter([torch.zeros(4)], [inputs], ReduceScatterOptions()).wait()


def case_allgather_into_tensor_mixed_dtypes():
    out = torch.zeros(8, dtype=torch.float64)
    _pg()._allgather_base(out, torch.zeros(4), AllgatherOptions()).wait()


def case_allgather_meta_output():
    out = [torch.zeros(4), torch.zeros(4, device="meta")]
    _be().allgather([out], [torch.zeros(4)], AllgatherOptions()).wait()


def case_expanded_output():
    dist.all_reduce(torch.zeros(1).expand(4))


def case_alltoall_own_slice_mismatch():
    # Both ranks would send themselves 2 rows but expect 1 back.
    dist.all_to_all_single(torch.zeros(2), torch.zeros(4), output_split_sizes=[1, 1],
                           input_split_sizes=[2, 2])


# name -> (case function, exact occl message (prefix), gloo regex or None = gloo accepts it)
CASES = {
    "expanded_output": (
        case_expanded_output,
        "occl.allreduce: tensors[0] has elements that share memory (e.g. an expand()ed view), "
        "expected a tensor results can be written into",
        None),
    "alltoall_own_slice_mismatch": (
        case_alltoall_own_slice_mismatch,
        "occl.alltoall_base: slice_bytes(output_split_sizes, output_tensor, rank, world_size) is 4,"
        " expected 8 (= slice_bytes(input_split_sizes, input_tensor, rank, world_size))",
        None),
    "meta_tensor": (
        case_meta_tensor,
        "occl.allreduce: tensors[0] is on device meta, expected one of: cpu",
        r"unsupported device type meta"),
    "sparse_tensor": (
        case_sparse_tensor,
        "occl.broadcast: tensors[0] has layout Sparse, expected a dense (strided) tensor",
        None),
    "mixed_dtypes_allgather": (
        case_mixed_dtypes_allgather,
        "occl.allgather: output_tensors[0][1] has dtype Double, expected Float "
        "(the dtype of input_tensors[0])",
        r"invalid tensor type at index 1"),
    "allgather_list_too_long": (
        case_allgather_list_too_long,
        "occl.allgather: output_tensors[0] has 3 tensors, expected 2 (= world size)",
        r"expected length 2, got 3"),
    "allgather_wrong_numel": (
        case_allgather_wrong_numel,
        "occl.allgather: output_tensors[0][1] has 6 elements, expected 4 "
        "(= input_tensors[0].numel())",
        r"invalid tensor size at index 1"),
    "allgather_into_tensor_wrong_numel": (
        case_allgather_into_tensor_wrong_numel,
        "occl._allgather_base: output_tensor has 7 elements, expected 8 "
        "(= input_tensor.numel() * world_size)",
        r"invalid tensor size"),
    "reduce_scatter_tensor_wrong_numel": (
        case_reduce_scatter_tensor_wrong_numel,
        "occl._reduce_scatter_base: input_tensor has 7 elements, expected 8 "
        "(= output_tensor.numel() * world_size)",
        r"outputShape\[0\] \* worldSize == inputShape\[0\]"),
    "broadcast_src_world_size": (
        case_broadcast_src_world_size,
        "occl.broadcast: opts.rootRank is 2, expected a rank in [0, 2)",
        r"invalid root rank: 2"),
    "broadcast_root_5_direct": (
        case_broadcast_root_5_direct,
        "occl.broadcast: opts.rootRank is 5, expected a rank in [0, 2)",
        r"invalid root rank: 5"),
    "broadcast_negative_src": (
        case_broadcast_negative_src,
        "occl.broadcast: opts.rootRank is -1, expected a rank in [0, 2)",
        r"invalid root rank: -1"),
    "band_float32": (
        case_band_float32,
        "occl.allreduce: tensors[0] has dtype Float, which reduce op BAND does not support: ",
        r"Cannot use ReduceOp.BAND with non-integral dtype"),
    "avg_bool": (
        case_avg_bool,
        "occl.allreduce: tensors[0] has dtype Bool, which reduce op AVG does not support: ",
        r"can't be cast to the desired output type Bool"),
    "premul_sum_bool": (
        case_premul_sum_bool,
        "occl.allreduce: tensors[0] has dtype Bool, which reduce op PREMUL_SUM does not "
        "support: ",
        r"Cannot use ReduceOp.PREMUL_SUM with Gloo"),
    "bxor_bfloat16_reduce_scatter_tensor": (
        case_bxor_bfloat16,
        "occl._reduce_scatter_base: output_tensor has dtype BFloat16, which reduce op BXOR "
        "does not support: ",
        r"Cannot use ReduceOp.BXOR with non-integral dtype"),
    "allreduce_two_tensors": (
        case_allreduce_two_tensors,
        "occl.allreduce: tensors has 2 entries, expected exactly 1 (one tensor per process)",
        None),  # gloo reduces several tensors per process
    "broadcast_root_tensor_1": (
        case_broadcast_root_tensor_1,
        "occl.broadcast: opts.rootTensor is 1, expected 0 (one tensor per process)",
        r"invalid root tensor: 1"),
    "reduce_scatter_list_too_short": (
        case_reduce_scatter_list_too_short,
        "occl.reduce_scatter: input_tensors[0] has 1 tensors, expected 2 (= world size)",
        r"invalid input tensor list size, must be world size"),
    "reduce_scatter_wrong_numel": (
        case_reduce_scatter_wrong_numel,
        "occl.reduce_scatter: input_tensors[0][1] has 5 elements, expected 4 "
        "(= output_tensors[0].numel())",
        None),  # gloo fails on one rank only, from inside the collective, breaking the group
    "reduce_scatter_mixed_dtypes": (
        case_reduce_scatter_mixed_dtypes,
        "occl.reduce_scatter: input_tensors[0][1] has dtype Double, expected Float "
        "(the dtype of output_tensors[0])",
        None),  # gloo fails on one rank only, from inside the collective, breaking the group
    "allgather_into_tensor_mixed_dtypes": (
        case_allgather_into_tensor_mixed_dtypes,
        "occl._allgather_base: output_tensor has dtype Double, expected Float "
        "(the dtype of input_tensor)",
        r"invalid tensor type at index 0"),
    "allgather_meta_output": (
        case_allgather_meta_output,
        "occl.allgather: output_tensors[0][1] is on device meta, expected one of: cpu",
        r"invalid tensor type at index 1"),
}


def w_bad_input(rank, ws, name, backend):
    fn, occl_msg, gloo_regex = CASES[name]
    if backend == "occl":
        pattern = re.escape(occl_msg)
    else:
        pattern = gloo_regex
    with pytest.raises(ERRORS, match=pattern) as info:
        fn()
    # The group is still usable afterwards.
    t = torch.full((3,), float(rank + 1))
    dist.all_reduce(t)
    assert t.tolist() == [ws * (ws + 1) / 2] * 3, t
    return f"{info.type.__name__}: {info.value}"


@pytest.mark.parametrize("name", list(CASES))
def test_bad_input(dist_pool, backend, name):
    if backend != "occl" and CASES[name][2] is None:
        pytest.skip(f"not checkable on {backend} (it accepts the input or fails asymmetrically)")
    pool = dist_pool(WS)
    messages = pool.run(w_bad_input, name, backend, timeout=60)
    if backend == "occl":  # every rank rejects the same way
        assert messages[0] == messages[1], messages


# ---- errors are raised at the call, before any communication ------------------------------


def w_error_raised_at_call(rank, ws, backend):
    """With async_op=True the bad call itself raises; no Work is returned."""
    bad = [
        ("all_reduce BAND float",
         lambda: dist.all_reduce(torch.zeros(4), op=dist.ReduceOp.BAND, async_op=True),
         "occl.allreduce: tensors[0] has dtype Float, which reduce op BAND does not support: "),
        ("all_gather wrong numel",
         lambda: dist.all_gather([torch.zeros(4), torch.zeros(6)], torch.zeros(4), async_op=True),
         "occl.allgather: output_tensors[0][1] has 6 elements, expected 4 "
         "(= input_tensors[0].numel())"),
        ("broadcast src out of range",
         lambda: dist.broadcast(torch.zeros(4), src=ws, async_op=True),
         f"occl.broadcast: opts.rootRank is {ws}, expected a rank in [0, {ws})"),
    ]
    return raise_at_call_and_group_still_works([(call, msg) for _, call, msg in bad], ws)


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
        pytest.skip("gloo reports some of these only from wait()")
    assert dist_pool(WS).run(w_error_raised_at_call, backend) == [True] * WS


# ---- documented torch interceptions (they explain why some cases bypass dist.*) -----------


def w_torch_intercepts(rank, ws):
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


def test_torch_intercepts_before_backend(dist_pool):
    """Documents torch-side behaviour; if it changes, the backend-level cases above gain paths."""
    assert dist_pool(WS).run(w_torch_intercepts) == [True] * WS
