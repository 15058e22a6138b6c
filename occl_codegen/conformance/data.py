"""The tensors the conformance suite passes, and how it compares what comes back.

Every value is a pure function of (rank, position, salt), so every rank can compute every other
rank's inputs, and with them the expected outputs, without asking the backend.
"""

from __future__ import annotations

import torch

DTYPES = {
    "float32": torch.float32, "float64": torch.float64, "float16": torch.float16,
    "bfloat16": torch.bfloat16, "int8": torch.int8, "uint8": torch.uint8, "int16": torch.int16,
    "int32": torch.int32, "int64": torch.int64, "bool": torch.bool,
    "complex64": torch.complex64, "complex128": torch.complex128,
}
# Tensors are ROWS x COLUMNS unless an op needs other sizes; "empty" ones have no rows.
ROWS, COLUMNS = 3, 4


def rows_for(layout: str, rows: int = ROWS) -> int:
    return 0 if layout == "empty" else rows


def distinct(rank: int, numel: int, dtype: str, salt: int = 0) -> torch.Tensor:
    """1-D values that differ from every other rank's (and salt's) at every position."""
    position = torch.arange(numel, dtype=torch.int64)
    if dtype == "bool":
        return _bits(rank, position, salt)
    values = (rank * 16 + position * 3 + salt * 7) % 61 + 1
    return _signed(values, dtype)


def reducible(rank: int, world_size: int, numel: int, dtype: str, salt: int = 0) -> torch.Tensor:
    """1-D inputs of a reduction in which, at every position, the ranks' values differ and the
    rank that holds the largest (and the smallest) changes from position to position: so on
    every rank of a group of two or more, an op that does nothing leaves wrong values. An offset
    that changes along the tensor and with the salt makes results differ from position to
    position and from block to block, so a block written in the wrong place shows. Products stay
    at most 4 * 5 * 6 * 7, exact in every dtype but int8, whose wrapping the reference's int64
    arithmetic, cast back, reproduces."""
    position = torch.arange(numel, dtype=torch.int64)
    if dtype == "bool":
        return _bits(rank, position, salt)
    values = (position - rank) % world_size + 1 + (position // world_size + salt) % 4
    return _signed(values, dtype)


def _bits(rank: int, position: torch.Tensor, salt: int) -> torch.Tensor:
    """Bit `rank` of a sequence whose low bits all vary: ranks differ somewhere, not everywhere,
    and how many ranks hold True changes from position to position."""
    return ((position * 7 + salt * 5 + 3) >> rank) % 2 == 1


def _signed(values: torch.Tensor, dtype: str) -> torch.Tensor:
    """Negates every other value where the dtype has a sign, so signs are tested too."""
    if dtype not in ("uint8",):
        values = torch.where(torch.arange(values.numel()) % 2 == 1, -values, values)
    if dtype.startswith("complex"):
        return torch.complex(values.double(), -values.double() / 2).to(DTYPES[dtype])
    return values.to(DTYPES[dtype])


def unlike(values: torch.Tensor) -> torch.Tensor:
    """Values that differ from `values` at every position: what outputs hold before the op."""
    if values.dtype == torch.bool:
        return ~values
    return values + 1


def shaped(flat: torch.Tensor, layout: str, columns: int = COLUMNS) -> torch.Tensor:
    """`flat` as a (rows, columns) tensor, contiguous or not (a transposed view) as `layout` says."""
    rows = flat.numel() // columns
    if layout == "strided":
        tensor = torch.empty((columns, rows), dtype=flat.dtype).t()
        tensor.copy_(flat.reshape(rows, columns))
        return tensor
    return flat.reshape(rows, columns).clone()


def differences(label: str, actual, expected: torch.Tensor, exact: bool) -> list[str]:
    """What is wrong with `actual` (a tensor the backend wrote) against `expected`, in words."""
    if not isinstance(actual, torch.Tensor):
        return [f"{label} is {type(actual).__name__}, expected a tensor"]
    if actual.is_sparse:
        actual = actual.to_dense()
    if actual.shape != expected.shape or actual.dtype != expected.dtype:
        return [f"{label} has shape {tuple(actual.shape)} and dtype {actual.dtype}, expected"
                f" {tuple(expected.shape)} and {expected.dtype}"]
    if exact or not expected.is_floating_point():
        wrong = actual != expected
    else:
        tolerance = {torch.float16: 1e-3, torch.bfloat16: 8e-3}.get(expected.dtype, 1e-6)
        a, e = actual.double(), expected.double()
        wrong = (a - e).abs() > tolerance * (1 + e.abs())
    if not bool(wrong.any()):
        return []
    first = tuple(int(i) for i in wrong.nonzero()[0])
    return [f"{label}: {int(wrong.sum())} of {expected.numel()} elements wrong; at {first}"
            f" expected {expected[first].item()}, got {actual[first].item()}"]
