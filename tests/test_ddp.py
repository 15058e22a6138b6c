"""DistributedDataParallel on the backend under test matches the same training on gloo."""

from __future__ import annotations

import pytest
import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP

WS = 2
STEPS = 20


def _train(rank, ws, bucket_cap_mb, use_hook):
    # Different initial weights per rank: DDP must broadcast rank 0's at construction.
    torch.manual_seed(1234 + rank)
    model = torch.nn.Sequential(
        torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 4))
    ddp = DDP(model, bucket_cap_mb=bucket_cap_mb)
    calls = [0]
    if use_hook:

        def allreduce_mean_hook(state, bucket):
            calls[0] += 1
            buf = bucket.buffer()
            buf.div_(dist.get_world_size())
            fut = dist.all_reduce(buf, async_op=True).get_future()
            return fut.then(lambda f: f.value()[0])

        ddp.register_comm_hook(None, allreduce_mean_hook)

    opt = torch.optim.SGD(ddp.parameters(), lr=0.05, momentum=0.9)
    g = torch.Generator().manual_seed(99 + rank)  # each rank its own data
    x = torch.randn(STEPS, 16, 8, generator=g)
    w_true = torch.randn(8, 4, generator=torch.Generator().manual_seed(7))
    y = torch.tanh(x @ w_true)
    losses = []
    for step in range(STEPS):
        opt.zero_grad()
        loss = torch.nn.functional.mse_loss(ddp(x[step]), y[step])
        loss.backward()
        opt.step()
        losses.append(float(loss))
    params = {k: v.detach().clone() for k, v in model.state_dict().items()}
    return params, calls[0], losses


def w_train(rank, ws, bucket_cap_mb, use_hook):
    return _train(rank, ws, bucket_cap_mb, use_hook)


def _check_ranks_agree(results):
    p0 = results[0][0]
    for r, (p, _, _) in enumerate(results[1:], start=1):
        for k in p0:
            assert torch.equal(p0[k], p[k]), f"rank {r} parameter {k} differs from rank 0's"


def _assert_close(got, ref, label):
    for k in ref:
        torch.testing.assert_close(got[k], ref[k], rtol=1e-5, atol=1e-6,
                                   msg=lambda m, k=k: f"{label}: parameter {k}: {m}")


@pytest.mark.parametrize("bucket_cap_mb", [25, 0.0002], ids=["one_bucket", "many_buckets"])
def test_ddp_matches_gloo(dist_pool, gloo_pool, bucket_cap_mb):
    got = dist_pool(WS).run(w_train, bucket_cap_mb, False, timeout=120)
    ref = gloo_pool(WS).run(w_train, bucket_cap_mb, False, timeout=120)
    _check_ranks_agree(got)
    _check_ranks_agree(ref)
    _assert_close(got[0][0], ref[0][0], "backend under test vs gloo")
    # Training moved the model (the comparison is not between two untouched models).
    losses = got[0][2]
    assert sum(losses[-5:]) < sum(losses[:5]), losses


def test_ddp_python_comm_hook(dist_pool, gloo_pool):
    hooked = dist_pool(WS).run(w_train, 25, True, timeout=120)
    _check_ranks_agree(hooked)
    assert all(calls >= STEPS for _, calls, _ in hooked), [c for _, c, _ in hooked]
    plain = dist_pool(WS).run(w_train, 25, False, timeout=120)
    _assert_close(hooked[0][0], plain[0][0], "comm hook vs built-in allreduce")
    ref = gloo_pool(WS).run(w_train, 25, True, timeout=120)
    _assert_close(hooked[0][0], ref[0][0], "comm hook: backend under test vs gloo")
