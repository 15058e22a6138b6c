"""What torch's own tools read of a group (issue 21), on occl's ranks: sequence numbers and
TORCH_DISTRIBUTED_DEBUG=DETAIL (plain collectives, DDP, FSDP2, a DTensor redistribute, and a
mismatch it reports), the completion hook, collective timing, the profiler's record_param_comms,
monitored barriers, and OCCL_DEBUG's log."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

from dist_harness import occl_only

pytestmark = occl_only("occl's telemetry")

REPO = Path(__file__).resolve().parents[1]


def _cpu_backend():
    import torch
    import torch.distributed as dist

    return dist.group.WORLD._get_backend(torch.device("cpu"))


# -- sequence numbers ------------------------------------------------------------------------

def _sequence_numbers(rank, world_size):
    import torch
    import torch.distributed as dist

    backend = _cpu_backend()
    backend._set_sequence_number_for_group()
    seen = [backend._get_sequence_number_for_group()]
    dist.all_reduce(torch.ones(4))
    seen.append(backend._get_sequence_number_for_group())
    dist.broadcast(torch.ones(4), src=0)
    dist.barrier()
    seen.append(backend._get_sequence_number_for_group())
    if rank == 0:  # point-to-point ops are not collectives: the ranks still agree
        dist.send(torch.ones(2), dst=1)
    elif rank == 1:
        dist.recv(torch.ones(2), src=0)
    seen.append(backend._get_sequence_number_for_group())
    return seen


def test_sequence_numbers_count_the_collectives_alike_on_every_rank(fresh_pool):
    pool = fresh_pool(2)
    first = pool.run(_sequence_numbers)
    # The same group again: numbers go on from where they were.
    second = pool.run(_sequence_numbers)
    assert first == [[0, 1, 3, 3]] * 2
    assert second == [[3, 4, 6, 6]] * 2


# -- DETAIL mode -----------------------------------------------------------------------------

def _under_detail(rank, world_size):
    """Plain collectives, DDP, FSDP2 and a DTensor redistribute, each checked against values
    computed here, with torch's ProcessGroupWrapper checking every collective."""
    import torch
    import torch.distributed as dist
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import fully_shard
    from torch.distributed.tensor import Replicate, Shard, distribute_tensor
    from torch.nn.parallel import DistributedDataParallel

    assert type(dist.group.WORLD._get_backend(torch.device("cpu"))).__name__ == "_ProcessGroupWrapper"
    seen = {}
    total = torch.arange(6, dtype=torch.float32) * (rank + 1)
    dist.all_reduce(total)
    seen["all_reduce"] = total.tolist()
    gathered = [torch.empty(2) for _ in range(world_size)]
    dist.all_gather(gathered, torch.full((2,), float(rank)))
    seen["all_gather"] = [t.tolist() for t in gathered]

    torch.manual_seed(rank)  # DDP broadcasts rank 0's weights
    ddp = DistributedDataParallel(torch.nn.Linear(4, 1, bias=False))
    ddp(torch.full((1, 4), float(rank + 1))).sum().backward()
    seen["ddp_grad"] = ddp.module.weight.grad.tolist()

    mesh = init_device_mesh("cpu", (world_size,))
    model = torch.nn.Linear(4, 4, bias=False)
    torch.nn.init.constant_(model.weight, 1.0)
    fully_shard(model, mesh=mesh)
    model(torch.full((2, 4), float(rank + 1))).sum().backward()
    seen["fsdp_grad"] = model.weight.grad.full_tensor().tolist()

    local = torch.arange(8, dtype=torch.float32).reshape(4, 2)
    sharded = distribute_tensor(local, mesh, [Shard(0)])
    seen["dtensor"] = sharded.redistribute(mesh, [Replicate()]).to_local().tolist()
    return seen


def _mismatched_under_detail(rank, world_size):
    import torch
    import torch.distributed as dist

    try:
        if rank == 0:
            dist.all_reduce(torch.ones(4))
        else:
            dist.broadcast(torch.ones(4), src=0)
    except RuntimeError as error:
        return str(error)
    return "returned"


