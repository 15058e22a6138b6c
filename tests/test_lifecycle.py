"""Destroying a backend right after its ops never deadlocks.

Python frees a backend with the GIL held; the backend must not then wait for a thread that needs
the GIL to drop an op's tensors. A deadlock holds the GIL, which no in-process timeout can break,
so the loop runs in a subprocess bounded by a timeout.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent

SCRIPT = textwrap.dedent(
    """
    import datetime
    import torch
    import torch.distributed as dist
    import torch._C._distributed_c10d as c10d
    import torch_occl._C as extension

    for _ in range(1000):
        options = extension.ProcessGroupOCCL.Options()
        options._timeout = datetime.timedelta(seconds=10)
        backend = extension.ProcessGroupOCCL(dist.HashStore(), 0, 1, options)
        work = backend.allgather([[torch.zeros(6)]], [torch.arange(6.0)], c10d.AllgatherOptions())
        work.wait()
        del backend, work
    print("done")
    """
)


def test_backend_freed_right_after_an_op_does_not_deadlock():
    env = dict(os.environ, PYTHONPATH=str(REPO))
    result = subprocess.run([sys.executable, "-c", SCRIPT], env=env, capture_output=True,
                            text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "done"


EXIT_SCRIPT = textwrap.dedent(
    """
    import datetime, sys
    import torch
    import torch.distributed as dist
    import torch_occl

    init_method, rank, kind = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    dist.init_process_group("occl", init_method=init_method, rank=rank, world_size=2,
                            timeout=datetime.timedelta(seconds=60))
    torch.set_num_threads(1)
    t = torch.ones(16 << 20)
    for _ in range(3):
        if kind == "collective":
            dist.all_reduce(t)
        elif rank == 0:
            dist.send(t * 2, dst=1)
        else:
            dist.recv(t, src=0)
    print("done", t[0].item())
    # no destroy_process_group(): the interpreter exits right after the last op
    """
)


@pytest.mark.parametrize("kind", ["collective", "p2p"])
def test_interpreter_exits_cleanly_right_after_large_ops(tmp_path, kind):
    # A worker (or p2p) thread that still held the last op's tensors used to wait for the GIL
    # while the interpreter shut down, and was killed inside a destructor: "terminate called".
    env = dict(os.environ, PYTHONPATH=str(REPO), OMP_NUM_THREADS="1")
    init = f"file://{tmp_path / 'rendezvous'}"
    expected = {"collective": ["done 8.0"] * 2, "p2p": ["done 1.0", "done 2.0"]}[kind]
    for attempt in range(3):
        procs = [subprocess.Popen([sys.executable, "-c", EXIT_SCRIPT, init + str(attempt), str(r),
                                   kind],
                                  env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                  text=True) for r in range(2)]
        for rank, proc in enumerate(procs):
            out, err = proc.communicate(timeout=120)
            assert proc.returncode == 0, f"rank {rank} exited with {proc.returncode}: {err}"
            assert out.strip() == expected[rank], out


# The start of the in-process scripts below: two occl ranks of one group, rank0 and rank1, on
# threads of this process over a HashStore, with a group timeout of TIMEOUT_S seconds.
TWO_RANKS_IN_ONE_PROCESS = textwrap.dedent(
    """
    import datetime, os, threading
    import torch
    import torch.distributed as dist
    import torch._C._distributed_c10d as c10d
    import torch_occl._C as extension

    options = extension.ProcessGroupOCCL.Options()
    options._timeout = datetime.timedelta(seconds=float(os.environ["TIMEOUT_S"]))
    options.group_name = "0"  # as torch.distributed names the default group
    store = dist.HashStore()
    backends = [None, None]
    def connect(rank):
        backends[rank] = extension.ProcessGroupOCCL(store, rank, 2, options)
    threads = [threading.Thread(target=connect, args=(r,)) for r in range(2)]
    for t in threads: t.start()
    for t in threads: t.join()
    rank0, rank1 = backends
    """
)


def run_two_ranks(script: str, timeout_s: float) -> subprocess.CompletedProcess:
    """Runs TWO_RANKS_IN_ONE_PROCESS, then `script`, in a fresh interpreter."""
    env = dict(os.environ, PYTHONPATH=str(REPO), TIMEOUT_S=str(timeout_s))
    result = subprocess.run([sys.executable, "-c", TWO_RANKS_IN_ONE_PROCESS + script], env=env,
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    return result


SHUTDOWN_IN_COMPLETION_SCRIPT = textwrap.dedent(
    """
    # Two ranks in this process: rank 0's first allreduce cannot complete before rank 1 joins
    # it, so the callback below is attached in time and runs on rank 0's worker.
    queued = threading.Event()
    ran_on = []

    def shut_down(future):
        ran_on.append(threading.current_thread() is threading.main_thread())
        queued.wait(10)  # until the ops behind this one are queued
        rank0.shutdown()
        return future.value()

    first = rank0.allreduce([torch.ones(4)], c10d.AllreduceOptions())
    chained = first.get_future().then(shut_down)
    later = [rank0.allreduce([torch.ones(4)], c10d.AllreduceOptions()) for _ in range(3)]
    queued.set()
    rank1.allreduce([torch.ones(4)], c10d.AllreduceOptions()).wait()
    print(f"first {chained.wait()[0].tolist()}" + (" on the main thread" if ran_on[0] else ""))
    for work in later:
        try:
            work.wait(datetime.timedelta(seconds=10))
            print("ran")
        except RuntimeError as e:
            print("failed:", str(e).splitlines()[0])
    rank1.shutdown()
    """
)


def test_shutdown_from_a_completion_fails_the_queued_ops():
    # A completion that shuts the backend down runs on the thread that runs the ops: the ops
    # still queued behind it must fail, not stay pending forever.
    result = run_two_ranks(SHUTDOWN_IN_COMPLETION_SCRIPT, timeout_s=10)
    lines = result.stdout.strip().splitlines()
    assert lines[0] == "first [2.0, 2.0, 2.0, 2.0]", result.stdout
    assert lines[1:] == [
        f"failed: occl.allreduce #{n} in group 0 (rank 0 of 2): not run, the backend was shut "
        "down from inside an earlier op's completion" for n in (1, 2, 3)], result.stdout


ABORT_AFTER_SHUTDOWN_SCRIPT = textwrap.dedent(
    """
    import time
    pending = rank0.recv([torch.zeros(4)], 1, 7)  # rank 1 never sends
    rank0.shutdown()  # lets collectives finish; the receive stays in flight
    start = time.monotonic()
    rank0.abort()
    try:
        pending.wait()
        print("received")
    except RuntimeError as e:
        print(f"{time.monotonic() - start:.1f} s:", str(e).splitlines()[0])
    rank1.shutdown()
    """
)


def test_abort_after_shutdown_fails_a_pending_receive_at_once():
    # destroy_process_group() shuts a backend down; a receive still in flight must fail as soon
    # as the backend is aborted, not at its timeout (60 s here).
    result = run_two_ranks(ABORT_AFTER_SHUTDOWN_SCRIPT, timeout_s=60)
    seconds, _, error = result.stdout.strip().partition(" s: ")
    assert error.startswith("occl.recv #0 in group 0 (rank 0 of 2): "), result.stdout
    assert "aborted" in error, result.stdout
    assert float(seconds) < 5, result.stdout
