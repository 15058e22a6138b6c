"""Process groups beyond the default one: dist.new_group, dist.new_subgroups,
dist.new_subgroups_by_enumeration, on a default group of the backend under test.

Every new group is created with the backend under test (explicitly, or by inheriting the
default group's backend). Collectives on two overlapping groups are put in flight at once
(async_op=True on both, issued in different orders on different ranks) and must neither
deadlock nor mix up their data. Groups are destroyed at the end of each task, so the shared
pools stay clean. Expected values are computed in Python from the ranks' inputs.
"""

from __future__ import annotations

import pytest
import torch
import torch.distributed as dist

N_BIG = 300_000  # floats: large enough for occl's ring path, so the ops overlap in time


def _val(global_rank, salt, n=N_BIG, dtype=torch.float32):
    """Deterministic, exactly summable input of `global_rank`."""
    return (torch.arange(n, dtype=torch.float64) % 97 + 1000 * global_rank + salt).to(dtype)


def _expect(cond, msg, problems):
    if not cond:
        problems.append(msg)


def w_overlapping_groups(rank, ws, backend, explicit_backend):
    """Two overlapping groups A = ranks[:-1], B = ranks[1:] (ws >= 3). Ranks in both issue
    their A and B ops in opposite orders (rank 1: A first; rank 2: B first ...)."""
    problems = []
    kw = {"backend": backend} if explicit_backend else {}
    a_ranks = list(range(ws - 1))
    b_ranks = list(range(1, ws))
    ga = dist.new_group(a_ranks, **kw)
    gb = dist.new_group(b_ranks, **kw)
    try:
        for it in range(3):
            jobs = []  # (name, work, check)
            order = [("A", ga, a_ranks), ("B", gb, b_ranks)]
            if rank % 2 == 0:
                order.reverse()
            for name, g, members in order:
                if rank not in members:
                    continue
                salt = 17 * it + (0 if name == "A" else 5)
                # all_reduce (large)
                t = _val(rank, salt)
                exp = sum(_val(r, salt, dtype=torch.float64) for r in members).float()
                jobs.append((f"{name} all_reduce", dist.all_reduce(t, group=g, async_op=True),
                             t, exp))
                # all_gather_into_tensor
                gin = _val(rank, salt + 1, n=1000)
                gout = torch.zeros(1000 * len(members))
                jobs.append((f"{name} all_gather_into_tensor",
                             dist.all_gather_into_tensor(gout, gin, group=g, async_op=True),
                             gout, torch.cat([_val(r, salt + 1, n=1000) for r in members])))
                # broadcast from the group's last member (a global rank)
                src = members[-1]
                bt = _val(rank, salt + 2, n=5000)
                jobs.append((f"{name} broadcast src={src}",
                             dist.broadcast(bt, src=src, group=g, async_op=True),
                             bt, _val(src, salt + 2, n=5000)))
                # reduce to the group's first member
                dst = members[0]
                rt = _val(rank, salt + 3, n=3000)
                # Non-root tensors stay untouched (gloo uses them as scratch: not checked).
                rexp = sum(_val(r, salt + 3, n=3000, dtype=torch.float64)
                           for r in members).float() if rank == dst else rt.clone()
                if rank != dst and backend != "occl":
                    rexp = None
                jobs.append((f"{name} reduce dst={dst}",
                             dist.reduce(rt, dst=dst, group=g, async_op=True), rt, rexp))
            for name, work, got, exp in reversed(jobs):
                work.wait()
            for name, work, got, exp in jobs:
                if exp is None:
                    continue
                _expect(torch.equal(got, exp),
                        f"rank {rank} iter {it}: {name}: got {got[:3].tolist()}..., expected "
                        f"{exp[:3].tolist()}...", problems)
        # The default group still works while the subgroups exist.
        t = torch.ones(4)
        dist.all_reduce(t)
        _expect(t.tolist() == [float(ws)] * 4, f"rank {rank}: WORLD all_reduce: {t}", problems)
        # Backend of the new groups.
        for name, g, members in (("A", ga, a_ranks), ("B", gb, b_ranks)):
            if rank in members:
                got = dist.get_backend(g)
                _expect(got == backend, f"rank {rank}: group {name} backend {got!r}", problems)
                _expect(dist.get_world_size(g) == len(members),
                        f"rank {rank}: group {name} size {dist.get_world_size(g)}", problems)
                _expect(dist.get_rank(g) == members.index(rank),
                        f"rank {rank}: group {name} rank {dist.get_rank(g)}", problems)
    finally:
        for g in (ga, gb):
            if g is not None and g != dist.GroupMember.NON_GROUP_MEMBER:
                dist.destroy_process_group(g)
    return problems