def test_detail_mode_runs_ddp_fsdp2_and_dtensor_and_reports_a_mismatch(fresh_pool):
    pool = fresh_pool(2, env={"TORCH_DISTRIBUTED_DEBUG": "DETAIL"}, group_timeout=30)
    seen = pool.run(_under_detail, timeout=120)
    # Rank r's all_reduce input is arange(6) * (r + 1); DDP averages x = r + 1 over the ranks;
    # FSDP2 averages the gradient of sum(x W^T) over 2 rows of x = r + 1 per rank.
    for rank, rank_seen in enumerate(seen):
        assert rank_seen["all_reduce"] == [i * 3.0 for i in range(6)], rank
        assert rank_seen["all_gather"] == [[0.0, 0.0], [1.0, 1.0]], rank
        assert rank_seen["ddp_grad"] == [[1.5] * 4], rank
        assert rank_seen["fsdp_grad"] == [[3.0] * 4] * 4, rank
        assert rank_seen["dtensor"] == [[0.0, 1.0], [2.0, 3.0], [4.0, 5.0], [6.0, 7.0]], rank
    errors = pool.run(_mismatched_under_detail, timeout=120)
    for error in errors:
        assert "Detected mismatch between collectives on ranks" in error, errors
        assert "ALLREDUCE" in error and "BROADCAST" in error, errors


# -- the completion hook and timing ------------------------------------------------------------

def _hooked(rank, world_size):
    import threading

    import torch
    import torch.distributed as dist

    reports = []
    caller = threading.get_ident()

    def hook(info):
        assert info.time_started <= info.time_finished
        reports.append((str(info.op_type), info.seq, info.active_duration.total_seconds(),
                        threading.get_ident() != caller))
        time.sleep(0.2)  # a slow hook must not hold up the ops
        if len(reports) == 2:
            raise RuntimeError("a hook that fails once")

    pg = dist.group.WORLD
    pg._register_on_completion_hook(hook)
    try:
        pg._register_on_completion_hook(hook)
        second = "accepted"
    except RuntimeError as error:
        second = str(error).splitlines()[0]
    start = time.monotonic()
    works = [dist.all_reduce(torch.ones(4), async_op=True) for _ in range(3)]
    works.append(dist.broadcast(torch.ones(4), src=0, async_op=True))
    for work in works:
        work.wait()
    issued = time.monotonic() - start
    deadline = time.monotonic() + 10
    while len(reports) < 4 and time.monotonic() < deadline:
        time.sleep(0.05)
    return reports, second, issued


def test_the_completion_hook_reports_every_op_off_the_op_path(fresh_pool):
    pool = fresh_pool(2)
    for reports, second, issued in pool.run(_hooked):
        assert [(op, seq, other) for op, seq, _, other in reports] == [
            ("OpType.ALLREDUCE", 0, True), ("OpType.ALLREDUCE", 1, True),
            ("OpType.ALLREDUCE", 2, True), ("OpType.BROADCAST", 3, True)]
        assert all(duration >= 0 for _, _, duration, _ in reports)
        assert second == "occl: a completion hook is registered already (one per group)"
        assert issued < 0.6, issued  # four hooks of 0.2 s each did not run on the op path


def _timed(rank, world_size):
    import torch
    import torch.distributed as dist

    before = dist.all_reduce(torch.ones(4), async_op=True)
    before.wait()
    try:
        before._get_duration()
        untimed = "no error"
    except RuntimeError as error:
        untimed = str(error).splitlines()[0]
    dist.group.WORLD._enable_collectives_timing()
    durations = []
    for size in (4, 1 << 20):
        work = dist.all_reduce(torch.ones(size), async_op=True)
        work.wait()
        durations.append(work._get_duration())
    return untimed, durations


def test_durations_after_enable_collectives_timing(fresh_pool):
    for untimed, durations in fresh_pool(2).run(_timed):
        assert untimed == ("occl:allreduce #0: no duration, the op was issued before"
                           " enableCollectivesTiming (pg._enable_collectives_timing())")
        assert all(0 < duration < 10_000 for duration in durations), durations


# -- the profiler ----------------------------------------------------------------------------

def _profiled(rank, world_size, trace_folder):
    import torch
    import torch.distributed as dist
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU]) as prof:
        dist.all_reduce(torch.ones(6))
        dist.all_gather_into_tensor(torch.empty(8 * world_size, dtype=torch.bfloat16),
                                    torch.ones(8, dtype=torch.bfloat16))
        if rank == 0:
            dist.send(torch.ones(3), dst=1)
        else:
            dist.recv(torch.empty(3), src=0)
    path = os.path.join(trace_folder, f"rank{rank}.json")
    prof.export_chrome_trace(path)
    return path


