"""Collectives over a group that spans hosts: within each host, across hosts, within again
(torch_occl/csrc/algorithms/hierarchical.hpp).

Hosts here are made with OCCL_HOST_ID: ranks with different values never share memory, so they
talk TCP as ranks on two machines would (tests/test_two_hosts.py runs real network namespaces).
"""

from __future__ import annotations

import datetime
import os
import platform
import socket
import struct
import warnings

import pytest
import torch
import torch.distributed as dist

from cross_memory import SYSCALLS, can_read, deny_cross_memory_attach
from dist_harness import DistPool, occl_only

pytestmark = occl_only("occl's algorithms")

AUTO = {"OCCL_TRANSPORT": "auto"}
BYTES_ACKED_AT = 120  # struct tcp_info: tcpi_bytes_acked (linux/tcp.h)


def hosts_env(world_size, per_host, interleaved=False):
    """Ranks 0..per_host-1 on the first host, and so on; or, interleaved, rank r on host
    r % (world_size // per_host)."""
    hosts = world_size // per_host
    return {r: {"OCCL_HOST_ID": f"host{r % hosts if interleaved else r // per_host}"}
            for r in range(world_size)}


def _bytes_sent_over_tcp():
    """Bytes this process's TCP connections have had acknowledged, all of them together."""
    total = 0
    for name in os.listdir("/proc/self/fd"):
        try:
            sock = socket.socket(fileno=os.dup(int(name)))
        except OSError:
            continue
        with sock:
            if sock.family != socket.AF_INET or sock.type != socket.SOCK_STREAM:
                continue
            try:
                sock.getpeername()
                info = sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_INFO, 256)
            except OSError:
                continue
            if len(info) >= BYTES_ACKED_AT + 8:
                total += struct.unpack_from("Q", info, BYTES_ACKED_AT)[0]
    return total


