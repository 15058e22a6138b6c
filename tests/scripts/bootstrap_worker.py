"""A rank of tests/test_bootstrap_faults.py: joins a group through the agent store in
MASTER_ADDR/PORT (timeout 60 s), checks an all_reduce and prints `ok <seconds>`, or prints
`error <seconds> <message>` when joining or the all_reduce fails; the seconds are init's."""

import datetime
import time

import torch
import torch.distributed as dist

import torch_occl

start = time.monotonic()
try:
    dist.init_process_group(torch_occl.BACKEND_NAME, timeout=datetime.timedelta(seconds=60))
    elapsed = time.monotonic() - start
    t = torch.ones(1000)
    dist.all_reduce(t)
    assert torch.all(t == dist.get_world_size()), t[:4]
except Exception as e:  # noqa: BLE001 (the test reads the message)
    print("error", f"{time.monotonic() - start:.2f}", " ".join(str(e).split()), flush=True)
else:
    print("ok", f"{elapsed:.2f}", flush=True)
    dist.destroy_process_group()
