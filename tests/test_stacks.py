"""The stacks above c10d on the backend under test: FSDP2 (fully_shard), DTensor redistribution,
functional collectives (torch.distributed._functional_collectives) and object collectives.

Reference values are computed without the backend under test: a single-process plain-PyTorch
run of the same training on the full batch (FSDP2), gloo running the same FSDP2 training, or
Python arithmetic on the ranks' deterministic inputs.

What each stack calls on CPU (C10D_NOTES.md): FSDP2 -> _allgather_base, _reduce_scatter_base
with AVG (fp32) or PREMUL_SUM(1/f) (custom divide factor; gloo rejects PREMUL_SUM, so that
variant is compared with the single-process reference only); DTensor -> scatter/broadcast,
allgather_into_tensor_coalesced, allreduce, reduce_scatter_tensor_coalesced, alltoall(_base);
functional collectives -> allreduce, allgather_into_tensor_coalesced,
reduce_scatter_tensor_coalesced, alltoall_base; object collectives -> allgather, broadcast,
gather, scatter.
"""

from __future__ import annotations

import warnings

import pytest
import torch
import torch.distributed as dist

STEPS = 10
BATCH_PER_RANK = 8
D_IN, D_HID, D_OUT = 12, 24, 5


def _ignore_warnings():
    warnings.simplefilter("ignore", FutureWarning)
    warnings.simplefilter("ignore", UserWarning)


# ---------------------------------------------------------------------------------------------
# FSDP2
# ---------------------------------------------------------------------------------------------


def _mlp():
    torch.manual_seed(0)  # the same initial weights everywhere
    return torch.nn.Sequential(
        torch.nn.Linear(D_IN, D_HID), torch.nn.ReLU(),
        torch.nn.Linear(D_HID, D_HID), torch.nn.ReLU(),
        torch.nn.Linear(D_HID, D_OUT))


def _data(ws):
    g = torch.Generator().manual_seed(1234)
    x = torch.randn(STEPS, ws * BATCH_PER_RANK, D_IN, generator=g)
    w = torch.randn(D_IN, D_OUT, generator=g)
    return x, torch.tanh(x @ w)


def _fsdp_reference(ws, grad_scale):
    """Plain PyTorch, one process, full batch: FSDP's averaged gradients of the per-rank mean
    losses equal the full-batch gradient (equal local batches), times grad_scale."""
    model = _mlp()
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    x, y = _data(ws)
    for step in range(STEPS):
        opt.zero_grad()
        loss = torch.nn.functional.mse_loss(model(x[step]), y[step])
        loss.backward()
        if grad_scale != 1.0:
            for p in model.parameters():
                p.grad.mul_(grad_scale)
        opt.step()
    return {k: v.detach().clone() for k, v in model.state_dict().items()}


def w_fsdp2_train(rank, ws, divide_factor, reshard_after_forward):
    _ignore_warnings()
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import fully_shard

    mesh = init_device_mesh("cpu", (ws,))
    model = _mlp()
    for layer in (model[0], model[2], model[4]):
        fully_shard(layer, mesh=mesh, reshard_after_forward=reshard_after_forward)
    fully_shard(model, mesh=mesh, reshard_after_forward=reshard_after_forward)
    if divide_factor is not None:
        # Per FSDP module: the setting applies to the module's own parameter group only.
        from torch.distributed.fsdp import FSDPModule

        for m in model.modules():
            if isinstance(m, FSDPModule):
                m.set_gradient_divide_factor(divide_factor)
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    x, y = _data(ws)
    lo, hi = rank * BATCH_PER_RANK, (rank + 1) * BATCH_PER_RANK
    losses = []
    for step in range(STEPS):
        opt.zero_grad()
        loss = torch.nn.functional.mse_loss(model(x[step, lo:hi]), y[step, lo:hi])
        loss.backward()
        opt.step()
        losses.append(float(loss))
    full = {k: v.full_tensor().detach().clone() for k, v in model.state_dict().items()}
    return full, losses


def _assert_params_close(got, ref, label, rtol=1e-5, atol=1e-6):
    assert set(got) == set(ref), (sorted(got), sorted(ref))
    for k in ref:
        torch.testing.assert_close(got[k], ref[k], rtol=rtol, atol=atol,
                                   msg=lambda m, k=k: f"{label}: parameter {k}: {m}")


