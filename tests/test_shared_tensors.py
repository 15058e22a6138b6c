"""Tensors in shared memory: collectives on them copy through shared mappings.

They come from torch_occl.shared_empty, whose tensors lie in memfds every other rank maps
(torch_occl/_shared.py, torch_occl/csrc/transport/shared_segments.hpp), or from the backend's
allocate_tensor (what FSDP2 asks for its buffers), whose pooled segments a peer maps the first
time a copy meets them (transport/segment_pool.hpp). occl's single-copy collectives then copy
with memcpy through the mappings instead of with process_vm_readv. Each result is checked
against values computed in Python, and `_bytes_through_shared_segments` tells, op by op, how many
bytes took the mappings.
"""

from __future__ import annotations

import gc
import os
import platform
import warnings

import pytest
import torch
import torch.distributed as dist

from cross_memory import SYSCALLS, deny_cross_memory_attach
from dist_harness import DistPool, occl_only

pytestmark = occl_only("torch_occl.shared_empty")

# Elements per rank: 1 MiB of float32, above the single-copy threshold (256 KiB).
COUNT = 1 << 18
BYTES = COUNT * 4
# Bytes of the tensor in front of the broadcast's view, so that the view starts inside a segment.
VIEW_OFFSET = 1024


def _through_mappings() -> int:
    import torch_occl

    return torch_occl._C._bytes_through_shared_segments()


def _occl_mappings() -> int:
    with open("/proc/self/maps") as maps:
        return sum("/memfd:occl" in line for line in maps)


