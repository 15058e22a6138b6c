"""The examples in examples/, run as README shows (`torchrun --nproc-per-node 2 ...`), on occl and
on gloo: the same training must end with the same parameters and losses."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from dist_harness import occl_only

REPO = Path(__file__).resolve().parent.parent
pytestmark = occl_only("compares occl's run of each example with gloo's")
# A reference run on gloo may be retried once: in CI a gloo rank aborted at exit now and then
# ("terminate called without an active exception"), after the training had ended; occl's may not.
GLOO_ATTEMPTS = 2


def torchrun_example(script: str, backend: str | None, out: Path, attempts: int = 1,
                     extra: tuple[str, ...] = ()) -> str:
    """examples/`script` under torchrun on 2 ranks of `backend` (None: the example's choice),
    with `extra` arguments; its stdout. The run may be tried `attempts` times."""
    env = dict(os.environ, OMP_NUM_THREADS="1")
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")]))
    command = [sys.executable, "-m", "torch.distributed.run", "--standalone",
               "--nproc-per-node", "2", str(REPO / "examples" / script),
               *(["--backend", backend] if backend else []), *extra, "--out", str(out)]
    for _ in range(attempts):
        result = subprocess.run(command, env=env, cwd=REPO, capture_output=True, text=True,
                                timeout=300)
        if result.returncode == 0:
            return result.stdout
    raise AssertionError(f"{' '.join(command)}\n{result.stdout}\n{result.stderr}")


def assert_trains_as(run: dict, reference: dict, what: str) -> None:
    """`run` (an example's --out JSON) trained, and ended with `reference`'s losses and
    parameters, within float32 rounding of the same ops."""
    assert run["losses"][-1] < 0.8 * run["losses"][0], f"{what} did not train"
    torch.testing.assert_close(torch.tensor(run["losses"]), torch.tensor(reference["losses"]),
                               rtol=1e-5, atol=1e-6)
    assert run["params"].keys() == reference["params"].keys()
    for name, values in reference["params"].items():
        torch.testing.assert_close(torch.tensor(run["params"][name]), torch.tensor(values),
                                   rtol=1e-5, atol=1e-6,
                                   msg=lambda m, name=name: f"{what}: parameter {name}: {m}")


@pytest.mark.parametrize("script", ["ddp_train.py", "fsdp2_train.py"])
def test_example_trains_as_on_gloo(script, tmp_path):
    runs = {}
    for backend in ("occl", "gloo"):
        stdout = torchrun_example(script, backend, tmp_path / f"{backend}.json",
                                  attempts=GLOO_ATTEMPTS if backend == "gloo" else 1)
        assert f"2 ranks, backend {backend}: final loss" in stdout, stdout
        runs[backend] = json.loads((tmp_path / f"{backend}.json").read_text())
    assert_trains_as(runs["occl"], runs["gloo"], script)
