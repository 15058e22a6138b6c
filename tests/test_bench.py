"""The benchmark runs end to end at tiny sizes: its peers, their skip reasons, its checks, its
progress and its report; the regression guard's verdicts. Nothing here times anything."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import torch
import torch.distributed as dist

REPO = Path(__file__).resolve().parent.parent
ROW_OPS = ("all_reduce", "all_gather_into_tensor", "all_gather", "reduce_scatter_tensor",
           "reduce_scatter", "reduce", "gather", "scatter", "broadcast", "all_to_all_single",
           "all_to_all", "barrier", "send_recv", "ping_pong")


def _environment(tmp_path: Path, hidden: tuple[str, ...] = ("deepspeed",)) -> dict:
    """The bench's environment, in which the modules `hidden` do not import (on every rank: a
    sitecustomize marks them missing), so a run does not depend on what this machine has."""
    site = tmp_path / "hide"
    site.mkdir(exist_ok=True)
    (site / "sitecustomize.py").write_text(
        "import sys\n" + "".join(f"sys.modules[{name!r}] = None\n" for name in hidden))
    return dict(os.environ, PYTHONPATH=f"{site}{os.pathsep}{REPO}", OMP_NUM_THREADS="1")


def _bench(tmp_path: Path, *options: str, timeout: float = 180, **env_options):
    result = subprocess.run([sys.executable, "-m", "torch_occl.bench", *options],
                            env=_environment(tmp_path, **env_options), capture_output=True,
                            text=True, timeout=timeout)
    assert result.returncode == 0, result.stdout + result.stderr
    return result


def _row_lines(stdout: str) -> list[list[str]]:
    return [line.split() for line in stdout.splitlines()
            if line.split()[:1] and line.split()[0] in ROW_OPS]


def test_bench_prints_each_row_as_it_finishes_and_checks_every_peer(tmp_path):
    report_file = tmp_path / "bench.json"
    bench = subprocess.Popen(
        [sys.executable, "-m", "torch_occl.bench", "--max-bytes", "64", "--factor", "8",
         "--rounds", "2", "--iters", "2", "--json", str(report_file)],
        env=_environment(tmp_path), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    lines, first_row_seen_while = [], None
    try:
        for line in bench.stdout:
            lines.append(line.rstrip("\n"))
            if first_row_seen_while is None and _row_lines(line):
                # The run goes on (15 more rows, then its teardown) when its first row shows.
                first_row_seen_while = (bench.poll(), report_file.exists())
        assert bench.wait(timeout=180) == 0, "\n".join(lines) + bench.stderr.read()
    finally:
        bench.kill()
        bench.stdout.close()
        bench.stderr.close()
    stdout = "\n".join(lines)
    assert first_row_seen_while == (None, False), stdout
    assert "# skipped deepspeed: not installed (pip install deepspeed)" in lines
    assert "# skipped deepspeed_op: not installed (pip install deepspeed)" in lines
    assert ("# skipped occl_mpi: the bench was not started by mpirun (mpirun -n 2 -x "
            "MASTER_ADDR=127.0.0.1 -x MASTER_PORT=29500 python -m torch_occl.bench)") in lines
    assert "# peers: occl = occl, gloo = gloo, fake = fake" in lines
    header = next(line.split() for line in lines if line.split()[:2] == ["op", "size(B)"])
    assert header[5:] == ["occl(us)", "gloo(us)", "fake(us)", "busbw", "#wrong", "own(us)",
                          "gloo/occl", "floor(us)", "bound"]
    rows = _row_lines(stdout)
    report = json.loads(report_file.read_text())
    # One progress line per row, in the report's order, each with every peer's time.
    assert [(row[0], int(row[1])) for row in rows] == [
        (row["op"], row["bytes"]) for row in report["rows"]]
    assert {row["op"] for row in report["rows"]} == set(ROW_OPS)
    assert lines[-1].startswith(f"# {len(rows)} rows in ")
    assert report["peers"] == ["occl", "gloo", "fake"]
    assert set(report["skipped"]) == {"deepspeed", "deepspeed_op", "occl_mpi"}
    for row in report["rows"]:
        assert row["wrong"] == {"occl": 0, "gloo": 0, "fake": None}, row  # fake: never checked
        assert {name: len(times) for name, times in row["rounds_us"].items()} == {
            "occl": 2, "gloo": 2, "fake": 2}
        assert all(t > 0 for times in row["rounds_us"].values() for t in times)
    barrier = next(row for row in report["rows"] if row["op"] == "barrier")
    assert barrier["floor_us"] is None and barrier["bound"] is None  # it writes nothing
    assert next(row for row in rows if row[0] == "barrier")[-2:] == ["-", "-"]


def _stand_in_deepspeed(tmp_path: Path, comm_source: str) -> dict:
    """The bench's environment with a stand-in `deepspeed` package whose deepspeed/comm.py is
    `comm_source`."""
    stand_in = tmp_path / "stand_in" / "deepspeed"
    stand_in.mkdir(parents=True)
    (stand_in / "__init__.py").write_text("")
    (stand_in / "comm.py").write_text(comm_source)
    env = _environment(tmp_path, hidden=())
    env["PYTHONPATH"] = f"{stand_in.parent}{os.pathsep}{env['PYTHONPATH']}"
    return env


def test_a_peer_that_fails_to_start_is_skipped_with_its_error(tmp_path):
    """A DeepSpeed whose op cannot start is reported, for both ways of calling it, and the run
    goes on without it."""
    env = _stand_in_deepspeed(
        tmp_path,
        "def init_distributed(**options):\n"
        "    raise RuntimeError('its op did not build\\nthe compiler said more')\n")
    result = subprocess.run(
        [sys.executable, "-m", "torch_occl.bench", "--ops", "all_reduce", "--sizes", "8",
         "--peers", "deepspeed,deepspeed_op", "--rounds", "1", "--iters", "2"],
        env=env, capture_output=True, text=True, timeout=180)
    assert result.returncode == 0, result.stdout + result.stderr
    for peer in ("deepspeed", "deepspeed_op"):
        assert (f"# skipped {peer}: failed to start: RuntimeError: its op did not build"
                in result.stdout.splitlines())
    assert [row[:2] for row in _row_lines(result.stdout)] == [["all_reduce", "8"]]


def test_deepspeed_op_times_its_kernel_called_directly(tmp_path):
    """`deepspeed_op` calls torch.ops.deepspeed.inference_all_reduce_ itself, never DeepSpeed's
    Python wrapper, and its results are checked like every peer's. The stand-in's kernel sums
    over the default group when DeepSpeed starts, as the real one does; its wrapper raises."""
    env = _stand_in_deepspeed(tmp_path, """\
