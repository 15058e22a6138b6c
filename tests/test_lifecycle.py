"""Destroying a backend right after its ops never deadlocks.

Python frees a backend with the GIL held; the backend must not then wait for a thread that needs
the GIL to drop an op's tensors. A deadlock holds the GIL, which no in-process timeout can break,
so the loop runs in a subprocess bounded by a timeout.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent

SCRIPT = textwrap.dedent(
    """
    import datetime
    import torch
    import torch.distributed as dist
    import torch._C._distributed_c10d as c10d
    import torch_occl._C as extension

    for _ in range(1000):
        options = extension.ProcessGroupOCCL.Options()
        options._timeout = datetime.timedelta(seconds=10)
        backend = extension.ProcessGroupOCCL(dist.HashStore(), 0, 1, options)
        work = backend.allgather([[torch.zeros(6)]], [torch.arange(6.0)], c10d.AllgatherOptions())
        work.wait()
        del backend, work
    print("done")
    """
)


def test_backend_freed_right_after_an_op_does_not_deadlock():
    env = dict(os.environ, PYTHONPATH=str(REPO))
    result = subprocess.run([sys.executable, "-c", SCRIPT], env=env, capture_output=True,
                            text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "done"