def test_the_profiler_trace_carries_every_op_s_metadata(fresh_pool, tmp_path):
    paths = fresh_pool(2).run(_profiled, str(tmp_path))
    for rank, path in enumerate(paths):
        events = [e for e in json.loads(Path(path).read_text())["traceEvents"]
                  if e.get("name") == "record_param_comms"]
        args = [e["args"] for e in events]
        assert [a["Collective name"] for a in args] == ["allreduce", "_allgather_base",
                                                        "send" if rank == 0 else "recv"], args
        assert [a["dtype"] for a in args] == ["Float", "BFloat16", "Float"], args
        assert [(a["In msg nelems"], a["Out msg nelems"]) for a in args] == [
            (6, 6), (8, 16), (3, 3)], args
        assert [a["Seq"] for a in args] == [0, 1, 0], args
        for a in args:
            assert a["Rank"] == rank and a["Group size"] == 2, a
            assert a["Process Group Name"] == "0" and a["Process Group Ranks"] == "[0, 1]", a


# -- monitored barrier -----------------------------------------------------------------------

def _monitored(rank, world_size, absent, wait_all_ranks):
    import datetime

    if rank in absent:
        return "absent"
    start = time.monotonic()
    try:
        _cpu_backend().monitored_barrier(datetime.timedelta(seconds=2), wait_all_ranks)
        outcome = "passed"
    except RuntimeError as error:
        outcome = str(error).splitlines()[0]
    return outcome, time.monotonic() - start


@pytest.mark.parametrize("absent, wait_all_ranks, failure", [
    ((), False, None),
    ((2,), False, "rank 2 failed to pass monitoredBarrier in 2000 ms"),
    ((1, 2), False, "rank 1 failed to pass monitoredBarrier in 2000 ms"),
    ((1, 2), True, "ranks 1, 2 failed to pass monitoredBarrier in 2000 ms"),
])
def test_a_monitored_barrier_names_the_ranks_that_did_not_arrive(fresh_pool, absent,
                                                                 wait_all_ranks, failure):
    seen = fresh_pool(3).run(_monitored, absent, wait_all_ranks, timeout=60)
    prefix = "occl.monitored_barrier #0 in group 0 (rank {} of 3): "
    for rank, outcome in enumerate(seen):
        if rank in absent:
            continue
        text, seconds = outcome
        if failure is None:
            assert text == "passed" and seconds < 1.5, seen
            continue
        # Rank 0 waits out the 2 s timeout; the others hear from it then.
        assert 1.9 <= seconds < 5, seen
        if rank == 0:
            assert text == prefix.format(0) + failure, seen
        else:
            assert text == prefix.format(rank) + "rank 0 says: " + failure, seen


# -- OCCL_DEBUG ------------------------------------------------------------------------------

TWO_RANKS = """
import datetime, sys, torch, torch.distributed as dist, torch_occl
dist.init_process_group("occl", init_method="file://" + sys.argv[2], rank=int(sys.argv[1]),
                        world_size=2, timeout=datetime.timedelta(seconds=30))
dist.all_reduce(torch.ones(4))
dist.broadcast(torch.ones(3, dtype=torch.float64), src=0)
dist.destroy_process_group()
"""


ASYNC_OPS = """
import datetime, sys, torch, torch.distributed as dist, torch_occl
dist.init_process_group("occl", init_method="file://" + sys.argv[2], rank=int(sys.argv[1]),
                        world_size=2, timeout=datetime.timedelta(seconds=30))
dist.all_reduce(torch.ones(16384), async_op=True).wait()
dist.all_reduce(torch.ones(16385), async_op=True).wait()
# 64 KiB per rank, 128 KiB in all: as small as the first.
dist.all_gather_into_tensor(torch.empty(32768), torch.ones(16384), async_op=True).wait()
dist.reduce_scatter_tensor(torch.empty(16384), torch.ones(32768), async_op=True).wait()
dist.all_gather_into_tensor(torch.empty(32770), torch.ones(16385), async_op=True).wait()
dist.destroy_process_group()
"""