def w_subgroups(rank, ws, backend):
    """dist.new_subgroups(group_size=2): every extended op inside the subgroup, with an
    all_reduce on the default group in flight at the same time."""
    problems = []
    cur, subgroups = dist.new_subgroups(group_size=2)
    try:
        members = [rank - rank % 2, rank - rank % 2 + 1]
        me = members.index(rank)
        peer = members[1 - me]
        _expect(dist.get_backend(cur) == backend,
                f"rank {rank}: subgroup backend {dist.get_backend(cur)!r}", problems)
        # A WORLD all_reduce and a subgroup all_reduce in flight together.
        wt = _val(rank, 1)
        st = _val(rank, 2)
        w1 = dist.all_reduce(wt, async_op=True)
        w2 = dist.all_reduce(st, group=cur, async_op=True)
        w2.wait()
        w1.wait()
        _expect(torch.equal(wt, sum(_val(r, 1, dtype=torch.float64) for r in range(ws)).float()),
                f"rank {rank}: WORLD all_reduce during subgroup op: {wt[:3].tolist()}", problems)
        _expect(torch.equal(st, sum(_val(r, 2, dtype=torch.float64) for r in members).float()),
                f"rank {rank}: subgroup all_reduce: {st[:3].tolist()}", problems)
        # all_to_all_single with uneven splits inside the subgroup.
        splits = {members[0]: [1, 3], members[1]: [2, 0]}  # rows to group rank 0, 1
        rows_in = sum(splits[rank])
        inp = torch.arange(rows_in * 4, dtype=torch.int64).reshape(rows_in, 4) + 100 * rank
        out_splits = [splits[m][me] for m in members]
        out = torch.zeros(sum(out_splits), 4, dtype=torch.int64)
        dist.all_to_all_single(out, inp, out_splits, splits[rank], group=cur)
        parts = []
        for m in members:
            src_in = torch.arange(sum(splits[m]) * 4, dtype=torch.int64).reshape(-1, 4) + 100 * m
            off = sum(splits[m][:me])
            parts.append(src_in[off:off + splits[m][me]])
        _expect(torch.equal(out, torch.cat(parts)),
                f"rank {rank}: subgroup all_to_all_single: {out.tolist()}", problems)
        # gather / scatter with group ranks (group_dst / group_src).
        g_in = torch.full((7,), float(rank))
        g_out = [torch.zeros(7) for _ in members] if me == 1 else None
        dist.gather(g_in, g_out, group=cur, group_dst=1)
        if me == 1:
            for i, m in enumerate(members):
                _expect(g_out[i].tolist() == [float(m)] * 7,
                        f"rank {rank}: subgroup gather[{i}] = {g_out[i].tolist()}", problems)
        s_out = torch.zeros(5, dtype=torch.int32)
        s_in = [torch.full((5,), 10 * i + 3, dtype=torch.int32) for i in range(2)] \
            if me == 0 else None
        dist.scatter(s_out, s_in, group=cur, group_src=0)
        _expect(s_out.tolist() == [10 * me + 3] * 5,
                f"rank {rank}: subgroup scatter: {s_out.tolist()}", problems)
        # reduce_scatter_tensor, all_gather, all_gather_object inside the subgroup.
        rs_in = torch.arange(8, dtype=torch.float32) * (rank + 1)
        rs_out = torch.zeros(4)
        dist.reduce_scatter_tensor(rs_out, rs_in, group=cur)
        exp = (torch.arange(8, dtype=torch.float32) * sum(m + 1 for m in members))[4 * me:4 * me
                                                                                      + 4]
        _expect(torch.equal(rs_out, exp), f"rank {rank}: subgroup reduce_scatter_tensor: "
                f"{rs_out.tolist()}", problems)
        objs = [None, None]
        dist.all_gather_object(objs, {"rank": rank}, group=cur)
        _expect(objs == [{"rank": m} for m in members],
                f"rank {rank}: subgroup all_gather_object: {objs}", problems)
        # send / recv and batch_isend_irecv by group rank.
        payload = torch.arange(1000, dtype=torch.float64) + rank
        got = torch.zeros(1000, dtype=torch.float64)
        if me == 0:
            dist.send(payload, group=cur, group_dst=1)
            dist.recv(got, group=cur, group_src=1)
        else:
            dist.recv(got, group=cur, group_src=0)
            dist.send(payload, group=cur, group_dst=0)
        _expect(torch.equal(got, torch.arange(1000, dtype=torch.float64) + peer),
                f"rank {rank}: subgroup send/recv: {got[:3].tolist()}", problems)
        big = _val(rank, 9, n=1 << 20)
        into = torch.zeros(1 << 20)
        reqs = dist.batch_isend_irecv([dist.P2POp(dist.isend, big, group=cur, group_peer=1 - me),
                                       dist.P2POp(dist.irecv, into, group=cur,
                                                  group_peer=1 - me)])
        for r in reqs:
            r.wait()
        _expect(torch.equal(into, _val(peer, 9, n=1 << 20)),
                f"rank {rank}: subgroup batch_isend_irecv: {into[:3].tolist()}", problems)
        # recv from any source inside the subgroup: returns the sender's *global* rank.
        if me == 0:
            t = torch.zeros(3)
            src = dist.recv(t, group=cur)
            _expect(src == peer and t.tolist() == [float(peer)] * 3,
                    f"rank {rank}: subgroup recv any source: src {src}, {t.tolist()}", problems)
        else:
            dist.send(torch.full((3,), float(rank)), group=cur, group_dst=0)
        dist.barrier(group=cur)
    finally:
        for g in subgroups:
            dist.destroy_process_group(g)
    t = torch.ones(2)
    dist.all_reduce(t)
    _expect(t.tolist() == [float(ws)] * 2, f"rank {rank}: WORLD after destroy: {t}", problems)
    return problems


