"""A rank stopped (SIGSTOP) while its group runs collectives.

The others give up after their timeout and name the stopped rank as the one they wait for, also
those that were only waiting for a rank stuck behind it; once resumed, the stopped rank raises
within a second, naming the ranks that gave up (they told it why, see mesh.hpp), instead of
waiting out its own timeout for ranks that left.
"""

from __future__ import annotations

import os
import pickle
import re
import signal
import subprocess
import sys
import threading
import time

import pytest
import torch
import torch.distributed as dist

from dist_harness import DistPool, occl_only

pytestmark = occl_only("occl's own error texts")

GROUP_TIMEOUT = 3.0
STOPPED = 1
# What a healthy rank's error must contain: the stopped rank as the one awaited, directly or as
# the rank that another awaited rank reported it was waiting for (then where the flight recorder
# dumped).
WAITS_FOR_STOPPED = re.compile(
    rf"((from|to) rank {STOPPED}|rank\(s\) {STOPPED} did not join)(; this rank's flight|$)")


def _pids():
    pids = [None] * dist.get_world_size()
    dist.all_gather_object(pids, os.getpid())
    dist.barrier()
    return pids


def _all_reduce_until_it_fails(x, attempts):
    start = time.monotonic()
    for _ in range(attempts):
        try:
            dist.all_reduce(x)
        except RuntimeError as e:
            return time.monotonic(), time.monotonic() - start, str(e)
    return time.monotonic(), time.monotonic() - start, None


def _wait_for(flag):
    while not os.path.exists(flag):
        time.sleep(0.01)


def w_resumed_between_collectives(rank, ws, flags, more_first=False):
    """Rank 1 is stopped between two collectives (once it says it is done with the first); the
    others call one and give up; rank 1, resumed, calls it too (at once: rank 0 raises the
    resumed flag before it resumes rank 1). `more_first`: every rank runs four more
    collectives of other kinds before."""
    idle, resumed_flag = flags
    pids = _pids()
    x = torch.ones(1024)
    if more_first:
        dist.all_reduce(x)
        dist.broadcast(x, src=0)
        dist.all_gather_into_tensor(torch.empty(1024 * ws), x)
        dist.all_reduce(torch.ones(8, dtype=torch.float64))
    if rank == STOPPED:
        open(idle, "w").close()
        _wait_for(resumed_flag)  # stopped in here
        return _all_reduce_until_it_fails(x, 3)
    if rank == 0:
        _wait_for(idle)
        os.kill(pids[STOPPED], signal.SIGSTOP)
    time.sleep(0.1)
    outcome = _all_reduce_until_it_fails(x, 1)
    if rank == 0:
        time.sleep(0.5)  # every healthy rank has given up by now
        open(resumed_flag, "w").close()
        resumed = time.monotonic()
        os.kill(pids[STOPPED], signal.SIGCONT)
        outcome = outcome + (resumed,)
    time.sleep(3)  # stay alive: rank 1 must learn of it through the links, not a closed socket
    return outcome


@pytest.mark.parametrize("world_size", [2, 3], ids=lambda n: f"ws{n}")
def test_a_rank_resumed_after_the_others_gave_up_fails_at_once(world_size, tmp_path):
    with DistPool(world_size, group_timeout=GROUP_TIMEOUT) as pool:
        flags = (str(tmp_path / "idle"), str(tmp_path / "resumed"))
        results = pool.run(w_resumed_between_collectives, flags, timeout=60)
    resumed = results[0][3]
    for rank, (_, elapsed, error, *_) in enumerate(results):
        if rank == STOPPED:
            continue
        assert error is not None, f"rank {rank}: returned without rank {STOPPED}"
        assert WAITS_FOR_STOPPED.search(error), f"rank {rank}: {error}"
        assert elapsed < GROUP_TIMEOUT + 2, f"rank {rank}: raised after {elapsed:.1f}s"
    failed_at, _, error = results[STOPPED]
    assert error is not None, f"rank {STOPPED}: succeeded after the others gave up"
    assert failed_at - resumed < 1.0, \
        f"rank {STOPPED}: raised {failed_at - resumed:.1f}s after it resumed: {error}"
    assert re.search(r"rank [02] gave up: .*rank\(s\) 1 did not join; this rank's flight", error), \
        error


def w_stopped_in_the_middle(rank, ws, delay):
    """Rank 0 stops rank 1 while every rank runs all_reduces of 4 MiB, so that ranks end up
    waiting for ranks that wait for rank 1, some of them one collective ahead."""
    pids = _pids()
    if rank == 0:
        threading.Timer(delay, os.kill, (pids[STOPPED], signal.SIGSTOP)).start()
    outcome = _all_reduce_until_it_fails(torch.ones(1 << 20), 100_000)
    if rank == 0:
        time.sleep(0.5)
        resumed = time.monotonic()
        os.kill(pids[STOPPED], signal.SIGCONT)
        outcome = outcome + (resumed,)
        time.sleep(2)
    elif rank != STOPPED:
        time.sleep(2.5)
    return outcome


@pytest.mark.parametrize("delay", [0.3, 0.7])
def test_ranks_waiting_behind_a_stopped_rank_name_it(delay):
    with DistPool(3, group_timeout=GROUP_TIMEOUT) as pool:
        results = pool.run(w_stopped_in_the_middle, delay, timeout=60)
    for rank in (0, 2):
        _, elapsed, error, *_ = results[rank]
        assert error is not None, f"rank {rank}: returned without rank {STOPPED}"
        assert WAITS_FOR_STOPPED.search(error), f"rank {rank}: {error}"
        assert elapsed < delay + GROUP_TIMEOUT + 2, f"rank {rank}: raised after {elapsed:.1f}s"
    failed_at, _, error = results[STOPPED]
    assert error is not None, f"rank {STOPPED}: succeeded after the others gave up"
    assert failed_at - results[0][3] < 1.0, \
        f"rank {STOPPED}: raised {failed_at - results[0][3]:.1f}s after it resumed: {error}"
    assert re.search(r"rank [02] (gave up|was waiting too)", error), error