def _run_two_ranks(tmp_path, env, script=TWO_RANKS) -> list[list[str]]:
    """Each rank's lines from occl on stderr, running `script` with `env`."""
    environment = {**os.environ, "TORCH_DEVICE_BACKEND_AUTOLOAD": "0", **env}
    store = tmp_path / f"store-{time.monotonic_ns()}"
    ranks = [subprocess.Popen([sys.executable, "-c", script, str(rank), str(store)],
                              env=environment, stderr=subprocess.PIPE, text=True)
             for rank in range(2)]
    outputs = [process.communicate(timeout=120)[1] for process in ranks]
    assert [process.returncode for process in ranks] == [0, 0], outputs
    return [[line for line in output.splitlines() if line.startswith("occl ")] for output in outputs]


def test_occl_debug_info_logs_each_group_s_choices_once(tmp_path):
    logged = _run_two_ranks(tmp_path, {"OCCL_DEBUG": "INFO"})
    for rank, lines in enumerate(logged):
        where = f"occl INFO group 0 (rank {rank} of 2): "
        assert len(lines) == 3, lines
        assert re.fullmatch(re.escape(where + f"shared memory to ranks {1 - rank}; TCP to ranks"
                                      " (none); spins ") + r"\d+ us before it sleeps", lines[0]), lines
        assert re.fullmatch(re.escape(where) + r"single copies (on, from 262144 bytes per rank"
                            r" \(point-to-point messages as large are lent\)|off: .+)", lines[1]), lines
        assert lines[2].startswith(where + "allreduce and reduce in one round up to 65536 bytes"), lines


def test_occl_debug_info_says_why_single_copies_are_off(tmp_path):
    logged = _run_two_ranks(tmp_path, {"OCCL_DEBUG": "info", "OCCL_TRANSPORT": "tcp"})
    for rank, lines in enumerate(logged):
        where = f"occl INFO group 0 (rank {rank} of 2): "
        assert lines[0].startswith(where + f"shared memory to ranks (none); TCP to ranks {1 - rank};"), lines
        assert lines[1] == where + "single copies off: OCCL_TRANSPORT=tcp", lines


def test_occl_debug_trace_logs_every_op_and_nothing_is_logged_without_it(tmp_path):
    logged = _run_two_ranks(tmp_path, {"OCCL_DEBUG": "TRACE"})
    for rank, lines in enumerate(logged):
        traced = [line for line in lines if " TRACE " in line]
        assert traced == [
            f"occl TRACE occl.allreduce #0 in group 0 (rank {rank} of 2): 4 elements in, 4 out"
            " (float32)",
            f"occl TRACE occl.broadcast #1 in group 0 (rank {rank} of 2): 3 elements in, 3 out"
            " (float64)"], lines
    assert _run_two_ranks(tmp_path, {}) == [[], []]


def test_occl_debug_trace_says_which_async_ops_start_at_once(tmp_path):
    """An async op whose inputs or outputs hold at most OCCL_DEFERRED_ASYNC_MAX_BYTES (64 KiB)
    waits for its waiter, which runs it; a larger one starts on the group's worker at once, to
    overlap the caller's work."""
    logged = _run_two_ranks(tmp_path, {"OCCL_DEBUG": "TRACE"}, ASYNC_OPS)
    for rank, lines in enumerate(logged):
        where = f"in group 0 (rank {rank} of 2): "
        assert [line for line in lines if " TRACE " in line] == [
            f"occl TRACE occl.allreduce #0 {where}16384 elements in, 16384 out (float32), async"
            " (run when waited for)",
            f"occl TRACE occl.allreduce #1 {where}16385 elements in, 16385 out (float32), async"
            " (started at once)",
            f"occl TRACE occl._allgather_base #2 {where}16384 elements in, 32768 out (float32),"
            " async (run when waited for)",
            f"occl TRACE occl._reduce_scatter_base #3 {where}32768 elements in, 16384 out"
            " (float32), async (run when waited for)",
            f"occl TRACE occl._allgather_base #4 {where}16385 elements in, 32770 out (float32),"
            " async (started at once)"], lines
    logged = _run_two_ranks(tmp_path, {"OCCL_DEBUG": "TRACE", "OCCL_DEFERRED_ASYNC_MAX_BYTES": "0"},
                            ASYNC_OPS)
    assert all(line.endswith("async (started at once)")
               for lines in logged for line in lines if " TRACE " in line), logged
