"""Every op a backend declares, on one device's tensors, checked in the rank against values
computed here from what every rank put in. Ranks call `check_every_op` after joining a group:
tests/test_device_backend.py for occl (occldev's memory used in place), tests/scripts/mpi_rank.py
for occl_mpi (occldev's memory staged through CPU copies).
"""

from __future__ import annotations

import torch
import torch.distributed as dist

N = 6  # elements per rank and tensor


def contribution(rank: int, dtype=torch.float32, n: int = N) -> torch.Tensor:
    """What rank `rank` puts in: distinct per rank and element, exact in every dtype used."""
    return (torch.arange(n) + 10 * rank + 1).to(dtype)


def _expect(actual: torch.Tensor, expected: torch.Tensor, device: torch.device) -> None:
    assert actual.device == device, f"the result moved to {actual.device}, expected {device}"
    torch.testing.assert_close(actual.cpu(), expected, rtol=0, atol=0)


def check_every_op(device: torch.device, declared: tuple[str, ...]) -> list[str]:
    """Runs each op of `declared` (c10d::Backend method names) that has a check below on
    `device`'s tensors and asserts its results; returns the ops covered, in order."""
    rank, size = dist.get_rank(), dist.get_world_size()
    everyone = [contribution(r) for r in range(size)]
    root = size - 1  # not 0: a backend that ignores the root fails

    def on(tensor: torch.Tensor) -> torch.Tensor:
        return tensor.to(device)

    def allreduce():
        for op, reduce in ((dist.ReduceOp.SUM, torch.stack(everyone).sum(0)),
                           (dist.ReduceOp.MAX, torch.stack(everyone).amax(0))):
            tensor = on(contribution(rank))
            work = dist.all_reduce(tensor, op=op, async_op=True)
            work.wait()
            assert work.is_completed() and work.is_success()
            _expect(tensor, reduce, device)
        integers = on(contribution(rank, torch.int64))
        dist.all_reduce(integers)
        _expect(integers, sum(contribution(r, torch.int64) for r in range(size)), device)

    def broadcast():
        tensor = on(contribution(rank))
        dist.broadcast(tensor, src=root)
        _expect(tensor, everyone[root], device)

    def allgather():
        outputs = [on(torch.zeros(N)) for _ in range(size)]
        dist.all_gather(outputs, on(contribution(rank)))
        for output, expected in zip(outputs, everyone):
            _expect(output, expected, device)

    def allgather_base():
        output = on(torch.zeros(N * size))
        dist.all_gather_into_tensor(output, on(contribution(rank)))
        _expect(output, torch.cat(everyone), device)

    def reduce_scatter():
        output = on(torch.zeros(N))
        dist.reduce_scatter(output, [on(contribution(rank) * (j + 1)) for j in range(size)])
        _expect(output, sum(everyone) * (rank + 1), device)

    def reduce_scatter_base():
        output = on(torch.zeros(N))
        dist.reduce_scatter_tensor(output, on(contribution(rank, n=N * size)))
        whole = sum(contribution(r, n=N * size) for r in range(size))
        _expect(output, whole[rank * N:(rank + 1) * N], device)

    def barrier():
        dist.barrier()

    def allreduce_coalesced():
        tensors = [on(contribution(rank)), on(contribution(rank) * 2)]
        dist.all_reduce_coalesced(tensors)
        _expect(tensors[0], sum(everyone), device)
        _expect(tensors[1], sum(everyone) * 2, device)

    def reduce():
        tensor = on(contribution(rank))
        dist.reduce(tensor, dst=root)
        _expect(tensor, sum(everyone) if rank == root else everyone[rank], device)

    def allgather_coalesced():
        outputs = [[on(torch.zeros(N)) for _ in range(2)] for _ in range(size)]
        dist.all_gather_coalesced(outputs, [on(contribution(rank)), on(-contribution(rank))])
        for r in range(size):
            _expect(outputs[r][0], everyone[r], device)
            _expect(outputs[r][1], -everyone[r], device)

    def coalesced(collective, outputs, inputs):
        with dist._coalescing_manager(device=device, async_ops=True) as manager:
            for output, input in zip(outputs, inputs):
                collective(output, input, async_op=True)
        manager.wait()

    def allgather_into_tensor_coalesced():
        outputs = [on(torch.zeros(N * size)) for _ in range(2)]
        coalesced(dist.all_gather_into_tensor, outputs,
                  [on(contribution(rank)), on(contribution(rank) * 3)])
        _expect(outputs[0], torch.cat(everyone), device)
        _expect(outputs[1], torch.cat(everyone) * 3, device)

    def reduce_scatter_tensor_coalesced():
        outputs = [on(torch.zeros(N)) for _ in range(2)]
        inputs = [on(contribution(rank, n=N * size)), on(contribution(rank, n=N * size) * 3)]
        coalesced(dist.reduce_scatter_tensor, outputs, inputs)
        whole = sum(contribution(r, n=N * size) for r in range(size))[rank * N:(rank + 1) * N]
        _expect(outputs[0], whole, device)
        _expect(outputs[1], whole * 3, device)

    def gather():
        outputs = [on(torch.zeros(N)) for _ in range(size)] if rank == root else None
        dist.gather(on(contribution(rank)), outputs, dst=root)
        for output, expected in zip(outputs or [], everyone):
            _expect(output, expected, device)

    def scatter():
        output = on(torch.zeros(N))
        inputs = [on(contribution(root) * (j + 1)) for j in range(size)] if rank == root else None
        dist.scatter(output, inputs, src=root)
        _expect(output, everyone[root] * (rank + 1), device)

    def alltoall_base():
        output = on(torch.zeros(N * size))
        dist.all_to_all_single(output, on(contribution(rank, n=N * size)))
        pieces = [contribution(r, n=N * size)[rank * N:(rank + 1) * N] for r in range(size)]
        _expect(output, torch.cat(pieces), device)

    def alltoall():
        outputs = [on(torch.zeros(N)) for _ in range(size)]
        dist.all_to_all(outputs, [on(contribution(rank) * (j + 1)) for j in range(size)])
        for r in range(size):
            _expect(outputs[r], everyone[r] * (rank + 1), device)

    def send_recv():
        # A ring through batch_isend_irecv, then rank 0 -> root alone.
        received = on(torch.zeros(N))
        works = dist.batch_isend_irecv([
            dist.P2POp(dist.isend, on(contribution(rank)), (rank + 1) % size),
            dist.P2POp(dist.irecv, received, (rank - 1) % size),
        ])
        for work in works:
            work.wait()
        _expect(received, everyone[(rank - 1) % size], device)
        if rank == 0:
            dist.send(on(contribution(0) * 5), dst=root)
        elif rank == root:
            alone = on(torch.zeros(N))
            dist.recv(alone, src=0)
            _expect(alone, everyone[0] * 5, device)

    def recv_anysource():
        if rank == root:
            tensor = on(torch.zeros(N))
            assert dist.recv(tensor) == 0
            _expect(tensor, everyone[0] * 7, device)
        elif rank == 0:
            dist.send(on(contribution(0) * 7), dst=root)

    checks = (
        (("allreduce",), allreduce), (("broadcast",), broadcast), (("allgather",), allgather),
        (("_allgather_base",), allgather_base), (("reduce_scatter",), reduce_scatter),
        (("_reduce_scatter_base",), reduce_scatter_base), (("barrier",), barrier),
        (("allreduce_coalesced",), allreduce_coalesced), (("reduce",), reduce),
        (("allgather_coalesced",), allgather_coalesced),
        (("allgather_into_tensor_coalesced",), allgather_into_tensor_coalesced),
        (("reduce_scatter_tensor_coalesced",), reduce_scatter_tensor_coalesced),
        (("gather",), gather), (("scatter",), scatter), (("alltoall_base",), alltoall_base),
        (("alltoall",), alltoall), (("send", "recv"), send_recv),
        (("recvAnysource",), recv_anysource),
    )
    covered: list[str] = []
    for ops, check in checks:
        if set(ops) <= set(declared):
            check()
            covered += ops
    return covered