@pytest.mark.parametrize("reshard_after_forward", [True, False], ids=["reshard", "no_reshard"])
def test_fsdp2_matches_gloo_and_reference(dist_pool, gloo_pool, reshard_after_forward):
    """fp32 FSDP2 (reduce-scatter with AVG): 10 steps on 2 ranks."""
    ws = 2
    got = dist_pool(ws).run(w_fsdp2_train, None, reshard_after_forward, timeout=120)
    _assert_params_close(got[1][0], got[0][0], "rank 1 vs rank 0", rtol=0, atol=0)
    ref = _fsdp_reference(ws, 1.0)
    _assert_params_close(got[0][0], ref, "backend under test vs single-process reference")
    glo = gloo_pool(ws).run(w_fsdp2_train, None, reshard_after_forward, timeout=120)
    _assert_params_close(got[0][0], glo[0][0], "backend under test vs gloo")
    init = _mlp().state_dict()
    assert any(not torch.allclose(got[0][0][k], init[k]) for k in init), \
        "training did not move the model"


def test_fsdp2_custom_divide_factor_premul_sum(dist_pool, backend):
    """set_gradient_divide_factor(4) on 2 ranks: FSDP2 reduce-scatters with PREMUL_SUM(1/4),
    i.e. gradients are (sum over ranks) / 4 = half the full-batch gradient. gloo rejects
    PREMUL_SUM, so the reference is the single-process run."""
    if backend != "occl":
        pytest.skip("gloo rejects PREMUL_SUM")
    ws = 2
    got = dist_pool(ws).run(w_fsdp2_train, 4.0, True, timeout=120)
    _assert_params_close(got[1][0], got[0][0], "rank 1 vs rank 0", rtol=0, atol=0)
    ref = _fsdp_reference(ws, ws / 4.0)
    _assert_params_close(got[0][0], ref, "PREMUL_SUM FSDP2 vs single-process reference")


# ---------------------------------------------------------------------------------------------
# DTensor
# ---------------------------------------------------------------------------------------------


