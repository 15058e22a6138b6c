"""Shrinking (spec capability supportsShrinking): torch's shrink_group after a rank is SIGKILLed
in a collective, through a TCPStore hosted on a survivor, on shared memory and on TCP, twice in
a row; SHRINK_ABORT; DDP that goes on after a rank dies; and the checks on shrink's arguments.
(The generated conformance suite shrinks through a FileStore.)

Each rank is a process of its own (tests/scripts/shrink_worker.py) and prints what it saw; every
result is checked against values computed here.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import signal
import socket
import subprocess
import sys

import pytest
import torch
import torch.distributed as dist

from dist_harness import occl_only
from rank_processes import REPO, rank_env

pytestmark = occl_only("occl's shrink")

WORKER = os.path.join(REPO, "tests", "scripts", "shrink_worker.py")
WORLD = 4


def _worker_module():
    spec = importlib.util.spec_from_file_location("shrink_worker", WORKER)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


worker = _worker_module()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run_ranks(scenario: str, transport: str = "auto", store_file: str | None = None) -> dict:
    """{rank: report} of the ranks that finished; a killed rank maps to its return code."""
    store = ({"OCCL_TEST_STORE_FILE": store_file} if store_file else
             {"MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(_free_port())})
    procs = [subprocess.Popen([sys.executable, WORKER, scenario], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True,
                              env=rank_env(transport, RANK=str(r), WORLD_SIZE=str(WORLD), **store))
             for r in range(WORLD)]
    results = {}
    try:
        for rank, proc in enumerate(procs):
            out, err = proc.communicate(timeout=90)
            lines = out.strip().splitlines()
            if proc.returncode == -signal.SIGKILL:
                results[rank] = "killed"
            else:
                assert proc.returncode == 0 and lines, f"rank {rank}: {out!r} {err[-3000:]}"
                results[rank] = json.loads(lines[-1])
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
    return results


@pytest.mark.parametrize("transport", ["auto", "tcp"])
def test_survivors_shrink_twice_after_ranks_die_in_collectives(transport):
    # TCPStore on rank 0, which survives; ranks 3 and then 2 die.
    results = run_ranks("twice", transport)
    assert results[3] == "killed" and results[2] == "killed", results
    for rank in (0, 1):
        report = results[rank]
        for round_, survivors in enumerate(([0, 1, 2], [0, 1])):
            seen = report[f"round{round_}"]
            assert seen["error"] != "returned", f"rank {rank}: a collective with a dead peer returned"
            dead = len(survivors)
            assert f"rank {dead} closed the connection" in seen["error"], seen["error"]
            assert (seen["rank"], seen["size"], seen["is_default"]) == (rank, len(survivors), True)
            expected = sum(worker.contribution(r) for r in survivors)
            assert seen["sum"] == expected.tolist(), f"rank {rank}, round {round_}"
            # The shrunk group has a shared-memory region of its own; the parent's is gone, and so
            # is that of the other group, which torch destroyed.
            assert seen["regions"] == (1 if transport == "auto" else 0), seen
            assert seen["other_destroyed"], seen
            # Nothing waits for the dead rank (the group's timeout is 30 s).
            assert float(seen["working_at"]) - float(seen["killed_at"]) < 10, seen
        assert report["regions_after"] == 0 and report["fds_opened"] <= 0, report


def test_shrink_abort_fails_the_groups_pending_ops_at_once(tmp_path):
    results = run_ranks("abort", store_file=str(tmp_path / "store"))
    for rank in range(WORLD - 1):
        report = results[rank]
        seconds, _, message = report["pending"].partition("s: ")
        assert float(seconds) < 5, report["pending"]  # the group's timeout is 30 s
        assert "the communicator was aborted" in message, message
        assert (report["size"], report["world"]) == (3, WORLD), report
        assert report["sum"] == sum(worker.contribution(r) for r in range(3)).tolist()
    assert results[3]["regions_after"] == 0


@pytest.mark.parametrize("transport", ["auto", "tcp"])
def test_a_rank_that_resumes_after_the_others_shrank_fails_and_leaves_their_memory_alone(
        transport, tmp_path):
    results = run_ranks("resumed", transport, store_file=str(tmp_path / "store"))
    for rank in range(WORLD - 1):
        report = results[rank]
        assert report["failure"] != "returned", f"rank {rank}: returned without rank 3"
        assert report["touched"] == 0, f"rank {rank}: the resumed rank wrote into its buffer"
        assert report["wrong_after_all_reduce"] == 0, report
    stopped = results[WORLD - 1]
    assert stopped["error"] != "returned", "the resumed rank's all_reduce returned"
    # Its op fails naming a survivor: one that gave up on the group (the given-up word over
    # shared memory, or a survivor's report), closed its links, or was waiting too when the
    # resumed rank's own deadline, long past, fired first.
    assert re.match(r"occl\.allreduce #\d+ in group .*rank [012] "
                    r"(gave up|closed the connection|was waiting too)", stopped["error"]), \
        stopped["error"]


def test_ddp_goes_on_after_a_rank_dies_and_matches_the_survivors_reference():
    results = run_ranks("ddp", "auto")
    assert results[3] == "killed", results
    reference = worker.model()
    optimizer = torch.optim.SGD(reference.parameters(), lr=0.1)
    for step in range(worker.STEPS):
        ranks = range(WORLD) if step < worker.KILL_STEP else range(WORLD - 1)
        # DDP averages the ranks' gradients: the gradient of the ranks' mean loss.
        loss = sum(torch.nn.functional.mse_loss(reference(x), y)
                   for x, y in (worker.batch(r, step) for r in ranks)) / len(ranks)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    for rank in range(WORLD - 1):
        assert "rank 3 closed the connection" in results[rank]["error"], results[rank]["error"]
        for got, want in zip(results[rank]["parameters"], reference.parameters()):
            torch.testing.assert_close(torch.tensor(got), want.detach())


def w_shrink_checks(rank, ws):
    backend = dist.group.WORLD._get_backend(torch.device("cpu"))
    seen = []
    for excluded, flags in (([], 0), ([ws], 0), ([1, 1], 0), ([rank], 0), ([1 - rank], 5)):
        try:
            backend.shrink(excluded, flags)
            seen.append("returned")
        except RuntimeError as e:
            seen.append(str(e).splitlines()[0])
    return seen


def test_shrink_checks_its_arguments(occl_pool):
    for rank, seen in enumerate(occl_pool.run(w_shrink_checks)):
        assert seen == [
            "occl.shrink: ranks_to_exclude must name at least one rank",
            "occl.shrink: ranks_to_exclude must be ranks of the group, in [0, 2), got 2",
            "occl.shrink: ranks_to_exclude must not repeat a rank, got 1 twice"
            if rank == 0 else
            "occl.shrink: ranks_to_exclude names this rank (1): only the ranks that remain call"
            " shrink",
            f"occl.shrink: ranks_to_exclude names this rank ({rank}): only the ranks that remain"
            " call shrink",
            "occl.shrink: shrink_flags must be SHRINK_DEFAULT (0) or SHRINK_ABORT (1), got 5",
        ], f"rank {rank}"