def test_survivors_flight_recorders_show_where_the_stopped_rank_stands(tmp_path):
    # The stopped rank's own dump (written once it resumes) goes elsewhere: the survivors' dumps
    # alone, and what they wrote for it, must show where it stands.
    survivors, stopped = tmp_path / "survivors", tmp_path / "stopped"
    survivors.mkdir()
    stopped.mkdir()
    env = {"TORCH_FR_DUMP_TEMP_FILE": f"{survivors}/occl_trace_rank_"}
    with DistPool(3, group_timeout=GROUP_TIMEOUT, env=env,
                  rank_env={STOPPED: {"TORCH_FR_DUMP_TEMP_FILE": f"{stopped}/occl_trace_rank_"}}
                  ) as pool:
        results = pool.run(w_resumed_between_collectives,
                           (str(tmp_path / "idle"), str(tmp_path / "resumed")), True, timeout=60)
    # Every rank's error names its dump; a rank that timed out also names the stand-in.
    for rank, (_, _, error, *_) in enumerate(results):
        where = stopped if rank == STOPPED else survivors
        assert f"this rank's flight recorder: {where}/occl_trace_rank_{rank}" in error, error
    timed_out = [error for rank, (_, _, error, *_) in enumerate(results)
                 if re.match(rf"occl.allreduce #7 in group 0 \(rank {rank} of 3\): timed out", error)]
    assert timed_out, results
    for error in timed_out:
        assert f"what rank 1 last reported: {survivors}/occl_trace_rank_1" in error, error
    assert sorted(os.listdir(survivors)) == [f"occl_trace_rank_{r}" for r in range(3)]
    with open(survivors / "occl_trace_rank_1", "rb") as f:
        assert "which did not answer" in pickle.load(f)["comm_lib_version"]

    analysis = subprocess.run(
        [sys.executable, "-m", "torch.distributed.flight_recorder.fr_trace", str(survivors),
         "--prefix", "occl_trace_rank_"], capture_output=True, text=True, timeout=120)
    assert analysis.returncode == 0, analysis.stderr
    # _pids() ran collectives #0-#2, the four more #3-#6; rank 1 never joined #7.
    report = analysis.stdout + analysis.stderr  # the analyser logs to stderr
    assert report.count("sequence number") == 1, report
    assert "Not all ranks joining collective, sequence number: 7" in report, report
    assert "collective: gloo:all_reduce" in report and "missing ranks: {1}" in report, report
    assert "input sizes: [[1024]]" in report and "collective state: started" in report, report


def w_collectives_then_dump(rank, ws):
    x = torch.arange(6, dtype=torch.float32).reshape(2, 3)
    dist.all_reduce(x)
    dist.broadcast(torch.ones(5, dtype=torch.int64), src=1)
    dist.all_gather([torch.empty(4) for _ in range(ws)], torch.ones(4))
    dist.all_gather_into_tensor(torch.empty(8 * ws, dtype=torch.bfloat16),
                                torch.ones(8, dtype=torch.bfloat16))
    dist.reduce_scatter_tensor(torch.empty(3), torch.ones(3 * ws))
    dist.all_to_all_single(torch.empty(2 * ws), torch.ones(2 * ws))
    dist.barrier()
    dist.send(torch.ones(1), dst=1 - rank) if rank == 0 else dist.recv(torch.ones(1), src=0)
    import torch_occl

    with open(torch_occl.dump_flight_recorder(), "rb") as f:
        return pickle.load(f)


def test_a_dump_on_demand_holds_the_last_collectives_in_torchs_format(tmp_path):
    # Room for 5 entries: the first two collectives are gone.
    env = {"TORCH_FR_DUMP_TEMP_FILE": f"{tmp_path}/trace_", "TORCH_FR_BUFFER_SIZE": "5"}
    with DistPool(2, env=env) as pool:
        dumps = pool.run(w_collectives_then_dump)
    assert sorted(os.listdir(tmp_path)) == ["trace_0", "trace_1"]
    for rank, dump in enumerate(dumps):
        assert dump["version"] == "2.10"
        assert dump["pg_config"] == {"0": {"name": "0", "desc": "default_pg", "ranks": "[0, 1]"}}
        seen = [(e["collective_seq_id"], e["profiling_name"], e["input_sizes"],
                 e["input_dtypes"], e["output_sizes"], e["state"], e["retired"],
                 e["process_group"], e["is_p2p"]) for e in dump["entries"]]
        group = ("0", "default_pg")
        assert seen == [
            (2, "gloo:all_gather", [[4]], ["Float"], [[2, 4]], "completed", True, group, False),
            (3, "gloo:_all_gather_base", [[8]], ["BFloat16"], [[16]], "completed", True, group,
             False),
            (4, "gloo:_reduce_scatter_base", [[6]], ["Float"], [[3]], "completed", True, group,
             False),
            (5, "gloo:all_to_all_single", [[4]], ["Float"], [[4]], "completed", True, group,
             False),
            (6, "gloo:barrier", [], [], [], "completed", True, group, False),
        ], f"rank {rank}"
        for e in dump["entries"]:
            assert e["time_created_ns"] <= e["time_discovered_started_ns"] <= \
                e["time_discovered_completed_ns"], e
