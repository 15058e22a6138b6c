"""Tensors in shared memory: occl's single copies between ranks become memcpy.

Between ranks on one host, occl's collectives on messages of at least 256 KiB copy straight out of
(or into) the other ranks' tensors with the kernel's cross-memory copy, which pins every page it
touches. A tensor from `shared_empty` lies in memory every rank of the group maps, so those copies
become plain memcpy through the mappings: broadcast 1.3–1.6× faster from 4 MiB up in the
benchmark (docs/PERFORMANCE.md).
"""

from __future__ import annotations

import math
import os
import warnings
from typing import NamedTuple

import torch
import torch.distributed as dist

from . import _C


class _Offer(NamedTuple):
    """What one rank tells the others about its part of a `shared_empty` call."""

    host: str  # ranks with equal hosts may open each other's memfds
    transport: str  # its OCCL_TRANSPORT
    pid: int
    token: int  # with `serial`, names its segment
    serial: int  # 0: it has no segment (see `problem`)
    fd: int
    probe_address: int  # for the cross-memory probe the group's single copies need
    shape: tuple
    dtype: str
    problem: str  # why it has no segment, or ""


def shared_empty(*size, dtype: torch.dtype = torch.float32, group=None) -> torch.Tensor:
    """An uninitialised CPU tensor, like `torch.empty`, that every rank of `group` maps.

    Collective: every rank of `group` (default: the default group) calls it at the same point,
    with the same size and dtype. Each rank gets its own tensor, in a segment of shared memory
    (a memfd: mode 0600, never named in /dev/shm) that every other rank of the group maps. When
    occl copies between ranks' tensors (collectives on at least 256 KiB per rank, in groups
    wholly on one host, and point-to-point messages of that size, which are lent), it copies
    from and into such tensors with memcpy instead of the kernel's cross-memory copy.

    Ranks on several hosts, or under OCCL_TRANSPORT=tcp, get ordinary tensors. So, with a
    warning that says why, do ranks that may not copy from each other's memory, and groups of
    another backend.

    A rank's segment is freed once every rank of the group has freed its tensor of the same call
    (the other ranks' mappings hold it until then). Like any tensor, one that the group's last
    collective used is held until the group's next collective.
    """
    if len(size) == 1 and isinstance(size[0], (tuple, list, torch.Size)):
        size = tuple(size[0])
    shape = tuple(int(s) for s in size)
    if any(s < 0 for s in shape):
        raise ValueError(f"torch_occl.shared_empty: size {shape} has a negative dimension")
    rank = dist.get_rank(group)
    if rank < 0:
        raise ValueError("torch_occl.shared_empty: this rank is not a member of the group")
    world = dist.get_world_size(group)
    if world == 1:
        return torch.empty(shape, dtype=dtype)
    nbytes = math.prod(shape) * torch.empty((), dtype=dtype).element_size()

    transport = os.environ.get("OCCL_TRANSPORT", "auto")
    allocation, problem = None, ""
    if not _runs_on_occl(group):
        problem = f"the group's backend is {dist.get_backend(group)}"
    elif transport != "tcp":
        try:
            allocation = _C._SharedAllocation(max(nbytes, 1))
        except Exception as error:  # every rank must reach the gathers below
            problem = str(error) or type(error).__name__
    mine = _Offer(_C._host_identity(), transport, os.getpid(), _C._process_token(),
                  allocation.serial if allocation else 0, allocation.fd if allocation else -1,
                  _C._peer_memory_probe_address(), shape, str(dtype), problem)
    offers: list = [None] * world
    dist.all_gather_object(offers, mine, group=group)
    for r, offer in enumerate(offers):
        if (offer.shape, offer.dtype) != (shape, str(dtype)):
            raise ValueError(
                f"torch_occl.shared_empty: rank {r} asked for {offer.shape} {offer.dtype}, "
                f"rank {rank} for {shape} {dtype} (every rank of the group must ask for the "
                "same size and dtype)"
            )

    # Ranks on several hosts, or told to use TCP only, get ordinary tensors by design.
    by_design = (any(offer.host != mine.host for offer in offers)
                 or any(offer.transport == "tcp" for offer in offers))
    first_problem = next((f"rank {r}: {o.problem}" for r, o in enumerate(offers) if o.problem), "")
    own_outcome = "" if by_design or first_problem else _map_peers(allocation, offers, rank)
    # Also the point after which no rank opens another's segment: each may close its fd.
    outcomes: list = [None] * world
    dist.all_gather_object(outcomes, own_outcome, group=group)
    if allocation is not None:
        allocation.close_fd()
    problem = first_problem or next((outcome for outcome in outcomes if outcome), "")
    if by_design or problem:
        if not by_design:
            warnings.warn(f"torch_occl.shared_empty: an ordinary tensor, as {problem}")
        return torch.empty(shape, dtype=dtype)
    return allocation.tensor(list(shape), dtype)


def _runs_on_occl(group) -> bool:
    """Whether occl runs the group's CPU collectives ("occl", or "cpu:occl,cuda:...")."""
    backends = str(dist.get_backend(group)).split(",")
    return any(entry.split(":")[-1] == _C.BACKEND_NAME for entry in backends)


def _map_peers(allocation, offers: list, rank: int) -> str:
    """Maps every peer's segment into this rank: "" or why it cannot."""
    for r, offer in enumerate(offers):
        if r == rank:
            continue
        # Without cross-memory attach the group never copies between tensors (README,
        # "Transports"): the mappings would go unused.
        why = _C._probe_peer_memory(offer.pid, offer.probe_address)
        if why:
            return f"rank {rank} may not copy from rank {r}'s memory ({why})"
        try:
            allocation.map_peer(offer.pid, offer.token, offer.serial, offer.fd)
        except Exception as error:
            return f"rank {rank}: {error}"
    return ""
