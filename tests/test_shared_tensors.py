"""Tensors from torch_occl.shared_empty: collectives on them copy through shared mappings.

Each rank's tensor lies in a memfd every other rank maps (torch_occl/_shared.py,
torch_occl/csrc/transport/shared_segments.hpp); occl's single-copy collectives then copy with
memcpy through the mappings instead of with process_vm_readv/writev. Each result is checked against
values computed in Python, and `_bytes_through_shared_segments` tells which path ran.
"""

from __future__ import annotations

import gc
import os

import pytest
import torch
import torch.distributed as dist

from dist_harness import DistPool, occl_only

pytestmark = occl_only("torch_occl.shared_empty")

# Elements per rank: 1 MiB of float32, above the single-copy threshold (256 KiB).
COUNT = 1 << 18


def _through_mappings() -> int:
    import torch_occl

    return torch_occl._C._bytes_through_shared_segments()


def _memfd_mappings() -> int:
    with open("/proc/self/maps") as maps:
        return sum("/memfd:occl" in line for line in maps)


def _run_collectives(rank, world_size, shared):
    """Every single-copy collective once, on shared_empty tensors or on ordinary ones (`shared`
    False), or with only rank 0's tensors shared (`shared` "rank 0"): the bytes each rank moved
    through the mappings, and the ops whose results were wrong."""
    import torch_occl

    unused = []  # a rank maps its peers' segments while it holds its own tensor of the call

    def empty(*size):
        if shared is True or (shared == "rank 0" and rank == 0):
            return torch_occl.shared_empty(*size)
        unused.append(torch_occl.shared_empty(*size))  # collective: every rank calls it
        return torch.empty(*size)

    n, count = world_size, COUNT
    block = torch.arange(count, dtype=torch.float32)
    wrong = []
    before = _through_mappings()

    data = empty(count)
    data.copy_(block + 1000 * rank)
    dist.broadcast(data, src=n - 1)
    if not torch.equal(data, block + 1000 * (n - 1)):
        wrong.append("broadcast")

    data.copy_(block + 1000 * rank)
    dist.all_reduce(data)
    if not torch.equal(data, n * block + 1000 * sum(range(n))):
        wrong.append("all_reduce")

    gathered = empty(n * count)
    dist.all_gather_into_tensor(gathered, data.copy_(block + 1000 * rank))
    if not torch.equal(gathered, torch.cat([block + 1000 * r for r in range(n)])):
        wrong.append("all_gather_into_tensor")

    scattered = empty(count)
    gathered.copy_(torch.arange(n * count, dtype=torch.float32) + 1000 * rank)
    dist.reduce_scatter_tensor(scattered, gathered)
    mine = torch.arange(rank * count, (rank + 1) * count, dtype=torch.float32)
    if not torch.equal(scattered, n * mine + 1000 * sum(range(n))):
        wrong.append("reduce_scatter_tensor")

    # Block j of rank r's input holds 100 * r + j; block j of the output came from rank j.
    received = empty(n * count)
    sent = empty(n * count)
    sent.copy_((100 * rank + torch.arange(n, dtype=torch.float32)).repeat_interleave(count))
    dist.all_to_all_single(received, sent)
    expected = (100 * torch.arange(n, dtype=torch.float32) + rank).repeat_interleave(count)
    if not torch.equal(received, expected):
        wrong.append("all_to_all_single")
    return _through_mappings() - before, wrong


@pytest.mark.parametrize("world_size", [2, 3])
def test_collectives_on_shared_tensors_copy_through_the_mappings(world_size):
    with DistPool(world_size, "occl") as pool:
        for moved, wrong in pool.run(_run_collectives, True):
            assert wrong == []
            # Each rank reads or writes at least its peers' share of every op's buffer.
            assert moved >= 5 * (world_size - 1) * COUNT * 4 // world_size
        for moved, wrong in pool.run(_run_collectives, False):
            assert (moved, wrong) == (0, [])
        # Only rank 0's tensors are shared: the others copy from and into them through their
        # mappings, everything else through the kernel.
        results = pool.run(_run_collectives, "rank 0")
        assert [wrong for _, wrong in results] == [[]] * world_size
        assert all(moved > 0 for moved, _ in results[1:])


def _mappings_while_allocated(rank, world_size):
    import torch_occl

    baseline = _memfd_mappings()  # the group's shared-memory rings
    tensor = torch_occl.shared_empty(4, 1024)
    allocated = _memfd_mappings()
    dist.broadcast(tensor, src=0)
    del tensor
    gc.collect()
    dist.barrier()  # frees the previous collective's tensors
    return baseline, allocated, _memfd_mappings(), sorted(os.listdir("/dev/shm"))


def test_every_rank_maps_every_segment_until_it_frees_its_tensor():
    before = sorted(os.listdir("/dev/shm"))
    with DistPool(3, "occl") as pool:
        for baseline, allocated, freed, shm_names in pool.run(_mappings_while_allocated):
            assert allocated == baseline + 3  # its own segment and both peers'
            assert freed == baseline
            assert shm_names == before  # a memfd is never named in /dev/shm


def _shared_empty_over_tcp(rank, world_size):
    import torch_occl

    baseline = _memfd_mappings()
    tensor = torch_occl.shared_empty(COUNT).fill_(rank + 1)
    before = _through_mappings()
    dist.broadcast(tensor, src=1)
    return _memfd_mappings() - baseline, _through_mappings() - before, bool((tensor == 2).all())


def test_over_tcp_every_rank_gets_an_ordinary_tensor():
    with DistPool(2, "occl", env={"OCCL_TRANSPORT": "tcp"}) as pool:
        assert pool.run(_shared_empty_over_tcp) == [(0, 0, True)] * 2


def _ask_for_size(rank, world_size):
    import torch_occl

    try:
        torch_occl.shared_empty(4 * (rank + 1))
    except ValueError as error:
        return str(error)
    return None


def test_ranks_asking_for_different_sizes_fail_naming_both():
    with DistPool(2, "occl") as pool:
        assert pool.run(_ask_for_size) == [
            "torch_occl.shared_empty: rank 1 asked for (8,) torch.float32, rank 0 for (4,) "
            "torch.float32 (every rank of the group must ask for the same size and dtype)",
            "torch_occl.shared_empty: rank 0 asked for (4,) torch.float32, rank 1 for (8,) "
            "torch.float32 (every rank of the group must ask for the same size and dtype)",
        ]


def test_a_negative_size_is_refused():
    import torch_occl

    with pytest.raises(ValueError) as error:
        torch_occl.shared_empty(2, -1)
    assert str(error.value) == "torch_occl.shared_empty: size (2, -1) has a negative dimension"
