"""A rank of tests/test_shrink.py. `python shrink_worker.py SCENARIO`, with RANK, WORLD_SIZE and
either OCCL_TEST_STORE_FILE (a FileStore) or MASTER_ADDR/MASTER_PORT (env://: rank 0 hosts the
TCPStore) in the environment. Prints one JSON line: what this rank saw. A rank the scenario kills
prints nothing.

Scenarios:
- `twice`: the last rank is SIGKILLed in the middle of an all_reduce; the survivors see it fail,
  shrink the default group (which destroys a second group of every rank) and all-reduce on the
  shrunk one; then the new last rank is killed too, and the survivors shrink again.
- `abort`: every rank is alive; ranks 0..n-2 start an all_reduce on a group of all ranks that the
  last rank never calls, then shrink that group with SHRINK_ABORT, which fails the all_reduce at
  once. The default group stays.
- `resumed`: the last rank stops itself (SIGSTOP) in a 32 MiB all_reduce of a group with a 3 s
  timeout; the survivors time out, shrink that group, refill the buffer (as a DDP bucket is) with
  7.0 and go on; then rank 0 resumes the stopped rank, which must fail without touching them.
- `ddp`: DDP trains STEPS steps of a small model; the last rank is killed in the backward of step
  KILL_STEP; the survivors shrink and train that step and the rest on the shrunk group.
"""

from __future__ import annotations

import datetime
import json
import os
import signal
import sys
import time

import torch
import torch.distributed as dist

import torch_occl  # noqa: F401
from torch.distributed.distributed_c10d import SHRINK_ABORT

TIMEOUT = datetime.timedelta(seconds=30)
STEPS, KILL_STEP = 6, 3
REGION = "memfd:occl"
LARGE = 1 << 25


def contribution(rank: int) -> torch.Tensor:
    return torch.arange(8, dtype=torch.float32) + 10 * rank


def batch(rank: int, step: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Rank `rank`'s data at `step` (test_shrink.py trains its reference on the same)."""
    g = torch.Generator().manual_seed(1000 * step + rank)
    return torch.randn(16, 8, generator=g), torch.randn(16, 4, generator=g)


def model() -> torch.nn.Module:
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.Tanh(), torch.nn.Linear(16, 4))


def regions() -> int:
    """The occl shared-memory regions this process maps."""
    with open("/proc/self/maps") as maps:
        return sum(REGION in line for line in maps)


def open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


def die_in_all_reduce(store: dist.Store, key: str) -> None:
    """Dies with an all_reduce in flight that the others are in too (128 MiB: well over 20 ms
    of work)."""
    work = dist.all_reduce(torch.ones(LARGE), async_op=True)
    time.sleep(0.02)
    store.set(key, repr(time.time()) if not work.is_completed() else "completed too soon")
    os.kill(os.getpid(), signal.SIGKILL)


def failed_all_reduce() -> str:
    """What the all_reduce the killed rank left says, and how soon."""
    start = time.monotonic()
    try:
        dist.all_reduce(torch.ones(LARGE))
    except RuntimeError as e:
        return f"{time.monotonic() - start:.2f}s: " + " ".join(str(e).split())[:600]
    return "returned"


def killed(store: dist.Store, report: dict, times: int) -> None:
    """Each time, the default group's last rank dies and the others shrink the group."""
    me = int(os.environ["RANK"])
    # Shrinking the default group destroys the others (torch aborts them): their regions go too.
    other = dist.new_group(timeout=TIMEOUT)
    for round_ in range(times):
        last = dist.get_world_size() - 1
        if dist.get_rank() == last:
            die_in_all_reduce(store, f"killed{round_}")
        failure = failed_all_reduce()
        shrunk = dist.shrink_group([last])
        t = contribution(me)
        dist.all_reduce(t)
        report[f"round{round_}"] = {
            "error": failure,
            "killed_at": store.get(f"killed{round_}").decode(), "working_at": time.time(),
            "rank": dist.get_rank(), "size": dist.get_world_size(),
            "is_default": shrunk == dist.group.WORLD, "sum": t.tolist(), "regions": regions(),
            "other_destroyed": other not in dist.distributed_c10d._world.pg_group_ranks,
        }


