"""Sparse COO allreduce (SUM): through dist.all_reduce and through the backend's allreduce_sparse.

Expected values: the dense sum of every rank's sparse input, computed in Python on every rank.
"""

from __future__ import annotations

import warnings

import pytest
import torch
import torch.distributed as dist


def _sparse_input(rank: int, world_size: int) -> torch.Tensor:
    """A 2-D sparse tensor with 1 + rank entries; entry (rank, 0) overlaps nothing, (0, 1) all."""
    indices = [[r % 6 for r in range(rank + 1)] + [0], [0] * (rank + 1) + [1]]
    values = [float(rank + 1 + i) for i in range(rank + 1)] + [10.0 * (rank + 1)]
    return torch.sparse_coo_tensor(indices, values, (6, 3))


def w_all_reduce_sparse(rank, world_size, dtype):
    warnings.simplefilter("ignore")
    expected = sum(_sparse_input(r, world_size).to_dense() for r in range(world_size)).to(dtype)
    through_python = _sparse_input(rank, world_size).to(dtype)
    dist.all_reduce(through_python)
    backend = dist.group.WORLD._get_backend(torch.device("cpu"))
    through_backend = _sparse_input(rank, world_size).to(dtype)
    backend.allreduce_sparse([through_backend], dist.AllreduceOptions()).wait()
    return [
        torch.equal(through_python.to_dense(), expected),
        torch.equal(through_backend.to_dense(), expected),
        through_python.is_sparse,
    ]


def w_sparse_max_is_rejected(rank, world_size):
    warnings.simplefilter("ignore")
    with pytest.raises(RuntimeError) as raised:
        dist.all_reduce(_sparse_input(rank, world_size), op=dist.ReduceOp.MAX)
    return str(raised.value)


@pytest.mark.parametrize("world_size", [1, 2, 3])
@pytest.mark.parametrize("dtype", [torch.float32, torch.int64])
def test_all_reduce_sparse_sums(dist_pool, backend, world_size, dtype):
    if backend != "occl":
        pytest.skip("occl's sparse path")
    results = dist_pool(world_size).run(w_all_reduce_sparse, dtype)
    assert results == [[True, True, True]] * world_size


def test_sparse_reduce_op_other_than_sum_is_rejected(dist_pool, backend):
    if backend != "occl":
        pytest.skip("occl's message")
    messages = dist_pool(2).run(w_sparse_max_is_rejected)
    assert messages == [
        "occl.allreduce: opts.reduceOp is MAX, expected SUM (the only reduce op for sparse tensors)"
    ] * 2
