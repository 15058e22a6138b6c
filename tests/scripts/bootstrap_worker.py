"""A rank of tests/test_bootstrap_faults.py: joins a group through the agent store in
MASTER_ADDR/PORT (timeout 60 s), checks an all_reduce and prints `ok`, or prints
`error <seconds> <time> <message>` when joining or the all_reduce fails: the seconds since init
began, and the time.time() of the failure."""

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
except Exception as e:  # noqa: BLE001 (the test reads the message)
    print("error", f"{time.monotonic() - start:.2f}", f"{time.time():.3f}",
          " ".join(str(e).split()), flush=True)
else:
    print("ok", flush=True)
    dist.destroy_process_group()
