"""Tensors in shared memory: occl's large collectives on them copy with memcpy.

Between ranks on one host, occl's single-copy collectives copy straight out of (or into) the
other ranks' tensors with the kernel's cross-memory copy, which pins every page it touches. A
tensor from `shared_empty` lies in memory every rank of the group maps, so those copies become
plain memcpy through the mappings: about twice as fast for 64 MiB on the test VM
(docs/PERFORMANCE.md).
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

    host: str
    transport: str  # OCCL_TRANSPORT
    pid: int
    serial: int  # 0: this rank has no segment (see `failure`)
    fd: int
    shape: tuple
    dtype: str
    failure: str


def shared_empty(*size, dtype: torch.dtype = torch.float32, group=None) -> torch.Tensor:
    """An uninitialised CPU tensor, like `torch.empty`, that every rank of `group` maps.

    Collective: every rank of `group` (default: the default group) calls it at the same point,
    with the same size and dtype. Each rank gets its own tensor, in a segment of shared memory
    (a memfd: mode 0600, never named in /dev/shm) that every other rank of the group maps. occl's
    collectives on such tensors copy between the ranks with memcpy.

    Ranks on several hosts, or under OCCL_TRANSPORT=tcp, get ordinary tensors. So do ranks that
    cannot open each other's memory, with a warning that says why.

    A rank's segment is freed once every rank of the group has freed its tensor of the same call
    (the other ranks' mappings hold it until then). Like any tensor, one that the group's last
    collective used is held until the group's next collective.
    """
    if len(size) == 1 and isinstance(size[0], (tuple, list, torch.Size)):
        size = tuple(size[0])
    shape = tuple(int(s) for s in size)
    if any(s < 0 for s in shape):
        raise ValueError(f"torch_occl.shared_empty: size {shape} has a negative dimension")
    nbytes = math.prod(shape) * torch.empty((), dtype=dtype).element_size()
    world = dist.get_world_size(group)
    rank = dist.get_rank(group)
    if world == 1:
        return torch.empty(shape, dtype=dtype)

    transport = os.environ.get("OCCL_TRANSPORT", "auto")
    allocation, failure = None, ""
    if dist.get_backend(group) != _C.BACKEND_NAME:
        failure = f"the group's backend is {dist.get_backend(group)}"
    elif transport != "tcp":
        try:
            allocation = _C._SharedAllocation(max(nbytes, 1))
        except RuntimeError as error:
            failure = str(error)
    mine = _Offer(_C._host_identity(), transport, os.getpid(),
                  allocation.serial if allocation else 0, allocation.fd if allocation else -1,
                  shape, str(dtype), failure)
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
    failure = next((f"rank {r}: {o.failure}" for r, o in enumerate(offers) if o.failure), "")
    if not by_design and not failure:
        try:
            for r, offer in enumerate(offers):
                if r != rank:
                    allocation.map_peer(offer.pid, offer.serial, offer.fd)
        except RuntimeError as error:
            failure = f"rank {rank}: {error}"
    # Also the point after which no rank opens another's segment: each may close its fd.
    answers: list = [None] * world
    dist.all_gather_object(answers, failure, group=group)
    if allocation is not None:
        allocation.close_fd()
    failure = next((answer for answer in answers if answer), "")
    if by_design or failure:
        if not by_design:
            warnings.warn(f"torch_occl.shared_empty: an ordinary tensor, as {failure}")
        return torch.empty(shape, dtype=dtype)
    return allocation.tensor(list(shape), dtype)

