"""When ranks copy straight out of each other's tensors, and when they must not.

Ranks on one host run the single-copy algorithms for large messages (process_vm_readv,
torch_occl/csrc/transport/peer_memory.hpp) only when every rank may read every other's memory:
each group probes every pair when it forms. Their results are checked case by case in
test_collectives (forced single-copy algorithms) and test_extended_ops (alltoall); this file checks
the decision. A container's policy can forbid the system calls to one process only, so one rank
that may not read its peers must turn the single copies off for the whole group, not only for
itself (otherwise the ranks would run different algorithms and fail, or hang).
"""

from __future__ import annotations

import os
import platform
import warnings

import pytest
import torch
import torch.distributed as dist

from cross_memory import SYSCALLS, can_read, deny_cross_memory_attach
from dist_harness import DistPool, occl_only

pytestmark = occl_only("occl's own transport")

def w_single_copies_possible(rank, ws) -> bool:
    """Whether this pool's ranks can run the single-copy algorithms: shared memory in use, and
    nothing (Yama, seccomp) forbids reading a same-user process that is not a descendant."""
    return os.environ.get("OCCL_TRANSPORT", "auto") != "tcp" and can_read(os.getppid())


def w_one_rank_denied(rank, ws):
    """Rank 1 may not read its peers' memory; the others may read everyone's. A new group must
    agree on the rings, and give the right results for messages far above the single-copy
    threshold."""
    warnings.simplefilter("ignore", FutureWarning)
    parent = os.getppid()
    could_read = can_read(parent)
    if rank == 1:
        deny_cross_memory_attach()
    reads_after = can_read(parent)
    group = dist.new_group(backend="occl")
    count = 1 << 20  # 4 MiB of float32 per rank
    problems = []

    t = torch.full((count,), float(rank + 1))
    dist.all_reduce(t, group=group)
    if not torch.equal(t, torch.full((count,), ws * (ws + 1) / 2)):
        problems.append(f"all_reduce: {t[:4].tolist()}")

    t = torch.full((count,), float(rank + 1))
    dist.reduce(t, dst=ws - 1, group=group)
    expected = ws * (ws + 1) / 2 if rank == ws - 1 else rank + 1  # the others' stay as they were
    if not torch.equal(t, torch.full((count,), float(expected))):
        problems.append(f"reduce: {t[:4].tolist()}")

    t = torch.full((count,), float(rank + 1))
    dist.broadcast(t, src=ws - 1, group=group)
    if not torch.equal(t, torch.full((count,), float(ws))):
        problems.append(f"broadcast: {t[:4].tolist()}")

    per = count // ws
    send = torch.arange(per * ws, dtype=torch.float32) + 1000 * rank
    out = torch.empty(per * ws)
    dist.all_to_all_single(out, send, group=group)
    expected = torch.cat([torch.arange(rank * per, (rank + 1) * per, dtype=torch.float32) + 1000 * j
                          for j in range(ws)])
    if not torch.equal(out, expected):
        problems.append(f"all_to_all_single: {out[:4].tolist()}")

    gathered = torch.empty(count * ws)
    dist.all_gather_into_tensor(gathered, torch.full((count,), float(rank)), group=group)
    if not torch.equal(gathered, torch.arange(ws, dtype=torch.float32).repeat_interleave(count)):
        problems.append(f"all_gather_into_tensor: {gathered[::count].tolist()}")

    block = torch.empty(count)
    dist.reduce_scatter_tensor(block, torch.full((count * ws,), float(rank + 1)), group=group)
    if not torch.equal(block, torch.full((count,), ws * (ws + 1) / 2)):
        problems.append(f"reduce_scatter_tensor: {block[:4].tolist()}")

    dist.destroy_process_group(group)
    return could_read, reads_after, problems


@pytest.mark.skipif(platform.machine() not in SYSCALLS, reason="seccomp numbers for this CPU")
@pytest.mark.parametrize("world_size", [2, 3], ids=lambda n: f"ws{n}")
def test_one_rank_without_cross_memory_attach_turns_it_off_for_all(world_size):
    # A pool of its own: the seccomp filter cannot be taken back.
    with DistPool(world_size, "occl") as pool:
        results = pool.run(w_one_rank_denied, timeout=120)
    could_read = [r[0] for r in results]
    if not all(could_read):
        pytest.skip("this machine forbids cross-memory attach already: nothing to turn off")
    assert [r[1] for r in results] == [rank != 1 for rank in range(world_size)], \
        "the seccomp filter did not take effect on rank 1 alone"
    assert [r[2] for r in results] == [[]] * world_size


def w_alltoall_splits_disagree(rank, ws):
    """Rank 1 sends rank 0 twice the rows rank 0 expects, slices far above the single-copy
    threshold."""
    rows = 1 << 18  # 1 MiB of float32
    send_splits = [rows, rows] if rank == 0 else [2 * rows, rows]
    out = torch.empty(2 * rows)
    try:
        dist.all_to_all_single(out, torch.ones(sum(send_splits)), output_split_sizes=[rows, rows],
                               input_split_sizes=send_splits)
    except Exception as e:  # noqa: BLE001
        return str(e)
    return None


