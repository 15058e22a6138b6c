"""A worker of tests/test_bootstrap_faults.py under torchrun: joins the group, checks an
all_reduce, prints `attempt <n> rank <r> ok`, and fails its attempt (exit 1) unless it is the
last one allowed, so that torchrun restarts every worker.

With OCCL_TEST_KILL=1, every attempt but the last instead loses a worker it picks at random: the
worker is SIGKILLed with an all_reduce of 64 MiB in flight, and the others print
`attempt <n> rank <r> raised after <seconds> s: <error>` and fail the attempt. The last attempt
prints, besides `ok`, how many occl shared-memory regions the worker maps (`regions <k>`)."""

import datetime
import os
import random
import signal
import time

import torch
import torch.distributed as dist

import torch_occl

attempt = int(os.environ["TORCHELASTIC_RESTART_COUNT"])
last = int(os.environ["TORCHELASTIC_MAX_RESTARTS"])
dist.init_process_group(torch_occl.BACKEND_NAME, timeout=datetime.timedelta(seconds=30))
rank, size = dist.get_rank(), dist.get_world_size()
if os.environ.get("OCCL_TEST_KILL") == "1" and attempt < last:
    # torchrun stops the others once it sees the death: each survivor reports first.
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    large = torch.ones(1 << 24)
    if rank == random.Random(attempt).randrange(size):
        dist.all_reduce(large, async_op=True)
        # Long enough for the group's worker to start the op, far too short to finish it: three
        # ranks take about 25 ms for 64 MiB here, and with a 20 ms wait the survivors once
        # completed it and returned.
        time.sleep(0.002)
        os.kill(os.getpid(), signal.SIGKILL)
    start = time.monotonic()
    try:
        dist.all_reduce(large)
        print(f"attempt {attempt} rank {rank} returned", flush=True)
    except RuntimeError as e:
        print(f"attempt {attempt} rank {rank} raised after {time.monotonic() - start:.2f} s:"
              f" {' '.join(str(e).split())[:200]}", flush=True)
    os._exit(1)
t = torch.full((1000,), float(rank + 1))
dist.all_reduce(t)
assert torch.all(t == size * (size + 1) / 2), t[:4]
with open("/proc/self/maps") as maps:
    regions = sum("memfd:occl" in line for line in maps)
print(f"attempt {attempt} rank {rank} ok regions {regions}", flush=True)
if attempt < last:
    os._exit(1)
dist.destroy_process_group()
