"""A rank of tests/test_strangers.py: joins a group through the agent store in MASTER_ADDR/PORT,
checks an allreduce, prints `ok <sum>`, then waits for a line on stdin and checks another."""

import datetime
import sys

import torch
import torch.distributed as dist

import torch_occl

dist.init_process_group(torch_occl.BACKEND_NAME, timeout=datetime.timedelta(seconds=60))
rank, size = dist.get_rank(), dist.get_world_size()
for _ in range(2):
    t = torch.full((1000,), float(rank + 1))
    dist.all_reduce(t)
    assert torch.all(t == size * (size + 1) / 2), t[:4]
    print("ok", t[0].item(), flush=True)
    sys.stdin.readline()
dist.destroy_process_group()