import types

import torch
import torch.distributed as dist

comm = types.SimpleNamespace(
    cdb=types.SimpleNamespace(shm_comm_op=object(), shm_vector_kernel_level=1))
_library = []


def init_distributed(**options):
    library = torch.library.Library("deepspeed", "DEF")
    library.define("inference_all_reduce_(Tensor(a!) self) -> Tensor(a!)")

    def kernel(tensor):
        dist.all_reduce(tensor)
        return tensor

    library.impl("inference_all_reduce_", kernel, "CPU")
    _library.append(library)


def inference_all_reduce(tensor, op):
    raise AssertionError("the wrapper was called")
""")
    report_file = tmp_path / "bench.json"
    result = subprocess.run(
        [sys.executable, "-m", "torch_occl.bench", "--ops", "all_reduce,broadcast", "--sizes",
         "8,4K", "--peers", "deepspeed_op", "--rounds", "2", "--iters", "2",
         "--json", str(report_file)],
        env=env, capture_output=True, text=True, timeout=180)
    assert result.returncode == 0, result.stdout + result.stderr
    lines = result.stdout.splitlines()
    assert "# peers: occl = occl, ds_op = deepspeed_op" in lines
    assert ("# deepspeed_op skips broadcast: DeepSpeed's shared-memory op is an all_reduce only"
            in lines)
    report = json.loads(report_file.read_text())
    reduce_rows = [row for row in report["rows"] if row["op"] == "all_reduce"]
    assert [row["bytes"] for row in reduce_rows] == [8, 4096]
    for row in reduce_rows:
        assert row["wrong"]["deepspeed_op"] == 0, row
        assert len(row["rounds_us"]["deepspeed_op"]) == 2
    broadcast_rows = [row for row in report["rows"] if row["op"] == "broadcast"]
    assert broadcast_rows and all("deepspeed_op" not in row["us"] for row in broadcast_rows)


def test_rate_of_times_occl_on_the_same_bytes_of_another_type_beside_the_peers(tmp_path):
    report_file = tmp_path / "bench.json"
    result = _bench(tmp_path, "--ops", "all_reduce,barrier", "--sizes", "1K", "--peers",
                    "occl,gloo", "--rate-of", "bfloat16", "--rounds", "2", "--iters", "2",
                    "--json", str(report_file))
    report = json.loads(report_file.read_text())
    assert report["rate_of"] == ["bfloat16"]
    reduce_row, barrier_row = report["rows"]
    # Its own rounds, alternating with the peers', and its results checked like theirs.
    assert len(reduce_row["rounds_us"]["occl[bfloat16]"]) == 2
    assert reduce_row["wrong"]["occl[bfloat16]"] == 0
    us = reduce_row["us"]
    assert reduce_row["rates"] == {"bfloat16": pytest.approx(us["occl"] / us["occl[bfloat16]"])}
    assert barrier_row["rates"] == {}  # it moves no bytes
    assert "bfloat16-rate" in result.stdout
    line = _row_lines(result.stdout)[0]
    assert float(line[-1]) == pytest.approx(reduce_row["rates"]["bfloat16"], abs=0.01)


def test_rate_of_names_a_type_it_does_not_know(tmp_path):
    result = subprocess.run([sys.executable, "-m", "torch_occl.bench", "--rate-of", "bfloat17"],
                            env=_environment(tmp_path), capture_output=True, text=True, timeout=60)
    assert result.returncode != 0
    assert "--rate-of: unknown ['bfloat17']" in result.stderr


def test_a_peer_s_wrong_results_and_its_skipped_ops_are_noted():
    from torch_occl.bench import report

    row = {"op": "all_reduce", "bytes": 8, "dtype": "float32", "redop": "max",
           "wrong": {"occl": 0, "deepspeed": 4, "fake": None},
           "refused": {"occl_mpi": "all_reduce: some reason"}}
    noted = set()
    assert report.notes(row, noted) == [
        "# occl_mpi skips all_reduce: some reason",
        "# deepspeed got 4 elements wrong: all_reduce max of 8 B float32 (summed over the ranks)"]
    assert report.notes(row, noted)[:1] == [  # a reason is said once per run
        "# deepspeed got 4 elements wrong: all_reduce max of 8 B float32 (summed over the ranks)"]


def test_deepspeed_is_timed_only_where_its_own_kernel_does_the_op():
    from torch_occl.bench.peers import deepspeed_refuses

    assert deepspeed_refuses("all_reduce", "float32", 1) is None
    assert deepspeed_refuses("all_reduce", "bfloat16", 2) is None
    assert deepspeed_refuses("broadcast", "float32", 2) == (
        "broadcast: DeepSpeed's shared-memory op is an all_reduce only")
    assert deepspeed_refuses("all_reduce", "float64", 2) == (
        "float64: DeepSpeed's op returns it unreduced (float32, bfloat16, float16 only)")
    assert deepspeed_refuses("all_reduce", "bfloat16", 1) == (
        "bfloat16: DeepSpeed's kernel needs avx512bw, which this CPU lacks; it would fall back "
        "to the default (gloo) group")
    assert deepspeed_refuses("all_reduce", "float32", 0).startswith(
        "float32: DeepSpeed's kernel needs avx2")


def test_plot_needs_matplotlib_before_the_run_starts(tmp_path):
    result = subprocess.run(
        [sys.executable, "-m", "torch_occl.bench", "--plot", str(tmp_path / "bench.png")],
        env=_environment(tmp_path, hidden=("deepspeed", "matplotlib")), capture_output=True,
        text=True, timeout=120)
    assert result.returncode == 2
    assert "--plot needs matplotlib, which does not import here" in result.stderr
    assert "pip install matplotlib" in result.stderr
    assert result.stdout == ""  # no rank started: a run's head would be there


def test_plot_draws_time_and_bandwidth_of_every_peer_on_log_axes(tmp_path):
    pytest.importorskip("matplotlib")
    from torch_occl.bench import report

    rows = [{"op": "all_reduce", "bytes": size, "us": {"occl": 10.0 + size / 1e3,
                                                        "gloo": 500.0, "fake": 5.0},
             "floor_us": 1.0 + size / 1e4} for size in (8, 4096, 1 << 20)]
    figure = report.figure({"world_size": 2, "peers": ["occl", "gloo", "fake"], "rows": rows})
    latency, bandwidth = figure.axes
    for axis in (latency, bandwidth):
        assert (axis.get_xscale(), axis.get_yscale()) == ("log", "log")
    assert [line.get_label() for line in latency.get_lines()] == [
        "occl", "gloo", "fake", "copy floor"]
    assert [line.get_label() for line in bandwidth.get_lines()] == ["occl", "gloo"]
    occl_busbw = bandwidth.get_lines()[0].get_ydata()
    assert occl_busbw[0] == pytest.approx(8 / 10.008 / 1e3)  # algbw × 2(n-1)/n, n = 2


def test_help_documents_every_option_with_its_default():
    from torch_occl.bench.__main__ import parser

    parse = parser()
    text = parse.format_help()
    options = [action for action in parse._actions if action.option_strings != ["-h", "--help"]]
    assert len(options) == 20
    for action in options:
        assert action.option_strings[0] in text
        assert action.help and action.help.endswith("(default: %(default)s)"), action.dest
    assert " ".join(text.split()).count("(default: ") == len(options)
    assert "largest size (default: 64M)" in " ".join(text.split())


def test_hosts_must_divide_the_world(capsys):
    from torch_occl.bench.__main__ import _arguments

    with pytest.raises(SystemExit):
        _arguments(["--world-size", "4", "--hosts", "3"])
    assert "--hosts 3 must divide --world-size 4" in capsys.readouterr().err
    assert _arguments(["--world-size", "4", "--hosts", "2"]).hosts == 2


def test_json_keeps_every_round_of_a_sizes_list_and_the_reduce_op(tmp_path):
    report_file = tmp_path / "bench.json"
    _bench(tmp_path, "--ops", "all_reduce,reduce_scatter_tensor", "--sizes", "8,1K", "--peers",
           "gloo", "--redop", "max", "--rounds", "3", "--iters", "2", "--json", str(report_file))
    report = json.loads(report_file.read_text())
    assert report["peers"] == ["occl", "gloo"]  # occl is always one
    assert [(row["op"], row["bytes"], row["redop"]) for row in report["rows"]] == [
        ("all_reduce", 8, "max"), ("all_reduce", 1024, "max"),
        ("reduce_scatter_tensor", 8, "max"), ("reduce_scatter_tensor", 1024, "max")]
    # Checked against max(1, 2) = 2: a bench that summed (3) would count every element wrong.
    assert all(row["wrong"] == {"occl": 0, "gloo": 0} for row in report["rows"])
    assert all(len(times) == 3 for row in report["rows"] for times in row["rounds_us"].values())


@pytest.mark.parametrize("call", ["async", "functional"])
def test_call_times_async_and_functional_calls_and_checks_them(tmp_path, call):
    report_file = tmp_path / "bench.json"
    result = _bench(tmp_path, "--sizes", "8", "--peers", "gloo,fake", "--call", call,
                    "--rounds", "2", "--iters", "2", "--json", str(report_file))
    report = json.loads(report_file.read_text())
    assert report["call"] == call
    label = {"async": "async_op=True then wait()", "functional": "functional op then wait_tensor"}
    assert result.stdout.splitlines()[0].endswith(", " + label[call])
    timed = [row["op"] for row in report["rows"]]
    if call == "functional":  # torch has no functional barrier or send/recv
        assert timed == ["all_reduce", "all_gather_into_tensor", "reduce_scatter_tensor",
                         "broadcast", "all_to_all_single"]
        for op in ("barrier", "send_recv", "ping_pong"):
            assert (f"# not timed: {op}: torch has no functional {op} (--call sync or async)"
                    in result.stdout.splitlines())
    else:
        assert timed == list(ROW_OPS)
    # A call whose result went nowhere (a functional op's new tensor dropped) leaves the inputs.
    assert all(row["wrong"] == {"occl": 0, "gloo": 0, "fake": None} for row in report["rows"])


def test_deepspeed_and_forming_groups_are_timed_as_blocking_calls_only():
    from torch_occl.bench.cases import refuses_call
    from torch_occl.bench.peers import Peer

    peer = Peer("deepspeed", None, None, blocking_only=True)
    assert peer.refuses_row("all_reduce", "float32", "sync") is None
    assert peer.refuses_row("all_reduce", "float32", "async") == (
        "--call async: deepspeed's op is a blocking call only")
    assert refuses_call("new_group", "functional") == (
        "new_group: forming a group is timed as a blocking call only (--call sync)")
    assert refuses_call("broadcast", "functional") is None


@pytest.mark.parametrize("option,value", [("--sizes", "8,lots"), ("--max-bytes", "-4K"),
                                          ("--min-bytes", "0")])
def test_a_size_that_is_not_one_is_refused_naming_the_option(option, value):
    result = subprocess.run(
        [sys.executable, "-m", "torch_occl.bench", f"{option}={value}"],
        env=dict(os.environ, PYTHONPATH=str(REPO)), capture_output=True, text=True, timeout=120)
    assert result.returncode == 2
    bad = value.split(",")[-1]
    assert (f"argument {option}: {bad!r} is not a size: a positive number of bytes, with K, M or "
            "G if you like") in result.stderr
    assert result.stdout == ""  # refused before any rank started


def test_the_floor_shares_the_bytes_each_op_writes_among_the_ranks():
    from torch_occl.bench.cases import floor_bytes

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
        assert sum(floor_bytes(op, 1024, rank, 4) for rank in ranks) == total, op
    assert [floor_bytes("send_recv", 1024, rank, 4) for rank in ranks] == [512, 512, 0, 0]
    # A round trip's two messages go one after the other: ranks 0 and 1 each copy both.
    assert [floor_bytes("ping_pong", 1024, rank, 4) for rank in ranks] == [2048, 2048, 0, 0]


def test_rounds_of_large_sizes_keep_several_calls():
    from torch_occl.bench.cases import iterations

    assert iterations(20, 8) == 20
    assert iterations(20, 1 << 20) == 20
    assert iterations(20, 4 << 20) == 5
    assert iterations(20, 64 << 20) == 5  # not 1: a lone call times an idle CPU waking up
    assert iterations(2, 64 << 20) == 2  # never more than asked


def test_bench_bind_pins_each_rank_to_its_own_cpu(tmp_path):
    if len(os.sched_getaffinity(0)) < 2:
        pytest.skip("needs two CPUs")
    report_file = tmp_path / "bench.json"
    _bench(tmp_path, "--ops", "all_reduce", "--max-bytes", "8", "--rounds", "1", "--iters", "2",
           "--bind", "--json", str(report_file))
    allowed = sorted(os.sched_getaffinity(0))
    assert json.loads(report_file.read_text())["cpus_per_rank"] == [[allowed[0]], [allowed[1]]]


@pytest.mark.parametrize("key", [None, "a-key-of-32-characters-for-bench"], ids=["plain", "key"])
def test_bench_times_group_formation_with_and_without_a_key(tmp_path, key, monkeypatch):
    if key:
        monkeypatch.setenv("OCCL_AUTH_KEY", key)
    report_file = tmp_path / "bench.json"
    result = _bench(tmp_path, "--ops", "new_group", "--rounds", "1", "--iters", "2",
                    "--json", str(report_file))
    [row] = json.loads(report_file.read_text())["rows"]
    assert row["op"] == "new_group" and set(row["us"]) == {"occl", "gloo"}
    assert row["refused"] == {"fake": "new_group: the bench forms groups of occl and gloo only"}
    assert "# fake skips new_group: the bench forms groups of occl and gloo only" in result.stdout
    assert row["floor_us"] is None


def test_bench_times_splitting_beside_new_subgroups(tmp_path):
    """`--ops split_group,new_subgroups` forms the halves of 4 ranks both ways and frees them
    after each round (a leak would show as a failure to form the next ones)."""
    report_file = tmp_path / "bench.json"
    _bench(tmp_path, "--world-size", "4", "--ops", "split_group,new_subgroups", "--peers",
           "gloo", "--rounds", "2", "--iters", "2", "--json", str(report_file), timeout=300)
    rows = json.loads(report_file.read_text())["rows"]
    assert [row["op"] for row in rows] == ["split_group", "new_subgroups"]
    assert all(set(row["us"]) == {"occl", "gloo"} for row in rows)


def test_under_mpirun_occl_mpi_joins_as_a_peer(tmp_path):
    from test_mpi_backend import mpirun

    report_file = tmp_path / "bench.json"
    result = mpirun(2, [sys.executable, "-m", "torch_occl.bench", "--ops", "all_reduce,send_recv",
                        "--max-bytes", "64", "--factor", "8", "--rounds", "2", "--iters", "2",
                        "--json", str(report_file)], env=_environment(tmp_path))
    assert result.returncode == 0, result.stdout + result.stderr
    report = json.loads(report_file.read_text())
    assert report["launcher"] == "mpirun" and report["world_size"] == 2
    assert report["peers"] == ["occl", "gloo", "occl_mpi", "fake"]
    assert all(row["wrong"]["occl_mpi"] == 0 for row in report["rows"])
    assert len(_row_lines(result.stdout)) == len(report["rows"]) == 4  # rank 0's lines only


def _report(times: dict[str, float], **setup) -> dict:
    """A bench report whose occl rows took `times` µs ("op bytes")."""
    rows = []
    for key, us in times.items():
        op, nbytes = key.split()
        rows.append({"op": op, "bytes": int(nbytes), "dtype": "float32", "redop": "sum",
                     "us": {"occl": us, "gloo": 1000.0}})
    head = {"world_size": 2, "dtype": "float32", "transport": "auto", "launcher": "spawn",
            "shared_tensors": False}
    return dict(head, **setup, rows=rows)


def test_the_guard_lists_only_rows_slower_than_the_baseline_s_noise():
    from torch_occl.bench.guard import make_baseline, slower_rows, typical_spread

    baseline = make_baseline([
        _report({"all_reduce 8": 10.0, "all_reduce 4096": 20.0, "broadcast 8": 100.0,
                 "broadcast 4096": 50.0}),
        _report({"all_reduce 8": 12.0, "all_reduce 4096": 20.2, "broadcast 8": 130.0,
                 "broadcast 4096": 60.0}),
        _report({"all_reduce 8": 11.0, "all_reduce 4096": 20.4, "broadcast 8": 110.0,
                 "broadcast 4096": 55.0}),
    ])
    # The rows spread 20 %, 2 %, 30 % and 20 %: three quarters stay within 20 %, which every row
    # is granted. Limits: 12 × 1.2, 20.4 × 1.2, 130 × 1.3 and 60 × 1.2.
    assert typical_spread(baseline) == pytest.approx(0.2)
    slow = _report({"all_reduce 8": 14.3, "all_reduce 4096": 24.0, "broadcast 8": 170.0,
                    "broadcast 4096": 73.0})
    lines, compared = slower_rows(baseline, [slow])
    assert compared == 4
    assert lines == [
        "slower: broadcast 8 B float32 sum: occl 170.0 µs, baseline 100.0–130.0 µs over 3 runs "
        "(limit 169.0 µs: the slowest plus 30% of noise)",
        "slower: broadcast 4096 B float32 sum: occl 73.0 µs, baseline 50.0–60.0 µs over 3 runs "
        "(limit 72.0 µs: the slowest plus 20% of noise)"]
    # Of several new runs the fastest decides: one run's burst of noise is no regression.
    again = [_report({"broadcast 8": 175.0, "broadcast 4096": 71.0}),
             _report({"broadcast 8": 180.0, "broadcast 4096": 90.0})]
    lines, _ = slower_rows(baseline, [slow, *again])
    assert lines == [
        "slower: broadcast 8 B float32 sum: occl 170.0 µs, baseline 100.0–130.0 µs over 3 runs "
        "(limit 169.0 µs: the slowest plus 30% of noise)"]


def test_the_guard_refuses_runs_of_another_kind():
    from torch_occl.bench.guard import make_baseline, slower_rows

    runs = [_report({"all_reduce 8": 10.0}), _report({"all_reduce 8": 11.0})]
    with pytest.raises(SystemExit, match="baseline: three runs at least, to see the noise"):
        make_baseline(runs)
    baseline = make_baseline(runs + [_report({"all_reduce 8": 10.5})])
    with pytest.raises(SystemExit, match="check: the runs .*'transport': 'tcp'.* are not of the "
                                         "baseline's kind"):
        slower_rows(baseline, [_report({"all_reduce 8": 10.0}, transport="tcp")])
    # A baseline from before runs named their call made its runs with blocking calls.
    assert slower_rows(baseline, [_report({"all_reduce 8": 10.0}, call="sync")]) == ([], 1)
    with pytest.raises(SystemExit, match="check: the runs .*'call': 'async'.* are not of the "
                                         "baseline's kind"):
        slower_rows(baseline, [_report({"all_reduce 8": 10.0}, call="async")])
    # Nor with new inputs every call: those runs time the caller's allocations too.
    assert slower_rows(baseline, [_report({"all_reduce 8": 10.0}, fresh_inputs=False)]) == ([], 1)
    with pytest.raises(SystemExit, match="check: the runs .*'fresh_inputs': True.* are not of "
                                         "the baseline's kind"):
        slower_rows(baseline, [_report({"all_reduce 8": 10.0}, fresh_inputs=True)])


def test_the_guard_command_exits_1_naming_the_slower_rows(tmp_path):
    runs = []
    for index, us in enumerate([10.0, 10.2, 10.1, 10.3, 30.0]):
        runs.append(tmp_path / f"run{index}.json")
        runs[-1].write_text(json.dumps(_report({"all_reduce 8": us})))
    env = dict(os.environ, PYTHONPATH=str(REPO))
    guard = [sys.executable, "-m", "torch_occl.bench.guard"]
    baseline = tmp_path / "baseline.json"
    made = subprocess.run([*guard, "baseline", str(baseline), *map(str, runs[:3])],
                          env=env, capture_output=True, text=True, timeout=60)
    assert made.returncode == 0, made.stderr
    same = subprocess.run([*guard, "check", str(baseline), str(runs[3])], env=env,
                          capture_output=True, text=True, timeout=60)
    assert (same.returncode, same.stdout) == (
        0, f"0 of 1 rows slower than {baseline} beyond its noise (each row's spread, at least 5%)\n")
    slower = subprocess.run([*guard, "check", str(baseline), str(runs[4])], env=env,
                            capture_output=True, text=True, timeout=60)
    assert slower.returncode == 1
    assert slower.stdout.splitlines()[0].startswith("slower: all_reduce 8 B float32 sum: occl 30.0")
    missing = subprocess.run([*guard, "check", str(baseline), str(tmp_path / "none.json")],
                             env=env, capture_output=True, text=True, timeout=60)
    assert missing.returncode == 1
    assert missing.stderr.startswith(f"{tmp_path / 'none.json'}: not a bench report or baseline (")


def test_steps_train_and_decode_on_occl_and_gloo_to_the_same_weights(tmp_path):
    result = subprocess.run(
        [sys.executable, "-m", "torch_occl.bench.steps", "--steps", "2", "--rounds", "1",
         "--fsdp2-width", "512"],
        env=_environment(tmp_path), capture_output=True, text=True, timeout=180)
    assert result.returncode == 0, result.stdout + result.stderr
    lines = [line.split() for line in result.stdout.splitlines()]
    assert [line[0] for line in lines] == ["ddp", "tp-decode", "tp-train", "pp", "fsdp2"], \
        result.stdout
    assert all(line[-1] == "equal" for line in lines), result.stdout
    assert [line[1] for line in lines[-1:]] == ["occl"] and "occl-buffers" in lines[-1], lines
    # Every functional collective was waited for (torch warns of those that were not).
    assert "unwaited collective calls" not in result.stderr


def test_the_cross_memory_rate_script_times_both_copies():
    """scripts/cross_memory_rate.py, the measured limit of single-copy broadcasts
    (docs/PERFORMANCE.md): both rates, and their ratio, from real copies."""
    out = subprocess.run([sys.executable, str(REPO / "scripts" / "cross_memory_rate.py"), "1"],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    match = re.fullmatch(r"1 MiB: memcpy ([\d.]+) GB/s, process_vm_readv ([\d.]+) GB/s "
                         r"\(([\d.]+) of memcpy\)\n", out.stdout)
    assert match, out.stdout
    memcpy, cross, ratio = (float(g) for g in match.groups())
    assert memcpy > 0 and cross > 0 and abs(ratio - cross / memcpy) < 0.01, out.stdout


def test_fresh_inputs_give_every_call_a_new_input_and_every_peer_is_still_checked(tmp_path):
    report_file = tmp_path / "bench.json"
    result = _bench(tmp_path, "--ops", "all_reduce,broadcast,all_to_all_single,send_recv",
                    "--sizes", "4K,300K", "--peers", "gloo", "--rounds", "2", "--iters", "3",
                    "--fresh-inputs", "--json", str(report_file))
    report = json.loads(report_file.read_text())
    assert report["fresh_inputs"] is True
    assert "a new input tensor every call" in result.stdout
    assert len(report["rows"]) == 8
    assert all(row["wrong"] == {"occl": 0, "gloo": 0} for row in report["rows"])


def test_a_fresh_input_is_a_new_filled_tensor_on_every_call(tmp_path):
    """In one process (a group of one): the tensor a call reads is not the last call's, and
    holds this rank's fill; the floor allocates what the op's input holds."""
    from torch_occl.bench.cases import Case, Floor

    dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
    try:
        seen = []
        case = Case("all_to_all_single", 1024, torch.float32, "sum", 0, 1, fresh=True)
        original = dist.all_to_all_single

        def spy(output, input, **kwargs):
            # Held, so that no later input can reuse its memory and look like the same tensor.
            seen.append((input.data_ptr(), input))
            return original(output, input, **kwargs)

        dist.all_to_all_single = spy
        try:
            for _ in range(3):
                case.run(dist.group.WORLD)
        finally:
            dist.all_to_all_single = original
        assert len({pointer for pointer, _ in seen}) == 3
        assert all(torch.all(values == 1.0) for _, values in seen)
        assert case.wrong() == 0
        assert Floor(4096, case.input_bytes()).fresh_bytes == 4096
        assert not Case("all_to_all_single", 1024, torch.float32, "sum", 0, 1).fresh
    finally:
        dist.destroy_process_group()


def test_fresh_inputs_with_shared_tensors_is_refused_naming_both():
    result = subprocess.run(
        [sys.executable, "-m", "torch_occl.bench", "--fresh-inputs", "--shared-tensors"],
        env=dict(os.environ, PYTHONPATH=str(REPO)), capture_output=True, text=True, timeout=120)
    assert result.returncode == 2
    assert "--fresh-inputs allocates with torch.empty on every peer: it cannot be combined " \
           "with --shared-tensors" in result.stderr
