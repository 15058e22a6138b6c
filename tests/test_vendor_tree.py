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


# A receive nobody sends to, on tin: the kit's completion engine polls tin's request until the
# op's deadline, then fails it, naming the op, and the group still works.
UNMATCHED_RECEIVE = """
import datetime, threading, time
import torch
import torch.distributed as dist
import torch._C._distributed_c10d as c10d
import tin_dist._C as extension

options = extension.ProcessGroupTin.Options()
options._timeout = datetime.timedelta(seconds=2)
options.group_name = "0"
store = dist.HashStore()
backends = [None, None]
def connect(rank):
    backends[rank] = extension.ProcessGroupTin(store, rank, 2, options)
threads = [threading.Thread(target=connect, args=(r,)) for r in range(2)]
for t in threads: t.start()
for t in threads: t.join()
start = time.monotonic()
try:
    backends[0].recv([torch.zeros(4)], 1, 7).wait()
    print("received")
except RuntimeError as e:
    print(f"{time.monotonic() - start:.1f} s:", str(e).splitlines()[0])
works = [b.barrier(c10d.BarrierOptions()) for b in backends]
for work in works: work.wait()
print("barrier")
"""


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

    seen = run([sys.executable, "-c", UNMATCHED_RECEIVE], tree, timeout=60).stdout.splitlines()
    seconds, _, error = seen[0].partition(" s: ")
    assert error == ("tin.recv #0 in group 0 (rank 0 of 2): timed out after 2000 ms, its request"
                     " did not complete in time"), seen
    assert 1.6 <= float(seconds) < 10, seen
    assert seen[1:] == ["barrier"], seen