def _expected_bytes(rank: int, n: int) -> dict:
    """What each op moves through this rank's mappings when every tensor is shared."""
    peers = n - 1
    # The reductions' segments: [COUNT * r / n, COUNT * (r + 1) / n), rounded down.
    segment = (COUNT * (rank + 1) // n - COUNT * rank // n) * 4
    return {
        # Each receiver reads the root's tensor; two ranks take the ring (algorithms.cpp).
        "broadcast": 0 if rank == n - 1 or n == 2 else BYTES,
        # all_reduce: this rank's segment, read from each peer, then the peers' reduced segments.
        "all_reduce": peers * segment + BYTES - segment,
        # reduce to rank n - 1: this rank's segment, read from each peer (the root then copies the
        # others' reduced segments out of ordinary buffers, which no rank maps).
        "reduce": peers * segment,
        "all_gather_into_tensor": peers * BYTES,
        "reduce_scatter_tensor": peers * BYTES,
        "all_to_all_single": peers * BYTES,
    }


def _allocate_tensor(count, dtype=torch.float32):
    backend = dist.group.WORLD._get_backend(torch.device("cpu"))
    return backend.allocate_tensor(count, dtype=dtype, device=torch.device("cpu"))


def _run_collectives(rank, world_size, shared, source="shared_empty"):
    """Every single-copy collective once, on tensors in shared memory from `source`
    ("shared_empty" or "allocate_tensor") (`shared` True), on ordinary ones (False), or with
    only rank 0's shared ("rank 0"): per op, the bytes this rank moved through its mappings and
    whether the result was right."""
    import torch_occl

    kept = []  # a rank maps its peers' segments while it holds its own tensor of the call
    own_shared = shared is True or (shared == "rank 0" and rank == 0)

    def empty(count):
        if source == "allocate_tensor":
            return _allocate_tensor(count) if own_shared else torch.empty(count)
        tensor = torch_occl.shared_empty(count)  # collective: every rank calls it
        if own_shared:
            return tensor
        kept.append(tensor)
        return torch.empty(count)

    n = world_size
    block = torch.arange(COUNT, dtype=torch.float32)
    results = {}

    def measure(op, run, check):
        before = _through_mappings()
        run()
        results[op] = (_through_mappings() - before, bool(check()))

    data = empty(VIEW_OFFSET + COUNT)[VIEW_OFFSET:]
    data.copy_(block + 1000 * rank)
    measure("broadcast", lambda: dist.broadcast(data, src=n - 1),
            lambda: torch.equal(data, block + 1000 * (n - 1)))

    data.copy_(block + 1000 * rank)
    measure("all_reduce", lambda: dist.all_reduce(data),
            lambda: torch.equal(data, n * block + 1000 * sum(range(n))))

    data.copy_(block + 1000 * rank)
    reduced = n * block + 1000 * sum(range(n)) if rank == n - 1 else block + 1000 * rank
    measure("reduce", lambda: dist.reduce(data, dst=n - 1), lambda: torch.equal(data, reduced))

    gathered = empty(n * COUNT)
    data.copy_(block + 1000 * rank)
    measure("all_gather_into_tensor", lambda: dist.all_gather_into_tensor(gathered, data),
            lambda: torch.equal(gathered, torch.cat([block + 1000 * r for r in range(n)])))

    scattered = empty(COUNT)
    gathered.copy_(torch.arange(n * COUNT, dtype=torch.float32) + 1000 * rank)
    mine = torch.arange(rank * COUNT, (rank + 1) * COUNT, dtype=torch.float32)
    measure("reduce_scatter_tensor", lambda: dist.reduce_scatter_tensor(scattered, gathered),
            lambda: torch.equal(scattered, n * mine + 1000 * sum(range(n))))

    # Block j of rank r's input holds 100 * r + j; block j of the output came from rank j.
    received = empty(n * COUNT)
    sent = empty(n * COUNT)
    sent.copy_((100 * rank + torch.arange(n, dtype=torch.float32)).repeat_interleave(COUNT))
    expected = (100 * torch.arange(n, dtype=torch.float32) + rank).repeat_interleave(COUNT)
    measure("all_to_all_single", lambda: dist.all_to_all_single(received, sent),
            lambda: torch.equal(received, expected))
    return results


@pytest.mark.parametrize("source", ["shared_empty", "allocate_tensor"])
@pytest.mark.parametrize("world_size", [2, 3], ids=lambda n: f"ws{n}")
def test_collectives_on_shared_tensors_copy_through_the_mappings(world_size, source):
    with DistPool(world_size, "occl") as pool:
        shared = pool.run(_run_collectives, True, source)
        for rank, results in enumerate(shared):
            assert all(right for _, right in results.values()), results
            for op, expected in _expected_bytes(rank, world_size).items():
                if expected is not None:
                    assert results[op][0] == expected, (op, rank)

        for results in pool.run(_run_collectives, False, source):
            assert results == {op: (0, True) for op in results}

        # Only rank 0's tensors are shared: the others copy from them through their mappings;
        # rank 0 copies from theirs through the kernel.
        only_rank_0 = pool.run(_run_collectives, "rank 0", source)
        assert all(right for results in only_rank_0 for _, right in results.values())
        assert all(moved == 0 for moved, _ in only_rank_0[0].values())
        for results in only_rank_0[1:]:
            assert results["all_gather_into_tensor"][0] == BYTES  # rank 0's block
            assert results["all_to_all_single"][0] == BYTES  # rank 0's slice for it


def _broadcast_of_unequal_views(rank, world_size):
    """Rank 0 broadcasts 1 MiB, the others receive 2 MiB, all views of shared tensors: sizes the
    ranks would never agree on with the op signatures checked (three ranks: two would take the
    ring)."""
    import torch_occl

    tensor = torch_occl.shared_empty(2 * COUNT)
    view = tensor[:COUNT] if rank == 0 else tensor
    try:
        dist.broadcast(view, src=0)
    except Exception as error:  # the group is broken from here on: no more collectives
        return str(error)
    return None


def test_a_copy_past_a_peers_buffer_fails_instead_of_reading_past_it():
    # Without the check, rank 1 would read a second MiB past rank 0's view, out of the rest of
    # rank 0's segment, and nothing would fail.
    with DistPool(3, "occl", env={"OCCL_CHECK_SIGNATURES": "0"}, group_timeout=3) as pool:
        root, *receivers = pool.run(_broadcast_of_unequal_views)
    for receiver in receivers:
        assert f"a copy of {2 * BYTES} bytes at offset 0 runs past rank 0's buffer of {BYTES} " \
            "bytes" in receiver
    assert root is not None  # it fails too (the receivers never reach the closing barrier)


def _mappings_while_allocated(rank, world_size):
    import torch_occl

    baseline = _occl_mappings()  # the group's shared-memory rings
    tensor = torch_occl.shared_empty(4, 1024)
    allocated = _occl_mappings()
    dist.broadcast(tensor, src=0)
    del tensor
    gc.collect()
    dist.barrier()  # the previous collective's tensors are held until the next one
    names = sorted(name for name in os.listdir("/dev/shm") if "occl" in name)
    return baseline, allocated, _occl_mappings(), names


def test_every_rank_maps_every_segment_until_it_frees_its_tensor():
    with DistPool(3, "occl") as pool:
        for baseline, allocated, freed, shm_names in pool.run(_mappings_while_allocated):
            assert allocated == baseline + 3  # its own segment and both peers'
            assert freed == baseline
            assert shm_names == []  # a memfd is never named in /dev/shm


def _shared_empty_warnings(rank, world_size, deny_rank):
    """shared_empty's tensor on this rank: (mapped, the warnings it gave)."""
    import torch_occl

    if rank == deny_rank:
        deny_cross_memory_attach()
    baseline = _occl_mappings()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        tensor = torch_occl.shared_empty(COUNT)
    assert tensor.shape == (COUNT,)
    return _occl_mappings() > baseline, [str(w.message) for w in caught]


@pytest.mark.skipif(platform.machine() not in SYSCALLS, reason="seccomp numbers for this CPU")
def test_ranks_that_may_not_copy_from_each_other_get_ordinary_tensors_and_a_warning():
    with DistPool(2, "occl") as pool:
        # Rank 1 may not make the system call; both ranks learn it and agree.
        message = ("torch_occl.shared_empty: an ordinary tensor, as rank 1 may not copy from "
                   "rank 0's memory (Operation not permitted)")
        assert pool.run(_shared_empty_warnings, 1) == [(False, [message])] * 2


def test_a_group_of_another_backend_gets_ordinary_tensors_and_a_warning():
    with DistPool(2, "gloo") as pool:
        message = "torch_occl.shared_empty: an ordinary tensor, as rank 0: the group's backend is gloo"
        assert pool.run(_shared_empty_warnings, -1) == [(False, [message])] * 2


def _shared_empty_over_tcp(rank, world_size):
    import torch_occl

    baseline = _occl_mappings()
    tensor = torch_occl.shared_empty(COUNT).fill_(rank + 1)
    before = _through_mappings()
    dist.broadcast(tensor, src=1)
    return _occl_mappings() - baseline, _through_mappings() - before, bool((tensor == 2).all())


def test_over_tcp_every_rank_gets_an_ordinary_tensor_without_a_warning():
    with DistPool(2, "occl", env={"OCCL_TRANSPORT": "tcp"}) as pool:
        assert pool.run(_shared_empty_over_tcp) == [(0, 0, True)] * 2
        assert pool.run(_shared_empty_warnings, -1) == [(False, [])] * 2


def _ask(rank, world_size, sizes, dtypes):
    import torch_occl

    try:
        torch_occl.shared_empty(sizes[rank], dtype=dtypes[rank])
    except ValueError as error:
        return str(error)
    return None


@pytest.mark.parametrize(
    "sizes, dtypes, asked",
    [
        ([4, 8], [torch.float32] * 2, ["(4,) torch.float32", "(8,) torch.float32"]),
        ([4, 4], [torch.float32, torch.int64], ["(4,) torch.float32", "(4,) torch.int64"]),
    ],
    ids=["size", "dtype"],
)
def test_ranks_asking_for_different_tensors_fail_naming_both(sizes, dtypes, asked):
    rule = "(every rank of the group must ask for the same size and dtype)"
    with DistPool(2, "occl") as pool:
        assert pool.run(_ask, sizes, dtypes) == [
            f"torch_occl.shared_empty: rank 1 asked for {asked[1]}, rank 0 for {asked[0]} {rule}",
            f"torch_occl.shared_empty: rank 0 asked for {asked[0]}, rank 1 for {asked[1]} {rule}",
        ]


def test_a_negative_size_is_refused():
    import torch_occl

    with pytest.raises(ValueError) as error:
        torch_occl.shared_empty(2, -1)
    assert str(error.value) == "torch_occl.shared_empty: size (2, -1) has a negative dimension"


RECEIVER_DELAY = 0.5  # seconds; the sender's grace (transport/p2p/state.hpp) is 1 ms
LEND = {"OCCL_P2P_LEND_MIN_BYTES": "1"}  # as messages from 64 MiB are


def _send_recv(rank, world_size, shared, late, source="shared_empty"):
    """Rank 0 sends a lent message from a tensor in shared memory from `source` (`shared`:
    "shared_empty" or "allocate_tensor") or an ordinary one.
    Rank 1 posts its receive first or, `late`, long after the sender's grace: the message is then
    copied into a buffer and the send completes without waiting for the receive. Per rank: the
    bytes it moved through its mappings, whether the message arrived whole (rank 1) or whether
    the send completed before the receive was posted (rank 0)."""
    import time

    import torch_occl

    # Counted from before the collective: the sender may send, and this rank's p2p thread copy
    # the message through its mapping, before shared_empty returns here.
    before = _through_mappings()
    tensor = torch_occl.shared_empty(COUNT)  # collective: kept, so the peer's mapping stays
    message = torch.arange(COUNT, dtype=torch.float32)
    if rank == 0:
        own = tensor if source == "shared_empty" else _allocate_tensor(COUNT)
        sent = own if shared else torch.empty(COUNT)
        sent.copy_(message)
        if not late:
            time.sleep(0.2)  # the receive is posted by then
        start = time.monotonic()
        dist.send(sent, dst=1)
        return _through_mappings() - before, time.monotonic() - start < RECEIVER_DELAY / 2
    received = torch.empty(COUNT)
    if late:
        time.sleep(RECEIVER_DELAY)
    dist.recv(received, src=0)
    return _through_mappings() - before, torch.equal(received, message)


@pytest.mark.parametrize("source", ["shared_empty", "allocate_tensor"])
@pytest.mark.parametrize("late", [False, True], ids=["posted", "late"])
def test_send_recv_of_a_shared_tensor_copies_through_the_mapping(late, source):
    with DistPool(2, "occl", env=LEND) as pool:
        sender, receiver = pool.run(_send_recv, True, late, source)
        assert receiver == (BYTES, True)
        assert sender[0] == 0
        if late:
            assert sender[1], "the send waited for the receive: the message was not buffered"
        assert pool.run(_send_recv, False, late)[1] == (0, True)


def _ask_outside_the_group(rank, world_size):
    import torch_occl

    pair = dist.new_group([0, 1])  # collective: every rank creates it
    if rank != 2:
        return None
    try:
        torch_occl.shared_empty(4, group=pair)
    except ValueError as error:
        return str(error)
    return "no error"


def test_a_rank_outside_the_group_is_refused():
    with DistPool(3, "occl") as pool:
        assert pool.run(_ask_outside_the_group) == [
            None, None, "torch_occl.shared_empty: this rank is not a member of the group"]


def _pool_reuse(rank, world_size):
    """How many segments the pool has made after each step (one rank alone: taking a buffer is
    not collective), and whether each buffer held what was written into it."""
    import torch_occl

    made = torch_occl._C._pooled_segments
    counts, right = [made()], []
    first = _allocate_tensor(COUNT)
    first_address = first.data_ptr()
    first.fill_(1)
    counts.append(made())
    second = _allocate_tensor(COUNT)  # the first is still held: a segment of its own
    second_address = second.data_ptr()
    second.fill_(2)
    right.append(bool((first == 1).all()) and second_address != first_address)
    counts.append(made())
    del first, second
    again = _allocate_tensor(COUNT, dtype=torch.int32)  # the same bytes: a freed segment
    right.append(again.data_ptr() in (first_address, second_address)
                 and again.shape == (COUNT,) and again.dtype == torch.int32)
    counts.append(made())
    larger = _allocate_tensor(4 * COUNT)  # no free segment wastes little enough of itself
    counts.append(made())
    smaller = _allocate_tensor(COUNT // 2)  # the free one would waste half of itself
    counts.append(made())
    right.append(smaller.shape == (COUNT // 2,) and larger.shape == (4 * COUNT,))
    return counts, right


def test_allocated_buffers_come_back_to_the_pool_and_are_reused():
    with DistPool(2, "occl") as pool:
        for counts, right in pool.run(_pool_reuse):
            start = counts[0]
            assert [c - start for c in counts] == [0, 1, 2, 2, 3, 4], counts
            assert all(right), right


def _allocate_over_tcp(rank, world_size):
    import torch_occl

    before = torch_occl._C._pooled_segments()
    tensor = _allocate_tensor(COUNT).fill_(rank + 1)
    dist.broadcast(tensor, src=1)
    return torch_occl._C._pooled_segments() - before, bool((tensor == 2).all())


def test_allocate_tensor_gives_ordinary_tensors_where_ranks_do_not_copy_between_them():
    with DistPool(2, "occl", env={"OCCL_TRANSPORT": "tcp"}) as pool:
        assert pool.run(_allocate_over_tcp) == [(0, True)] * 2


def _fsdp2_on_allocated_buffers(rank, world_size):
    """Three FSDP2 steps with set_allocate_memory_from_process_group_for_comm(True), on occl and
    on gloo from the same weights and batches: whether the weights agree, and on occl the pooled
    segments made after the first and the third step and the bytes that went through mappings."""
    from torch import nn
    from torch.distributed.device_mesh import DeviceMesh
    from torch.distributed.fsdp import fully_shard

    import torch_occl

    weights, occl = {}, {}
    for backend in ("occl", "gloo"):
        group = dist.new_group(backend=backend)
        mesh = DeviceMesh.from_group(group, "cpu")
        torch.manual_seed(0)
        # 1 MiB of weights per layer: each rank's shard is above the single-copy threshold.
        model = nn.Sequential(nn.Linear(512, 512), nn.ReLU(), nn.Linear(512, 512))
        for layer in (model[0], model[2]):
            fully_shard(layer, mesh=mesh)
        fully_shard(model, mesh=mesh)
        for module in (model[0], model[2], model):  # each fully_shard has its own setting
            module.set_allocate_memory_from_process_group_for_comm(True)
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
        torch.manual_seed(1 + rank)
        inputs = torch.randn(8, 512)
        through = _through_mappings()
        made = []
        for _ in range(3):
            optimizer.zero_grad()
            model(inputs).square().mean().backward()
            optimizer.step()
            made.append(torch_occl._C._pooled_segments())
        if backend == "occl":
            occl = {"made": (made[0], made[-1]), "through": _through_mappings() - through}
        weights[backend] = [p.full_tensor() for p in model.parameters()]
    same = all(torch.allclose(a, b, rtol=1e-5, atol=1e-7)
               for a, b in zip(weights["occl"], weights["gloo"]))
    return same, occl


def test_fsdp2_takes_its_buffers_from_the_pool_and_trains_as_on_gloo():
    with DistPool(2, "occl") as pool:
        for same, occl in pool.run(_fsdp2_on_allocated_buffers):
            assert same
            first, third = occl["made"]
            assert first > 0 and third == first, occl  # steps two and three reuse step one's
            assert occl["through"] > 0, occl
