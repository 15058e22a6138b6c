"""A rank of tests/test_bootstrap_faults.py: joins a group through the agent store in
MASTER_ADDR/PORT (timeout 60 s), checks an all_reduce and prints `ok`, or prints
`error <seconds> <time> <message>` when joining or the all_reduce fails: the seconds since init
began, and the time.time() of the failure. OCCL_TEST_ELEMENTS (comma-separated counts) adds
all_reduces of that many elements, each rank contributing rank + 1, checked element by element."""

import os

import datetime
import time

import torch
import torch.distributed as dist

import torch_occl

start = time.monotonic()
try:
    dist.init_process_group(torch_occl.BACKEND_NAME, timeout=datetime.timedelta(seconds=60))
    t = torch.ones(1000)
    dist.all_reduce(t)
    assert torch.all(t == dist.get_world_size()), t[:4]
    world = dist.get_world_size()
    for count in filter(None, os.environ.get("OCCL_TEST_ELEMENTS", "").split(",")):
        t = torch.full((int(count),), float(dist.get_rank() + 1))
        dist.all_reduce(t)
        wrong = int((t != world * (world + 1) / 2).sum())
        assert wrong == 0, f"{wrong} of {count} elements wrong"
except Exception as e:  # noqa: BLE001 (the test reads the message)
    print("error", f"{time.monotonic() - start:.2f}", f"{time.time():.3f}",
          " ".join(str(e).split()), flush=True)
else:
    print("ok", flush=True)
    dist.destroy_process_group()