def w_dtensor(rank, ws):
    _ignore_warnings()
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor import Partial, Replicate, Shard, distribute_tensor

    problems = []

    def check(label, got, exp):
        if tuple(got.shape) != tuple(exp.shape) or not torch.equal(got, exp):
            problems.append(f"rank {rank}: {label}: got shape {tuple(got.shape)} "
                            f"{got.flatten()[:4].tolist()}, expected shape {tuple(exp.shape)} "
                            f"{exp.flatten()[:4].tolist()}")

    mesh = init_device_mesh("cpu", (ws,))
    for rows, cols, dtype in ((8, 6, torch.float32), (7, 5, torch.float64),
                              (2 * ws + 1, 3, torch.int64)):
        full = (torch.arange(rows * cols, dtype=torch.float64).reshape(rows, cols) * 3 - 7)
        full = full.to(dtype)
        tag = f"{rows}x{cols} {dtype}"
        chunks0 = list(torch.chunk(full, ws, dim=0))
        chunks0 += [full[:0]] * (ws - len(chunks0))
        chunks1 = list(torch.chunk(full, ws, dim=1))
        chunks1 += [full[:, :0]] * (ws - len(chunks1))
        # Shard(0) -> Replicate() -> Shard(0)
        dt = distribute_tensor(full, mesh, [Shard(0)])
        check(f"{tag} distribute Shard(0)", dt.to_local(), chunks0[rank])
        rep = dt.redistribute(mesh, [Replicate()])
        check(f"{tag} Shard(0) -> Replicate()", rep.to_local(), full)
        back = rep.redistribute(mesh, [Shard(0)])
        check(f"{tag} Replicate() -> Shard(0)", back.to_local(), chunks0[rank])
        check(f"{tag} full_tensor()", back.full_tensor(), full)
        # Shard(0) -> Shard(1) (all-to-all) -> Replicate()
        s1 = dt.redistribute(mesh, [Shard(1)])
        check(f"{tag} Shard(0) -> Shard(1)", s1.to_local(), chunks1[rank])
        check(f"{tag} Shard(1) -> Replicate()", s1.redistribute(mesh, [Replicate()]).to_local(),
              full)
        # Partial(sum) -> Replicate() (all-reduce) and -> Shard(0) (reduce-scatter)
        local = full * (rank + 1)
        part = torch.distributed.tensor.DTensor.from_local(local, mesh, [Partial()],
                                                           run_check=False)
        total = full * (ws * (ws + 1) // 2)
        check(f"{tag} Partial() -> Replicate()",
              part.redistribute(mesh, [Replicate()]).to_local(), total)
        tchunks = list(torch.chunk(total, ws, dim=0))
        tchunks += [total[:0]] * (ws - len(tchunks))
        check(f"{tag} Partial() -> Shard(0)", part.redistribute(mesh, [Shard(0)]).to_local(),
              tchunks[rank])
    # A DTensor op that needs communication: matmul of row-sharded by replicated.
    a = torch.arange(12.0).reshape(4, 3)
    b = torch.arange(6.0).reshape(3, 2)
    da = distribute_tensor(a, mesh, [Shard(0)])
    db = distribute_tensor(b, mesh, [Replicate()])
    check("matmul Shard(0) x Replicate()", (da @ db).full_tensor(), a @ b)
    return problems


@pytest.mark.parametrize("occl_pool", [2, 3], indirect=True, ids=lambda n: f"ws{n}")
def test_dtensor_redistribute(occl_pool):
    problems = [p for per in occl_pool.run(w_dtensor, timeout=120) for p in per]
    assert not problems, "\n".join(problems)


# ---------------------------------------------------------------------------------------------
# Functional collectives
# ---------------------------------------------------------------------------------------------


def w_functional(rank, ws):
    _ignore_warnings()
    import torch.distributed._functional_collectives as fc

    problems = []
    group = dist.group.WORLD

    def check(label, got, exp):
        if isinstance(got, fc.AsyncCollectiveTensor):
            got = got.wait()
        if tuple(got.shape) != tuple(exp.shape) or not torch.equal(got, exp):
            problems.append(f"rank {rank}: {label}: got {tuple(got.shape)} "
                            f"{got.flatten()[:4].tolist()}, expected {tuple(exp.shape)} "
                            f"{exp.flatten()[:4].tolist()}")

    def inp(r, n=10, dtype=torch.float32, salt=0):
        return (torch.arange(n, dtype=torch.float64) * (r + 1) + salt).to(dtype)

    # all_reduce: the input is left unmodified; the result is an AsyncCollectiveTensor.
    for op, fn in (("sum", lambda xs: sum(xs)), ("avg", lambda xs: sum(xs) / ws),
                   ("max", lambda xs: torch.stack(xs).amax(0)),
                   ("min", lambda xs: torch.stack(xs).amin(0))):
        x = inp(rank, salt=1)
        before = x.clone()
        out = fc.all_reduce(x, op, group)
        check(f"all_reduce {op}", out, fn([inp(r, salt=1) for r in range(ws)]))
        check(f"all_reduce {op}: input unchanged", x, before)
    # Used lazily in arithmetic (AsyncCollectiveTensor waits on first use).
    y = fc.all_reduce(inp(rank, dtype=torch.int64), "sum", group) * 2
    check("all_reduce int64 used in arithmetic", y,
          sum(inp(r, dtype=torch.int64) for r in range(ws)) * 2)
    # all_gather_tensor along dims 0 and 1
    m = inp(rank, 12).reshape(3, 4)
    allm = [inp(r, 12).reshape(3, 4) for r in range(ws)]
    check("all_gather_tensor dim 0", fc.all_gather_tensor(m, 0, group), torch.cat(allm, 0))
    check("all_gather_tensor dim 1", fc.all_gather_tensor(m, 1, group), torch.cat(allm, 1))
    # reduce_scatter_tensor along dims 0 and 1
    big = inp(rank, 4 * ws * 3).reshape(4 * ws, 3)
    total = sum(inp(r, 4 * ws * 3).reshape(4 * ws, 3) for r in range(ws))
    check("reduce_scatter_tensor sum dim 0", fc.reduce_scatter_tensor(big, "sum", 0, group),
          total.chunk(ws, 0)[rank])
    wide = inp(rank, 3 * 2 * ws, dtype=torch.float64).reshape(3, 2 * ws)
    wtotal = sum(inp(r, 3 * 2 * ws, dtype=torch.float64).reshape(3, 2 * ws) for r in range(ws))
    check("reduce_scatter_tensor avg dim 1", fc.reduce_scatter_tensor(wide, "avg", 1, group),
          (wtotal / ws).chunk(ws, 1)[rank])
    # all_to_all_single, equal and uneven splits
    a = inp(rank, 3 * ws).reshape(ws * 3, 1)
    exp = torch.cat([inp(r, 3 * ws).reshape(ws * 3, 1)[3 * rank:3 * rank + 3]
                     for r in range(ws)])
    check("all_to_all_single equal", fc.all_to_all_single(a, None, None, group), exp)
    S = [[(s + 2 * d) % 3 for d in range(ws)] for s in range(ws)]  # rows s sends to d
    src = [torch.arange(sum(S[s]) * 2, dtype=torch.float32).reshape(-1, 2) + 100 * s
           for s in range(ws)]
    exp = torch.cat([src[s][sum(S[s][:rank]):sum(S[s][:rank]) + S[s][rank]]
                     for s in range(ws)])
    got = fc.all_to_all_single(src[rank], [S[s][rank] for s in range(ws)], S[rank], group)
    check("all_to_all_single uneven", got, exp)
    # Coalesced variants
    outs = fc.all_gather_into_tensor_coalesced([inp(rank, 4), inp(rank, 6, salt=2)], group)
    check("all_gather_into_tensor_coalesced[0]", outs[0],
          torch.cat([inp(r, 4) for r in range(ws)]))
    check("all_gather_into_tensor_coalesced[1]", outs[1],
          torch.cat([inp(r, 6, salt=2) for r in range(ws)]))
    outs = fc.reduce_scatter_tensor_coalesced(
        [inp(rank, 2 * ws), inp(rank, 4 * ws, salt=1)], "sum", [0, 0], group)
    check("reduce_scatter_tensor_coalesced[0]", outs[0],
          sum(inp(r, 2 * ws) for r in range(ws)).chunk(ws)[rank])
    check("reduce_scatter_tensor_coalesced[1]", outs[1],
          sum(inp(r, 4 * ws, salt=1) for r in range(ws)).chunk(ws)[rank])
    outs = fc.all_reduce_coalesced([inp(rank, 3), inp(rank, 5, salt=4)], "sum", group)
    check("all_reduce_coalesced[0]", outs[0], sum(inp(r, 3) for r in range(ws)))
    check("all_reduce_coalesced[1]", outs[1], sum(inp(r, 5, salt=4) for r in range(ws)))
    # broadcast
    check("broadcast", fc.broadcast(inp(rank, 7), ws - 1, group), inp(ws - 1, 7))
    # A group given as a rank list.
    check("all_reduce over rank list", fc.all_reduce(inp(rank), "sum", list(range(ws))),
          sum(inp(r) for r in range(ws)))
    return problems


@pytest.mark.parametrize("occl_pool", [2, 3], indirect=True, ids=lambda n: f"ws{n}")
def test_functional_collectives(occl_pool):
    problems = [p for per in occl_pool.run(w_functional, timeout=120) for p in per]
    assert not problems, "\n".join(problems)


# ---------------------------------------------------------------------------------------------
# Object collectives
# ---------------------------------------------------------------------------------------------


def _obj(r):
    """Picklable objects whose sizes differ per rank."""
    return {"rank": r, "text": "x" * (10 * r + 1), "list": list(range(r * 50)),
            "tensor": torch.arange(r + 1, dtype=torch.float64), "nested": ("a", (r, None))}


def _same(a, b):
    if isinstance(a, torch.Tensor):
        return isinstance(b, torch.Tensor) and torch.equal(a, b)
    if isinstance(a, dict):
        return isinstance(b, dict) and a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)):
        return type(a) is type(b) and len(a) == len(b) and all(map(_same, a, b))
    return a == b


