"""What a reduce op makes of every rank's values: the reference the suite compares against.

torch.distributed's meaning of each c10d reduce op, computed in float64 or int64 and rounded
once to the dtype: on bool, SUM and MAX are logical or, PRODUCT and MIN logical and; AVG on
integers divides with truncation toward zero; PREMUL_SUM multiplies each input by its factor.
"""

from __future__ import annotations

import functools

import torch
import torch.distributed as dist

# PREMUL_SUM's factor: exact in every floating dtype, and not 1, so a backend that ignores it fails.
PREMUL_FACTOR = 0.5


def reduce_op(name: str):
    """The argument torch.distributed takes for the reduce op `name` (a c10d enumerator name)."""
    if name == "PREMUL_SUM":
        return dist._make_nccl_premul_sum(PREMUL_FACTOR)
    return getattr(dist.ReduceOp, name)


def reduce(name: str, inputs: list[torch.Tensor]) -> torch.Tensor:
    """The reduce op `name` over `inputs` (one tensor per rank, in rank order)."""
    dtype = inputs[0].dtype
    if dtype == torch.bool:
        stacked = torch.stack(inputs)
        logical_or = {"SUM", "MAX", "BOR"}
        if name in logical_or:
            return stacked.any(dim=0)
        if name in ("PRODUCT", "MIN", "BAND"):
            return stacked.all(dim=0)
        if name == "BXOR":
            return stacked.sum(dim=0) % 2 == 1
        raise ValueError(f"reduce op {name} has no meaning on bool")
    wide = torch.float64 if dtype.is_floating_point else torch.int64
    stacked = torch.stack([t.to(wide) for t in inputs])
    if name == "SUM":
        result = stacked.sum(dim=0)
    elif name == "PRODUCT":
        result = stacked.prod(dim=0)
    elif name == "MIN":
        result = stacked.min(dim=0).values
    elif name == "MAX":
        result = stacked.max(dim=0).values
    elif name == "AVG":
        total = stacked.sum(dim=0)
        result = (
            total / len(inputs)
            if dtype.is_floating_point
            else torch.div(total, len(inputs), rounding_mode="trunc")
        )
    elif name == "PREMUL_SUM":
        result = (stacked * PREMUL_FACTOR).sum(dim=0)
    elif name in ("BAND", "BOR", "BXOR"):
        combine = {"BAND": torch.bitwise_and, "BOR": torch.bitwise_or, "BXOR": torch.bitwise_xor}
        result = functools.reduce(combine[name], list(stacked))
    else:
        raise ValueError(f"unknown reduce op {name}")
    return result.to(dtype)


def is_exact(name: str) -> bool:
    """Whether the reduce op's floating results are exact on the suite's inputs (small integers)."""
    return name not in ("AVG", "PREMUL_SUM")
