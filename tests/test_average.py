"""AVG divides the sum by the world size (a true division, not a multiply by its reciprocal).

Small float64/float32 tensors go through the direct algorithm, which sums in rank order, so the
expected value is computed the same way in Python: ((x0 + x1) + x2) / 3, in the tensor's dtype.
"""

from __future__ import annotations

import functools
import operator

import pytest
import torch
import torch.distributed as dist


def _input(rank: int, dtype: torch.dtype) -> torch.Tensor:
    generator = torch.Generator().manual_seed(7 + rank)
    return torch.rand(512, generator=generator, dtype=torch.float64).to(dtype)


def w_average(rank, world_size, dtype):
    expected = functools.reduce(operator.add, [_input(r, dtype) for r in range(world_size)])
    expected = expected / world_size
    tensor = _input(rank, dtype)
    dist.all_reduce(tensor, op=dist.ReduceOp.AVG)
    return int((tensor != expected).sum())


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
def test_average_is_exact_division(dist_pool, backend, dtype):
    if backend != "occl":
        pytest.skip("gloo rejects AVG")
    assert dist_pool(3).run(w_average, dtype) == [0, 0, 0]
