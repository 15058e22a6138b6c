"""scripts/half_kernel_bits.py, the full bit-for-bit check of the reduction kernel's half types,
runs here on a sample of the pairs (every 4099th second operand), at the default widths and at
the portable ones; the suite's all_reduce of every pattern (test_collectives) checks the same
kernel through the backend."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parent.parent / "scripts" / "half_kernel_bits.py"


@pytest.mark.parametrize("lanes", [{}, {"OCCL_FLOAT16_LANES": "1", "OCCL_BFLOAT16_LANES": "1"}],
                         ids=["widest", "portable"])
def test_half_kernel_script_finds_the_float32_bits_for_every_op(lanes):
    result = subprocess.run([sys.executable, str(SCRIPT), "--stride", "4099"],
                            env=dict(os.environ, **lanes), capture_output=True, text=True,
                            timeout=300)
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.split("\n")[:4] == [
        f"{op:<7} float16 0 mismatches, bfloat16 0" for op in ("SUM", "PRODUCT", "MIN", "MAX")]