def w_every_size(rank, ws, dtype_name):
    """all_reduce (SUM, MAX), all_gather_into_tensor, reduce_scatter_tensor and broadcast (from
    a root that moves with the size) at sizes from the direct path up: uneven shares, shares
    smaller than the hosts, whole pieces."""
    dtype = getattr(torch, dtype_name)
    wrong = []
    for n in (7, 70_001, 262_147, 1 << 21):
        base = torch.arange(n) % 89
        t = (base + rank).to(dtype)
        dist.all_reduce(t)
        if not torch.equal(t, (base * ws + sum(range(ws))).to(dtype)):
            wrong.append(("sum", n, int((t != (base * ws + sum(range(ws))).to(dtype)).sum())))
        m = torch.full((n,), float(rank % 3), dtype=dtype)
        m[n // 2] = -rank
        dist.all_reduce(m, op=dist.ReduceOp.MAX)
        expected = torch.full((n,), float(min(2, ws - 1)), dtype=dtype)
        expected[n // 2] = 0
        if not torch.equal(m, expected):
            wrong.append(("max", n))
        block = max(1, n // ws)
        gathered = torch.empty(block * ws, dtype=dtype)
        dist.all_gather_into_tensor(gathered, (torch.arange(block) % 89 + 100 * rank).to(dtype))
        expected = torch.cat([(torch.arange(block) % 89 + 100 * r).to(dtype) for r in range(ws)])
        if not torch.equal(gathered, expected):
            wrong.append(("all_gather", block))
        inputs = (torch.arange(block * ws) % 89 + rank).to(dtype)
        reduced = torch.empty(block, dtype=dtype)
        dist.reduce_scatter_tensor(reduced, inputs)
        whole = (torch.arange(block * ws) % 89) * ws + sum(range(ws))
        if not torch.equal(reduced, whole[rank * block:(rank + 1) * block].to(dtype)):
            wrong.append(("reduce_scatter", block))
        root = n % ws
        sent = (base + 7 * root).to(dtype)
        t = sent.clone() if rank == root else torch.zeros(n, dtype=dtype)
        dist.broadcast(t, root)
        if not torch.equal(t, sent):
            wrong.append(("broadcast", n, root))
    # Bytes that leave the first of 2 or 3 shares a whole number of 256 KiB pieces and the last
    # one byte more.
    for nbytes in (2 * 262_144 + 1, 3 * 262_144 + 2):
        sent = (torch.arange(nbytes) % 251).to(torch.uint8)
        t = sent.clone() if rank == 0 else torch.zeros(nbytes, dtype=torch.uint8)
        dist.broadcast(t, 0)
        if not torch.equal(t, sent):
            wrong.append(("broadcast", nbytes, int((t != sent).sum())))
    return wrong


@pytest.mark.parametrize("world_size,per_host,interleaved",
                         [(4, 2, False), (6, 3, False), (6, 2, False), (6, 3, True), (3, 2, False)],
                         ids=["2x2", "2x3", "3x2", "2x3-interleaved", "uneven-2+1"])
@pytest.mark.parametrize("dtype", ["float32", "bfloat16", "int64"])
def test_collectives_across_hosts_match_python(world_size, per_host, interleaved, dtype):
    # 2+1 ranks cannot be split evenly: the flat rings run there, and must be as right.
    # Interleaved hosts number their ranks out of order: rank 0, 2, 4 on one host.
    env = hosts_env(world_size, per_host, interleaved)
    with DistPool(world_size, env=AUTO, rank_env=env) as pool:
        for rank, wrong in enumerate(pool.run(w_every_size, dtype)):
            assert wrong == [], f"rank {rank}: wrong {wrong}"


def w_tcp_bytes_per_call(rank, ws, op, nbytes, rounds, root=0):
    """Bytes this rank sent over TCP per call of `op` on `nbytes` per rank (the all_reduce's
    and the broadcast's tensor, the all-gather's input block, the reduce-scatter's output
    block)."""
    data = torch.ones(nbytes // 4)
    whole = torch.ones(ws * nbytes // 4)
    call = {"all_reduce": lambda: dist.all_reduce(data),
            "all_gather": lambda: dist.all_gather_into_tensor(whole, data),
            "reduce_scatter": lambda: dist.reduce_scatter_tensor(data, whole),
            "broadcast": lambda: dist.broadcast(data, root)}[op]
    call()  # links warmed, buffers grown
    dist.barrier()
    before = _bytes_sent_over_tcp()
    for _ in range(rounds):
        call()
    dist.barrier()
    return (_bytes_sent_over_tcp() - before) / rounds


# What each rank of 2 hosts x 2 sends across hosts per call, in units of `nbytes`:
# - all_reduce: half its host's sum in the reduce-scatter, half in the allgather, a quarter of
#   the tensor each way;
# - all_gather and reduce_scatter: its own block (or the other host's block at its place).
# The flat rings 0 -> 1 -> 2 -> 3 -> 0 cross only from ranks 1 and 3, three times as much each
# (1.5 times the tensor for all_reduce), and not at all from ranks 0 and 2.
@pytest.mark.parametrize("op,share", [("all_reduce", 0.5), ("all_gather", 1.0),
                                      ("reduce_scatter", 1.0)])
def test_every_rank_sends_its_share_across_hosts(op, share):
    nbytes, rounds = 4 << 20, 5
    with DistPool(4, env=AUTO, rank_env=hosts_env(4, 2)) as pool:
        sent = pool.run(w_tcp_bytes_per_call, op, nbytes, rounds)
    for rank, per_call in enumerate(sent):
        assert 0.9 * share * nbytes < per_call < 1.2 * share * nbytes, (
            f"rank {rank} sent {per_call / nbytes:.2f}x {nbytes} bytes over TCP per {op}, "
            f"expected {share}x; every rank: {[round(s / nbytes, 2) for s in sent]}")


# A broadcast crosses hosts once: each rank of the root's host sends half the tensor, its share,
# to the rank at its place on the other host. The flat chain root, root+1, ... crosses wherever
# the next rank lives on the other host, all of the tensor each time: from ranks 1 and 3
# (1 -> 2 -> 3 -> 0) in the first case, from ranks 0, 1 and 2 in the second.
@pytest.mark.parametrize("interleaved,root", [(False, 1), (True, 0)],
                         ids=["2x2-root-1", "2x2-interleaved-root-0"])
def test_a_broadcast_crosses_hosts_once_in_shares(interleaved, root):
    nbytes, rounds = 4 << 20, 5
    env = hosts_env(4, 2, interleaved)
    with DistPool(4, env=AUTO, rank_env=env) as pool:
        sent = pool.run(w_tcp_bytes_per_call, "broadcast", nbytes, rounds, root)
    shares = [round(s / nbytes, 2) for s in sent]
    for rank, per_call in enumerate(sent):
        expected = 0.5 if env[rank] == env[root] else 0
        assert abs(per_call / nbytes - expected) < 0.1, (
            f"rank {rank} sent {per_call / nbytes:.2f}x the tensor over TCP per broadcast from "
            f"rank {root}, expected {expected}x; every rank: {shares}")


def w_broadcasts_with_one_rank_denied(rank, ws):
    """Rank 3 may not read its host's other rank (2); host 0's ranks may read each other. A new
    group's host 1 must agree on rings while host 0 copies straight from the root: broadcasts
    from every root, checked."""
    warnings.simplefilter("ignore", FutureWarning)
    could_read = can_read(os.getppid())
    if rank == 3:
        deny_cross_memory_attach()
    group = dist.new_group(backend="occl")
    wrong = []
    for root in range(ws):
        # 1 and 8 MiB, and 512 KiB + 1 byte: the shares in as many pieces, one piece empty.
        for sent in (torch.arange(1 << 18, dtype=torch.float32) + 7 * root,
                     torch.arange(1 << 21, dtype=torch.float32) + 7 * root,
                     ((torch.arange(2 * 262_144 + 1) + root) % 251).to(torch.uint8)):
            t = sent.clone() if rank == root else torch.zeros_like(sent)
            dist.broadcast(t, root, group=group)
            if not torch.equal(t, sent):
                wrong.append((root, t.nbytes))
    dist.destroy_process_group(group)
    return could_read, wrong


@pytest.mark.skipif(platform.machine() not in SYSCALLS, reason="seccomp numbers for this CPU")
def test_a_host_whose_ranks_may_not_copy_from_each_other_broadcasts_through_rings():
    # A pool of its own: the seccomp filter cannot be taken back.
    with DistPool(4, env=AUTO, rank_env=hosts_env(4, 2)) as pool:
        results = pool.run(w_broadcasts_with_one_rank_denied, timeout=120)
    if not all(could_read for could_read, _ in results):
        pytest.skip("this machine forbids cross-memory attach already")
    for rank, (_, wrong) in enumerate(results):
        assert wrong == [], f"rank {rank}: wrong broadcasts (root, bytes) {wrong}"


def w_split_across_hosts(rank, ws, nbytes, rounds):
    """Ranks 0-3 (hosts 0 and 1) and 4-5 (host 2) split the world (ProcessGroup.split_group);
    returns (sums right, bytes sent over TCP per allreduce of the subgroup)."""
    members = [0, 1, 2, 3] if rank < 4 else [4, 5]
    sub = dist.group.WORLD.split_group(members, timeout=datetime.timedelta(seconds=60),
                                       group_name=f"from-{members[0]}")
    t = torch.full((nbytes // 4,), float(rank))
    sub.allreduce([t]).wait()
    right = bool(torch.all(t == sum(members)))
    dist.barrier()
    before = _bytes_sent_over_tcp()
    for _ in range(rounds):
        sub.allreduce([t]).wait()
    dist.barrier()
    return right, (_bytes_sent_over_tcp() - before) / rounds


def test_a_split_subgroup_spanning_hosts_runs_in_two_levels():
    # The subgroup learns its members' hosts from the group's: ranks 0-3 are 2 hosts x 2.
    nbytes, rounds = 4 << 20, 3
    with DistPool(6, env=AUTO, rank_env=hosts_env(6, 2)) as pool:
        results = pool.run(w_split_across_hosts, nbytes, rounds)
    for rank, (right, sent) in enumerate(results):
        assert right, f"rank {rank}: wrong sums"
        if rank < 4:
            assert 0.45 * nbytes < sent < 0.6 * nbytes, (
                f"rank {rank} sent {sent / nbytes:.2f}x the tensor over TCP per allreduce; "
                f"ranks 0-3: {[round(s / nbytes, 2) for _, s in results[:4]]}")
