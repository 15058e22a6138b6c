"""Checks occl's reduction kernel bit for bit on the half types: every float16 and bfloat16
value against every other (or every stride-th), two sources, SUM, PRODUCT, MIN and MAX, against
c10's conversions around float32 arithmetic (scripts/half_kernel_bits.cpp). Run it after a
change to torch_occl/csrc/kernels/reduce.cpp, once per width (a full run takes minutes):

    python scripts/half_kernel_bits.py [--stride N]
    OCCL_FLOAT16_LANES=16 OCCL_BFLOAT16_LANES=1 python scripts/half_kernel_bits.py

Builds with g++ against this Python's torch headers (c10 only); exits 1 on a mismatch.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
from pathlib import Path

CSRC = Path(__file__).resolve().parent.parent / "torch_occl" / "csrc"


def build(folder: str) -> str:
    import torch

    torch_dir = Path(torch.__file__).parent
    binary = os.path.join(folder, "half_kernel_bits")
    subprocess.run(["g++", "-O3", "-std=c++17", f"-I{CSRC}", f"-I{torch_dir / 'include'}",
                    str(Path(__file__).with_suffix(".cpp")), str(CSRC / "kernels" / "reduce.cpp"),
                    str(CSRC / "tuning.cpp"), f"-L{torch_dir / 'lib'}", "-lc10",
                    f"-Wl,-rpath,{torch_dir / 'lib'}", "-o", binary], check=True)
    return binary


def main(argv=None) -> int:
    parse = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parse.add_argument("--stride", type=int, default=1,
                       help="check every stride-th second operand (default: 1, every pair)")
    args = parse.parse_args(argv)
    with tempfile.TemporaryDirectory() as folder:
        return subprocess.run([build(folder), str(args.stride)]).returncode


if __name__ == "__main__":
    sys.exit(main())
