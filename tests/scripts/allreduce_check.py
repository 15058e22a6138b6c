"""Run by tests/test_init_methods.py under torchrun or with an explicit init method.

Every rank contributes rank + 1; the sum 1 + ... + n is checked on every rank.
"""

import datetime
import sys

import torch
import torch.distributed as dist

import torch_occl

init_method = sys.argv[1] if len(sys.argv) > 1 else "env://"
kwargs = {}
if init_method != "env://":
    kwargs = {"rank": int(sys.argv[2]), "world_size": int(sys.argv[3])}
dist.init_process_group(
    torch_occl.BACKEND_NAME,
    init_method=init_method,
    timeout=datetime.timedelta(seconds=30),
    **kwargs,
)
rank, size = dist.get_rank(), dist.get_world_size()
tensor = torch.full((1000,), float(rank + 1))
dist.all_reduce(tensor)
expected = size * (size + 1) / 2
assert torch.all(tensor == expected), f"rank {rank}: got {tensor[0].item()}, expected {expected}"
assert dist.get_backend() == torch_occl.BACKEND_NAME
dist.destroy_process_group()
print(f"rank {rank} of {size}: ok")
