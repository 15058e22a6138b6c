"""init_process_group("occl") with each init method torch offers: env:// (torchrun), tcp://, file://.

Each test runs real processes (tests/scripts/allreduce_check.py) and checks an allreduce result.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
SCRIPT = str(REPO / "tests" / "scripts" / "allreduce_check.py")
TIMEOUT = 120


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")]))
    env["OMP_NUM_THREADS"] = "1"
    return env


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _run_ranks(init_method: str, world_size: int) -> list[str]:
    processes = [
        subprocess.Popen(
            [sys.executable, SCRIPT, init_method, str(rank), str(world_size)],
            env=_env(),
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        for rank in range(world_size)
    ]
    outputs = []
    try:
        for process in processes:
            out, _ = process.communicate(timeout=TIMEOUT)
            assert process.returncode == 0, out
            outputs.append(out)
    finally:
        for process in processes:
            process.kill()
    return outputs


def test_env_init_under_torchrun():
    result = subprocess.run(
        [
            sys.executable, "-m", "torch.distributed.run",
            "--nproc-per-node", "3", "--master-addr", "127.0.0.1",
            "--master-port", str(_free_port()), SCRIPT,
        ],
        env=_env(), capture_output=True, text=True, timeout=TIMEOUT,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    for rank in range(3):
        assert f"rank {rank} of 3: ok" in result.stdout


def test_tcp_init():
    outputs = _run_ranks(f"tcp://127.0.0.1:{_free_port()}", 2)
    assert [o.strip().splitlines()[-1] for o in outputs] == ["rank 0 of 2: ok", "rank 1 of 2: ok"]


def test_file_init(tmp_path):
    outputs = _run_ranks(f"file://{tmp_path / 'init'}", 2)
    assert [o.strip().splitlines()[-1] for o in outputs] == ["rank 0 of 2: ok", "rank 1 of 2: ok"]