def test_single_copy_guards_a_receiver_without_the_signature_check():
    """With OCCL_CHECK_SIGNATURES=0 no rank learns the others' split sizes before the data: the
    single copy itself must refuse to write past the receiver's slice (the sender, which copied
    nothing wrong, cannot know)."""
    with DistPool(2, "occl", env={"OCCL_CHECK_SIGNATURES": "0"}) as pool:
        if not all(pool.run(w_single_copies_possible)):
            pytest.skip("no single copies here (TCP forced, or cross-memory attach forbidden)")
        error0, _ = pool.run(w_alltoall_splits_disagree, timeout=60)
    assert error0 is not None and (
        "rank 1 sends 2097152 bytes to rank 0, which expects 1048576 bytes "
        "(do the ranks agree on the split sizes?)") in error0, error0


# ---- point-to-point messages lent instead of sent ------------------------------------------
# Between ranks that may read each other's memory, a send of at least OCCL_P2P_LEND_MIN_BYTES
# passes only its address; the receiver copies the message out and tells the sender when its
# buffer is free (torch_occl/csrc/transport/p2p.hpp). A threshold of 1 byte lends every message
# the p2p tests send.

LEND_EVERYTHING = {"OCCL_P2P_LEND_MIN_BYTES": "1"}


def _p2p_problems(pool):
    import test_p2p as p2p

    problems = []
    for name, worker, args in [
        ("send_recv_pairs", p2p.w_send_recv_pairs, ("occl",)),
        ("isend_irecv_ring", p2p.w_isend_irecv_ring, ("occl",)),
        ("tags out of order, isend", p2p.w_tags_out_of_order, ("isend",)),
        # The receiver posts tag 1 only after tag 2 arrived: the blocking send of tag 1 must
        # complete without it (the receiver buffers a lent message nobody takes for a while).
        ("tags out of order, blocking send", p2p.w_tags_out_of_order, ("blocking_send",)),
        ("recv from any source", p2p.w_recv_any_source, ()),
        ("batch ring, sends first", p2p.w_batch_ring, ("occl", 4 << 20, 2, False)),
        ("batch ring, recvs first", p2p.w_batch_ring, ("occl", 4 << 20, 2, True)),
    ] + ([("recv posted while arriving", p2p.w_recv_posted_while_arriving, ())]
         if pool.world_size == 2 else []):  # it has ranks 0 and 1 only join its barriers
        for rank, per_rank in enumerate(pool.run(worker, *args, timeout=180)):
            problems += [f"{name}: rank {rank}: {p}" for p in per_rank]
    return problems


def _check_p2p_suite(pool):
    """The p2p suite, and a receive of another size, on `pool`."""
    import test_p2p as p2p

    problems = _p2p_problems(pool)
    error, next_ok = pool.run(p2p.w_recv_of_another_size, 1000)[1]
    assert not problems, "\n".join(problems[:40])
    assert error is not None and "rank 0 sent 4000 bytes with tag 3, but the receive expects " \
        "2000" in error, error
    assert next_ok


@pytest.mark.parametrize("world_size", [2, 3], ids=lambda n: f"ws{n}")
def test_p2p_with_every_message_lent(world_size):
    with DistPool(world_size, "occl", env=LEND_EVERYTHING) as pool:
        if not all(pool.run(w_single_copies_possible)):
            pytest.skip("no single copies here (TCP forced, or cross-memory attach forbidden)")
        _check_p2p_suite(pool)


# Over TCP, a message of at least OCCL_SINGLE_COPY_MIN_BYTES that nobody receives yet stays in the
# socket for up to 1 ms, for a receive posted meanwhile to read it straight into its tensor
# (transport/p2p.hpp). The same suite with every message held that way:
HOLD_EVERYTHING = {"OCCL_TRANSPORT": "tcp", "OCCL_SINGLE_COPY_MIN_BYTES": "1"}


@pytest.mark.parametrize("world_size", [2, 3], ids=lambda n: f"ws{n}")
def test_p2p_over_tcp_with_every_message_held_for_its_receive(world_size):
    with DistPool(world_size, "occl", env=HOLD_EVERYTHING) as pool:
        _check_p2p_suite(pool)


def w_lent_to_a_stopped_rank(rank, ws, group_timeout):
    """Rank 0 stops rank 1's process, lends it a message and must give up after the timeout;
    once resumed, rank 1 must not take the message (rank 0 may have freed it)."""
    import signal
    import time

    pids = [None] * ws
    dist.all_gather_object(pids, os.getpid())
    if rank == 0:
        os.kill(pids[1], signal.SIGSTOP)
        try:
            start = time.monotonic()
            try:
                dist.send(torch.ones(1 << 20), 1, tag=9)
                return "the send returned although its receiver was stopped"
            except RuntimeError as e:
                return time.monotonic() - start, str(e)
        finally:
            os.kill(pids[1], signal.SIGCONT)
    if rank == 1:
        time.sleep(group_timeout + 2)  # stopped in here, and resumed after rank 0 gave up
        got = torch.zeros(1 << 20)
        try:
            dist.recv(got, 0, tag=9)
            return f"received {got[:2].tolist()} from a sender that gave up"
        except RuntimeError as e:
            return str(e)
    return None


def test_lent_message_to_a_stopped_rank_times_out():
    group_timeout = 3.0
    with DistPool(2, "occl", env=LEND_EVERYTHING, group_timeout=group_timeout) as pool:
        if not all(pool.run(w_single_copies_possible)):
            pytest.skip("no single copies here (TCP forced, or cross-memory attach forbidden)")
        sender, receiver = pool.run(w_lent_to_a_stopped_rank, group_timeout, timeout=60)
    assert isinstance(sender, tuple), sender
    elapsed, error = sender
    assert "rank 1 did not copy a lent message in time" in error, error
    assert group_timeout * 0.8 < elapsed < group_timeout + 5, elapsed
    assert "rank 0 closed the connection" in receiver, receiver
