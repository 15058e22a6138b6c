"""The benchmark runs end to end at a tiny size and checks its own results (it is not a timing test)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent


def test_bench_runs_every_op_and_checks_results(tmp_path):
    report_file = tmp_path / "bench.json"
    env = dict(os.environ, PYTHONPATH=str(REPO), OMP_NUM_THREADS="1")
    result = subprocess.run(
        [sys.executable, "-m", "torch_occl.bench", "--max-bytes", "64", "--factor", "8",
         "--rounds", "1", "--iters", "2", "--json", str(report_file)],
        env=env, capture_output=True, text=True, timeout=180,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    report = json.loads(report_file.read_text())
    ops = {row["op"] for row in report["rows"]}
    assert ops == {"all_reduce", "all_gather_into_tensor", "reduce_scatter_tensor", "broadcast",
                   "all_to_all_single", "barrier", "send_recv"}
    assert all(row["wrong"] == 0 for row in report["rows"])
    timed = [row for row in report["rows"] if row["op"] != "barrier"]
    assert all(row["floor_us"] > 0 and row["bound"] > 0 for row in timed)
    barrier = next(row for row in report["rows"] if row["op"] == "barrier")
    assert barrier["floor_us"] is None and barrier["bound"] is None  # it writes nothing
    assert "speedup" in result.stdout and "floor(us)" in result.stdout
    barrier_line = next(line for line in result.stdout.splitlines()
                        if line.split()[:1] == ["barrier"])
    assert barrier_line.split()[-2:] == ["-", "-"]


def test_the_floor_shares_the_bytes_each_op_writes_among_the_ranks():
    from torch_occl.bench import _floor_bytes

    ranks = range(4)
    written = {  # bytes the op writes into the outputs of 4 ranks, for 1 KiB per rank
        "all_reduce": 4 * 1024,
        "all_gather_into_tensor": 4 * 4 * 1024,
        "reduce_scatter_tensor": 4 * 1024,
        "broadcast": 3 * 1024,
        "all_to_all_single": 4 * 1024,
        "send_recv": 1024,
        "barrier": 0,
    }
    for op, total in written.items():
        assert sum(_floor_bytes(op, 1024, rank, 4) for rank in ranks) == total, op
    assert [_floor_bytes("send_recv", 1024, rank, 4) for rank in ranks] == [512, 512, 0, 0]


def test_rounds_of_large_sizes_keep_several_calls():
    from torch_occl.bench import _iterations

    assert _iterations(20, 8) == 20
    assert _iterations(20, 1 << 20) == 20
    assert _iterations(20, 4 << 20) == 5
    assert _iterations(20, 64 << 20) == 5  # not 1: a lone call times an idle CPU waking up
    assert _iterations(2, 64 << 20) == 2  # never more than asked


def test_bench_bind_pins_each_rank_to_its_own_cpu(tmp_path):
    if len(os.sched_getaffinity(0)) < 2:
        pytest.skip("needs two CPUs")
    report_file = tmp_path / "bench.json"
    env = dict(os.environ, PYTHONPATH=str(REPO), OMP_NUM_THREADS="1")
    result = subprocess.run(
        [sys.executable, "-m", "torch_occl.bench", "--ops", "all_reduce", "--max-bytes", "8",
         "--rounds", "1", "--iters", "2", "--bind", "--json", str(report_file)],
        env=env, capture_output=True, text=True, timeout=180,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    allowed = sorted(os.sched_getaffinity(0))
    assert json.loads(report_file.read_text())["cpus_per_rank"] == [[allowed[0]], [allowed[1]]]


@pytest.mark.parametrize("key", [None, "a-key-of-32-characters-for-bench"], ids=["plain", "key"])
def test_bench_times_group_formation_with_and_without_a_key(tmp_path, key):
    report_file = tmp_path / "bench.json"
    env = dict(os.environ, PYTHONPATH=str(REPO), OMP_NUM_THREADS="1")
    if key:
        env["OCCL_AUTH_KEY"] = key
    result = subprocess.run(
        [sys.executable, "-m", "torch_occl.bench", "--ops", "new_group", "--rounds", "1",
         "--iters", "2", "--json", str(report_file)],
        env=env, capture_output=True, text=True, timeout=180,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    [row] = json.loads(report_file.read_text())["rows"]
    assert row["op"] == "new_group" and row["occl_us"] > 0 and row["gloo_us"] > 0
    assert row["floor_us"] is None


def test_bench_times_splitting_beside_new_subgroups(tmp_path):
    """`--ops split_group,new_subgroups` forms the halves of 4 ranks both ways and frees them
    after each round (a leak would show as a failure to form the next ones)."""
    report_file = tmp_path / "bench.json"
    env = dict(os.environ, PYTHONPATH=str(REPO), OMP_NUM_THREADS="1")
    result = subprocess.run(
        [sys.executable, "-m", "torch_occl.bench", "--world-size", "4", "--ops",
         "split_group,new_subgroups", "--rounds", "2", "--iters", "2", "--json", str(report_file)],
        env=env, capture_output=True, text=True, timeout=300,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    rows = json.loads(report_file.read_text())["rows"]
    assert [row["op"] for row in rows] == ["split_group", "new_subgroups"]
    assert all(row["occl_us"] > 0 and row["gloo_us"] > 0 for row in rows)
