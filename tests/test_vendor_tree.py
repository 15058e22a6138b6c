"""A vendor's own tree, outside the checkout, with README's commands: a copy of the fixture spec
(backend `tin`, five ops) generates with the installed generator, builds its own small runtime
(tests/vendor/: it moves data through the c10d Store) on the installed backend kit, and passes its
generated suite: its cases, a bad-input test for every check its ops use, and the mismatch tests
that the kit's agreement check passes."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

from dist_harness import occl_only

pytestmark = occl_only("it builds a backend of its own")

VENDOR = Path(__file__).resolve().parent / "vendor"
CHECKOUT = Path(__file__).resolve().parents[1]


def run(command: list[str], cwd: Path, timeout: float) -> subprocess.CompletedProcess:
    # Nothing from the checkout on the path: the generator must come from the installed package.
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    result = subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True,
                            timeout=timeout)
    assert result.returncode == 0, f"{' '.join(command)} failed:\n{result.stdout[-4000:]}\n{result.stderr[-4000:]}"
    return result


def test_a_vendor_tree_generates_builds_and_passes_its_generated_suite(tmp_path):
    tree = tmp_path / "tin"
    shutil.copytree(VENDOR, tree, ignore=shutil.ignore_patterns("__pycache__", "build", "*.so"))
    assert not tree.resolve().is_relative_to(CHECKOUT)

    run([sys.executable, "-m", "occl_codegen", "--spec", "spec/tin.yaml", "--out", "generated"],
        tree, timeout=120)
    header = (tree / "generated" / "csrc" / "ProcessGroupTin.hpp").read_text().splitlines()[0]
    assert header == (
        "// generated — do not edit. Source: spec/tin.yaml; regenerate with"
        " `python -m occl_codegen --spec spec/tin.yaml --out generated` in the folder holding"
        " spec/ and generated/."
    )
    assert (tree / "tin_dist" / "_registration.py").is_file()
    run([sys.executable, "setup.py", "--quiet", "build_ext", "--inplace"], tree, timeout=900)

    result = run([sys.executable, "-m", "pytest", "generated/tests", "-v", "-p", "no:cacheprovider"],
                 tree, timeout=600)
    outcomes = re.findall(r"::(\w+)(?:\[(\S+)\])? (PASSED|SKIPPED|FAILED|ERROR)", result.stdout)
    passed = {(test, param) for test, param, outcome in outcomes if outcome == "PASSED"}
    bad_inputs = {param for test, param in passed
                  if test == "test_bad_input_raises_its_message_and_the_group_still_works"}
    # Every check use of the five ops: allgather's four, gather's two, send's and recv's one.
    assert bad_inputs == {
        "allgather-0-single_entry-input_tensors", "allgather-1-dense-output_tensors",
        "allgather-2-one_per_rank-output_tensors", "allgather-3-same_dtype-output_tensors",
        "gather-0-single_entry-outputs", "gather-1-one_per_rank-outputs",
        "send-0-single_entry-tensors", "recv-0-single_entry-tensors",
    }, result.stdout[-4000:]
    cases = [param for test, param in passed if test == "test_case"]
    assert {case.split("-")[0] for case in cases} == {"allgather", "barrier", "gather", "send+recv"}, cases
    assert ("test_a_collective_whose_peer_never_joins_raises_at_its_timeout", "") in passed
    # What spec/tin.yaml declares it detects: the kit's agreement check (mismatched reduce ops
    # need an op that reduces, which tin lacks).
    mismatches = {param for test, param in passed if test == "test_mismatched_calls_raise"}
    assert mismatches == {"op", "dtype", "count", "root"}, result.stdout[-4000:]
