"""A worker of tests/test_bootstrap_faults.py under torchrun: joins the group, checks an
all_reduce, prints `attempt <n> rank <r> ok`, and fails its attempt (exit 1) unless it is the
last one allowed, so that torchrun restarts every worker."""

import datetime
import os

import torch
import torch.distributed as dist

import torch_occl

attempt = int(os.environ["TORCHELASTIC_RESTART_COUNT"])
last = int(os.environ["TORCHELASTIC_MAX_RESTARTS"])
dist.init_process_group(torch_occl.BACKEND_NAME, timeout=datetime.timedelta(seconds=30))
rank, size = dist.get_rank(), dist.get_world_size()
t = torch.full((1000,), float(rank + 1))
dist.all_reduce(t)
assert torch.all(t == size * (size + 1) / 2), t[:4]
print(f"attempt {attempt} rank {rank} ok", flush=True)
if attempt < last:
    os._exit(1)
dist.destroy_process_group()