def w_objects(rank, ws):
    problems = []
    # all_gather_object
    out = [None] * ws
    dist.all_gather_object(out, _obj(rank))
    for r in range(ws):
        if not _same(out[r], _obj(r)):
            problems.append(f"rank {rank}: all_gather_object[{r}] = {out[r]!r:.200}")
    # broadcast_object_list from each rank
    for src in range(ws):
        lst = [_obj(src), "tail", src] if rank == src else [None, None, None]
        dist.broadcast_object_list(lst, src=src)
        if not (_same(lst[0], _obj(src)) and lst[1:] == ["tail", src]):
            problems.append(f"rank {rank}: broadcast_object_list src={src}: {lst!r:.200}")
    # gather_object to the last rank
    dst = ws - 1
    gl = [None] * ws if rank == dst else None
    dist.gather_object(_obj(rank), gl, dst=dst)
    if rank == dst:
        for r in range(ws):
            if not _same(gl[r], _obj(r)):
                problems.append(f"rank {rank}: gather_object[{r}] = {gl[r]!r:.200}")
    # scatter_object_list from rank 0
    recv = [None]
    dist.scatter_object_list(recv, [_obj(10 + r) for r in range(ws)] if rank == 0 else None,
                             src=0)
    if not _same(recv[0], _obj(10 + rank)):
        problems.append(f"rank {rank}: scatter_object_list: {recv[0]!r:.200}")
    return problems


@pytest.mark.parametrize("occl_pool", [1, 2, 3], indirect=True, ids=lambda n: f"ws{n}")
def test_object_collectives(occl_pool):
    problems = [p for per in occl_pool.run(w_objects, timeout=60) for p in per]
    assert not problems, "\n".join(problems)
