"""The generated conformance suite can fail, runs under a launcher, and holds for gloo.

Run against deliberately broken backends (tests/broken_backends/), it fails each of them, naming
the op, the case and what is wrong. Each such run is the generated suite in a pytest of its own, narrowed with -k to the broken op's
two-rank cases and stopped at the first failure (-x): that occl itself passes every one of those
cases is what the generated suite's own run shows.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from dist_harness import occl_only

pytestmark = occl_only("the broken backends wrap occl")

REPO = Path(__file__).resolve().parents[1]
SUITE = "generated/tests/test_occl_conformance.py"

# (broken backend, -k selection of its cases, what the failure must say). On bool, SUM is MAX
# (logical or), so SUM computed as MAX is caught on the other dtypes, which the ws2 cases may
# not all hold.
BROKEN = [
    ("broken_noop_allreduce", "allreduce-ws2", r"allreduce-ws2-\S+ on broken_noop_allreduce:\nrank 0: tensors\[0\]: \d+ of \d+ elements wrong"),
    ("broken_sum_as_max", "allreduce-ws and SUM", r"allreduce-ws\d-\S+-SUM-\S+ on broken_sum_as_max:\nrank 0: tensors\[0\]: \d+ of \d+ elements wrong"),
    ("broken_broadcast_root", "broadcast-ws2", r"broadcast-ws2-\S+-root\d-\S+ on broken_broadcast_root:\nrank \d: tensors\[0\]: \d+ of \d+ elements wrong"),
    ("broken_allgather_order", "allgather-ws2", r"allgather-ws2-\S+ on broken_allgather_order:\nrank 0: output_tensors\[0\]\[0\]: \d+ of \d+ elements wrong"),
    ("broken_reduce_scatter_block", "reduce_scatter-ws2", r"reduce_scatter-ws2-\S+ on broken_reduce_scatter_block:\nrank 1: output_tensors\[0\]: \d+ of \d+ elements wrong"),
    ("broken_send_tag", "send+recv-ws2", r"send\+recv-ws2-\S+ on broken_send_tag:\nrank \d: (raised )?point-to-point: wait\(\) raised"),
    ("broken_premul_factor", "allreduce-ws and PREMUL_SUM", r"allreduce-ws\d-\S+-PREMUL_SUM-\S+ on broken_premul_factor:\nrank 0: tensors\[0\]: \d+ of \d+ elements wrong"),
    ("broken_reduce_non_root", "reduce-ws2", r"reduce-ws2-\S+-root\d-\S+ on broken_reduce_non_root:\nrank \d: tensors\[0\] \(not the root's\): \d+ of \d+ elements wrong"),
    ("broken_scatter_order", "scatter-ws2", r"scatter-ws2-\S+ on broken_scatter_order:\nrank 0: output_tensors\[0\]: \d+ of \d+ elements wrong"),
    ("broken_allgather_future", "allgather-ws2", r"allgather-ws2-\S+ on broken_allgather_future:\nrank 0: the Work's future holds 1 tensors, expected 2"),
]
# (broken backend, -k selection of its bad-input tests, what the failure must say).
BROKEN_CHECKS = [
    ("broken_lenient_allreduce", "allreduce-0-single_entry", r"allreduce-0-single_entry-tensors on broken_lenient_allreduce:\nrank 0: accepted the call \(a Work\), expected it to raise\n    occl\.allreduce: tensors has 2 entries, expected exactly 1 \(one tensor per process\)"),
    ("broken_reworded_broadcast", "broadcast-4-root_rank", r"broadcast-4-root_rank_in_range-opts_rootRank on broken_reworded_broadcast:\nrank 0: raised\n    broadcast: bad arguments \(occl\.broadcast: opts\.rootRank is 2, expected a rank in \[0, 2\)\)\n  expected\n    occl\.broadcast: opts\.rootRank is 2, expected a rank in \[0, 2\)"),
]


TORCHRUN = ["-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2"]


def run_suite(backend: str, selection: str, launcher: tuple[str, ...] = ()) -> subprocess.CompletedProcess:
    """The generated suite on `backend`, only the tests -k `selection` selects, up to the first
    failure; its ranks started by the suite, or by `launcher` (python's arguments before -m
    pytest)."""
    env = dict(os.environ)
    env.update(
        CONFORMANCE_BACKEND=backend,
        CONFORMANCE_PACKAGES="torch_occl,broken_backends",
        PYTHONPATH=os.pathsep.join([str(REPO), str(REPO / "tests" / "broken_backends")]),
        OMP_NUM_THREADS="1",
    )
    return subprocess.run(
        [sys.executable, *launcher, "-m", "pytest", SUITE, "-x", "-q", "-p", "no:cacheprovider",
         "-k", selection],
        cwd=REPO, env=env, capture_output=True, text=True, timeout=300,
    )


def assert_fails(backend: str, selection: str, failure: str, test: str) -> None:
    result = run_suite(backend, selection)
    output = result.stdout + result.stderr
    assert result.returncode == 1, f"the suite did not fail {backend}:\n{output[-3000:]}"
    assert re.search(failure, output), f"{backend}'s failure does not say {failure!r}:\n{output[-3000:]}"
    assert re.search(rf"FAILED \S+::{test}\[", output), output[-3000:]


@pytest.mark.parametrize("backend, selection, failure", BROKEN, ids=[b[0] for b in BROKEN])
def test_the_suite_fails_a_broken_backend(backend, selection, failure):
    assert_fails(backend, f"test_case and ({selection})", failure, "test_case")


@pytest.mark.parametrize("backend, selection, failure", BROKEN_CHECKS, ids=[b[0] for b in BROKEN_CHECKS])
def test_the_bad_input_tests_fail_a_backend_that_checks_otherwise(backend, selection, failure):
    test = "test_bad_input_raises_its_message_and_the_group_still_works"
    assert_fails(backend, f"{test} and {selection}", failure, test)


def test_under_a_launcher_the_bad_input_tests_fail_a_backend_that_checks_otherwise():
    """Launched ranks run the bad-input tests too (a bad call breaks no group), and fail alike.
    Both ranks print to one stream, so their lines may interleave: each piece is looked for."""
    backend, selection, _ = BROKEN_CHECKS[0]
    test = "test_bad_input_raises_its_message_and_the_group_still_works"
    result = run_suite(backend, f"{test} and {selection}", launcher=tuple(TORCHRUN))
    output = result.stdout + result.stderr
    assert result.returncode != 0, output[-3000:]
    for piece in ("allreduce-0-single_entry-tensors on broken_lenient_allreduce:",
                  "rank 0: accepted the call (a Work), expected it to raise",
                  "occl.allreduce: tensors has 2 entries, expected exactly 1 (one tensor per process)",
                  f"FAILED {SUITE}::{test}[allreduce-0-single_entry-tensors]"):
        assert piece in output, f"{piece!r} not in:\n{output[-3000:]}"


def test_the_suite_runs_under_torchrun():
    """Under a launcher, each launched process is one rank and runs the cases of its world size."""
    env = dict(os.environ, PYTHONPATH=str(REPO), OMP_NUM_THREADS="1")
    result = subprocess.run(
        [sys.executable, *TORCHRUN, "-m", "pytest", SUITE, "-q", "-rs", "-p", "no:cacheprovider",
         "-k", "test_case and (allreduce-ws or send+recv-ws)"],
        cwd=REPO, env=env, capture_output=True, text=True, timeout=300,
    )
    output = result.stdout + result.stderr
    assert result.returncode == 0, output[-3000:]
    # Both ranks ran the two-rank cases and skipped the others, saying why.
    assert len(re.findall(r"\d+ passed, \d+ skipped", output)) == 2, output[-3000:]
    assert "the launcher started 2 ranks" in output, output[-3000:]


def test_the_suite_passes_on_gloo_skipping_by_gloo_s_declared_reasons():
    """gloo is an implementation the suite's references did not come from: every case gloo's
    capability table (occl_codegen/conformance/capabilities/gloo.yaml) leaves in passes on it."""
    env = dict(os.environ, CONFORMANCE_BACKEND="gloo", PYTHONPATH=str(REPO))
    result = subprocess.run(
        [sys.executable, "-m", "pytest", SUITE, "-q", "-rs", "-p", "no:cacheprovider"],
        cwd=REPO, env=env, capture_output=True, text=True, timeout=900,
    )
    output = result.stdout + result.stderr
    assert result.returncode == 0, output[-5000:]
    passed, skipped = (int(n) for n in re.search(r"(\d+) passed, (\d+) skipped", output).groups())
    assert passed > skipped, output[-5000:]
    reasons = re.findall(r"^SKIPPED \[\d+\] \S+ (.*)$", output, re.MULTILINE)
    assert reasons and all("gloo" in reason for reason in reasons), "\n".join(reasons)
