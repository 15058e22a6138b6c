"""Soak: thousands of mixed collectives on several groups, every result checked, no leaks."""

from __future__ import annotations

import os
import random

import torch
import torch.distributed as dist

from dist_harness import occl_only

pytestmark = occl_only("measures occl's own memory and descriptors")

COLLECTIVES = 5000
OPS = ["all_reduce_sum", "all_reduce_max", "broadcast", "all_gather_into_tensor",
       "reduce_scatter_tensor", "all_to_all_single", "barrier"]
# Values stay small integers, so every dtype holds every sum exactly.
DTYPES = [torch.float32, torch.float64, torch.bfloat16, torch.int32, torch.int64]


def _rss_kib():
    with open("/proc/self/status") as status:
        return next(int(line.split()[1]) for line in status if line.startswith("VmRSS:"))


def _open_fds():
    return len(os.listdir("/proc/self/fd"))


def _values(member, step, n, dtype):
    return ((torch.arange(n) % 13) + member * 3 + step % 5).to(dtype)


def _run_one(op, group, members, me, step, n, dtype):
    """Runs one collective over `members` (global ranks; `me` is this rank's index among them)
    and returns None or what is wrong with its result."""
    k = len(members)
    mine = _values(me, step, n, dtype)
    if op == "all_reduce_sum":
        dist.all_reduce(mine, group=group)
        expected = sum(_values(m, step, n, torch.int64) for m in range(k)).to(dtype)
    elif op == "all_reduce_max":
        dist.all_reduce(mine, op=dist.ReduceOp.MAX, group=group)
        expected = _values(k - 1, step, n, dtype)
    elif op == "broadcast":
        root = step % k
        dist.broadcast(mine, src=members[root], group=group)
        expected = _values(root, step, n, dtype)
    elif op == "all_gather_into_tensor":
        out = torch.empty(n * k, dtype=dtype)
        dist.all_gather_into_tensor(out, mine, group=group)
        mine, expected = out, torch.cat([_values(m, step, n, dtype) for m in range(k)])
    elif op == "reduce_scatter_tensor":
        out = torch.empty(n, dtype=dtype)
        full = torch.cat([_values(me, step + j, n, dtype) for j in range(k)])
        dist.reduce_scatter_tensor(out, full, group=group)
        mine = out
        expected = sum(_values(m, step + me, n, torch.int64) for m in range(k)).to(dtype)
    elif op == "all_to_all_single":
        out = torch.empty(n * k, dtype=dtype)
        full = torch.cat([_values(me, step + j, n, dtype) for j in range(k)])
        dist.all_to_all_single(out, full, group=group)
        mine = out
        expected = torch.cat([_values(m, step + me, n, dtype) for m in range(k)])
    else:
        dist.barrier(group=group)
        return None
    if not torch.equal(mine, expected):
        return f"step {step}: {op} of {n} {dtype} over ranks {members} is wrong"
    return None


def w_soak(rank, ws, collectives, seed):
    # Three groups: the world, a second group over every rank, and pairs {0,1} and {2,3}.
    world = list(range(ws))
    second = dist.new_group(world, backend="occl")
    pairs = [dist.new_group([0, 1], backend="occl"), dist.new_group([2, 3], backend="occl")]
    pair_members = [0, 1] if rank < 2 else [2, 3]
    choices = [(None, world), (second, world), (pairs[rank // 2], pair_members)]

    rng = random.Random(seed)  # the same sequence on every rank
    errors = []
    samples = {}
    for step in range(collectives):
        group, members = choices[rng.randrange(3)]
        op = rng.choice(OPS)
        dtype = rng.choice(DTYPES)
        n = rng.choice([1, rng.randrange(1, 64), rng.randrange(64, 4096), rng.randrange(4096, 70_000)])
        error = _run_one(op, group, members, members.index(rank), step, n, dtype)
        if error and len(errors) < 5:
            errors.append(error)
        if step + 1 in (1000, collectives):
            samples[step + 1] = (_rss_kib(), _open_fds())
    for group in [second, *pairs]:
        dist.destroy_process_group(group)
    return errors, samples


def test_soak_four_ranks_three_groups(fresh_pool):
    pool = fresh_pool(4)
    results = pool.run(w_soak, COLLECTIVES, 1234, timeout=900)
    for rank, (errors, samples) in enumerate(results):
        assert not errors, f"rank {rank}: " + "; ".join(errors)
        (rss_first, fds_first), (rss_last, fds_last) = samples[1000], samples[COLLECTIVES]
        growth_mib = (rss_last - rss_first) / 1024
        assert growth_mib < 20, f"rank {rank}: RSS grew by {growth_mib:.1f} MiB"
        # Python itself may hold a transient descriptor at either sample: none may be added.
        assert fds_last <= fds_first, f"rank {rank}: open fds went {fds_first} -> {fds_last}"