def w_enumerated_subgroups(rank, ws):
    """new_subgroups_by_enumeration([[0, 3], [1, 2]]) plus a one-rank group per rank; the two
    pairs run async all_reduces of different sizes at once."""
    problems = []
    cur, groups = dist.new_subgroups_by_enumeration([[0, 3], [1, 2]])
    singles = [dist.new_group([r]) for r in range(ws)]
    try:
        members = [0, 3] if rank in (0, 3) else [1, 2]
        n = 200_000 if members == [0, 3] else 1_000
        t = _val(rank, 4, n=n)
        work = dist.all_reduce(t, op=dist.ReduceOp.MAX, group=cur, async_op=True)
        mine = singles[rank]
        s = torch.full((5,), 7.0)
        dist.all_reduce(s, group=mine)
        work.wait()
        _expect(torch.equal(t, _val(max(members), 4, n=n)),
                f"rank {rank}: enumerated subgroup MAX: {t[:3].tolist()}", problems)
        _expect(s.tolist() == [7.0] * 5, f"rank {rank}: one-rank group: {s.tolist()}", problems)
        _expect(dist.get_world_size(mine) == 1, f"rank {rank}: one-rank group size", problems)
    finally:
        for g in list(groups) + [g for g in singles
                                 if g is not None and g != dist.GroupMember.NON_GROUP_MEMBER]:
            dist.destroy_process_group(g)
    return problems


@pytest.mark.parametrize("explicit_backend", [True, False], ids=["backend_arg", "inherited"])
@pytest.mark.parametrize("world_size", [3, 4], ids=lambda n: f"ws{n}")
def test_overlapping_groups_in_flight(dist_pool, backend, world_size, explicit_backend):
    problems = [p for per in dist_pool(world_size).run(
        w_overlapping_groups, backend, explicit_backend, timeout=120) for p in per]
    assert not problems, "\n".join(problems[:40])


def test_new_subgroups(dist_pool, backend):
    problems = [p for per in dist_pool(4).run(w_subgroups, backend, timeout=120) for p in per]
    assert not problems, "\n".join(problems[:40])


def test_subgroups_by_enumeration_and_single_rank_groups(dist_pool):
    problems = [p for per in dist_pool(4).run(w_enumerated_subgroups, timeout=60) for p in per]
    assert not problems, "\n".join(problems[:40])
