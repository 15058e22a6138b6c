"""One rank of tests/test_two_hosts.py, started inside a network namespace (a "host").

Checks a few collectives against values computed here, prints `checked <json>`, then allreduces
64 MiB until a peer dies and prints `failed <json>` with how long the failure took to surface.
"""

import datetime
import json
import os
import sys
import time

import torch
import torch.distributed as dist

import torch_occl

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from tcp_links import tcp_links  # noqa: E402

master, rank, world_size = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
dist.init_process_group(torch_occl.BACKEND_NAME, init_method=f"tcp://{master}", rank=rank,
                        world_size=world_size, timeout=datetime.timedelta(seconds=60))

results = {}
for n in (5, 1 << 20):  # the direct and the ring algorithm
    t = torch.arange(n, dtype=torch.float32) + rank
    dist.all_reduce(t)
    expected = torch.arange(n, dtype=torch.float32) * world_size + sum(range(world_size))
    results[f"all_reduce {n}"] = torch.equal(t, expected)
    out = torch.empty(n * world_size)
    dist.all_gather_into_tensor(out, torch.full((n,), float(rank)))
    results[f"all_gather {n}"] = torch.equal(
        out, torch.cat([torch.full((n,), float(r)) for r in range(world_size)]))
    b = torch.full((n,), float(rank))
    dist.broadcast(b, src=world_size - 1)
    results[f"broadcast {n}"] = torch.equal(b, torch.full((n,), float(world_size - 1)))
with open("/proc/self/maps") as maps:
    results["shared-memory regions"] = sum("memfd:occl" in line for line in maps)
store_port = int(master.rsplit(":", 1)[1])
results["tcp links"] = [[link.local[0], link.peer[0], link.send_buffer] for link in tcp_links()
                        if store_port not in (link.local[1], link.peer[1])]
print("checked", json.dumps(results), flush=True)

big = torch.ones(16 << 20)
while True:
    start = time.monotonic()
    try:
        dist.all_reduce(big)
    except RuntimeError as e:
        print("failed", json.dumps({"elapsed": time.monotonic() - start, "error": str(e)}),
              flush=True)
        break
dist.destroy_process_group()