def abort(store: dist.Store, report: dict) -> None:
    everyone = dist.new_group(timeout=TIMEOUT)
    last = dist.get_world_size() - 1
    if dist.get_rank() == last:  # alive, but never calls the all_reduce
        store.wait(["abort/done"], TIMEOUT)
        return
    pending = dist.all_reduce(torch.ones(10), group=everyone, async_op=True)
    shrunk = dist.shrink_group([last], group=everyone, shrink_flags=SHRINK_ABORT)
    start = time.monotonic()
    try:
        pending.wait()
        report["pending"] = "returned"
    except RuntimeError as e:
        report["pending"] = f"{time.monotonic() - start:.2f}s: " + " ".join(str(e).split())[:300]
    t = contribution(dist.get_rank())
    dist.all_reduce(t, group=shrunk)
    report.update(sum=t.tolist(), size=shrunk.size(), world=dist.get_world_size())
    dist.barrier(group=shrunk)
    if shrunk.rank() == 0:
        store.set("abort/done", "1")


def resumed(store: dist.Store, report: dict) -> None:
    everyone = dist.new_group(timeout=datetime.timedelta(seconds=3))
    me, last = dist.get_rank(), dist.get_world_size() - 1
    store.set(f"resumed/pid{me}", str(os.getpid()))
    buffer = torch.ones(LARGE // 4)  # 32 MiB, kept as a DDP bucket is
    dist.barrier(group=everyone)
    if me == last:
        work = dist.all_reduce(buffer, group=everyone, async_op=True)
        time.sleep(0.002)
        os.kill(os.getpid(), signal.SIGSTOP)  # the op's thread stops with the rest
        start = time.monotonic()
        try:
            work.wait()
            report["error"] = "returned"
        except RuntimeError as e:
            report["error"] = " ".join(str(e).split())[:600]
        report["seconds_after_resume"] = time.monotonic() - start
        store.set("resumed/reported", "1")
        return
    failure = failed_all_reduce_of(buffer, everyone)
    shrunk = dist.shrink_group([last], group=everyone)
    buffer.fill_(7.0)
    dist.barrier(group=shrunk)
    if me == 0:
        os.kill(int(store.get(f"resumed/pid{last}")), signal.SIGCONT)
    store.wait(["resumed/reported"], TIMEOUT)
    time.sleep(0.2)
    report["failure"] = failure
    report["touched"] = int((buffer != 7.0).sum())
    dist.all_reduce(buffer, group=shrunk)
    report["wrong_after_all_reduce"] = int((buffer != 7.0 * last).sum())


def failed_all_reduce_of(buffer: torch.Tensor, group) -> str:
    try:
        dist.all_reduce(buffer, group=group)
    except RuntimeError as e:
        return " ".join(str(e).split())[:300]
    return "returned"


def ddp(store: dist.Store, report: dict) -> None:
    from torch.nn.parallel import DistributedDataParallel as DDP

    net = model()
    optimizer = torch.optim.SGD(net.parameters(), lr=0.1)
    wrapped = DDP(net)
    me, last = int(os.environ["RANK"]), dist.get_world_size() - 1
    step = 0
    while step < STEPS:
        x, y = batch(me, step)
        loss = torch.nn.functional.mse_loss(wrapped(x), y)
        if step == KILL_STEP and me == last:
            store.set(f"killed/{dist.get_rank()}", repr(time.time()))
            os.kill(os.getpid(), signal.SIGKILL)
        try:
            loss.backward()
        except RuntimeError as e:
            report["error"] = " ".join(str(e).split())[:300]
            dist.shrink_group([last])
            optimizer.zero_grad(set_to_none=True)
            wrapped = DDP(net)  # on the shrunk default group; the step runs again
            continue
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        step += 1
    report["parameters"] = [p.detach().tolist() for p in net.parameters()]


def main() -> None:
    scenario = sys.argv[1]
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    torch.set_num_threads(1)
    if "OCCL_TEST_STORE_FILE" in os.environ:
        store = dist.FileStore(os.environ["OCCL_TEST_STORE_FILE"], world)
        dist.init_process_group("occl", store=store, rank=rank, world_size=world, timeout=TIMEOUT)
    else:
        dist.init_process_group("occl", init_method="env://", rank=rank, world_size=world,
                                timeout=TIMEOUT)
        store = dist.distributed_c10d._get_default_store()
    fds = open_fds()
    report: dict = {"rank": rank}
    if scenario == "twice":
        killed(store, report, 2)
    elif scenario == "abort":
        abort(store, report)
    elif scenario == "resumed":
        resumed(store, report)
    elif scenario == "ddp":
        ddp(store, report)
    dist.destroy_process_group()
    report["regions_after"] = regions()
    report["fds_opened"] = open_fds() - fds
    print(json.dumps(report), flush=True)


if __name__ == "__main__":
    main()
