"""A reusable pool of torch.distributed worker processes: the ranks of multi-process tests.

Starting a process and importing torch costs seconds on a small machine, so tests do not spawn
per test. A `DistPool(world_size, backend)` starts `world_size` processes once (the
multiprocessing "spawn" context), each of which joins one process group and then serves tasks:

    pool = DistPool(2, "gloo")
    results = pool.run(my_module_level_fn, arg1, arg2, timeout=60)   # one result per rank
    pool.close()

`my_module_level_fn(rank, world_size, *args)` runs on every rank at once; it must be importable by
module + name (defined at module level of an importable module) and so must its arguments and
results (they are pickled). If any rank raises, `run` raises AssertionError carrying every rank's
traceback and the pool is discarded (`pool.alive` becomes False), because the ranks may no longer
agree on which collectives were issued; once one rank failed, the others get group_timeout + 5 s
to report. If a rank does not answer in time, its stack is dumped to stderr (faulthandler), the
pool is killed and AssertionError is raised. Everything is bounded by timeouts; nothing here
waits forever. `DistPool(..., group_timeout=3, env={...})` gives a pool a shorter process-group
timeout or extra environment variables (e.g. backend tuning knobs); `packages=("torch_occl",)`
names modules each worker imports before it joins the group (the ones that register a backend).

Rendezvous is `file://` in a private temporary directory. This module deliberately does not
import torch at module level: the workers set their environment (OMP_NUM_THREADS=1, ...) before
the first torch import. The conformance suite uses it; so do the project's own tests.
"""

from __future__ import annotations

import faulthandler
import importlib
import importlib.util
import multiprocessing as mp
import multiprocessing.connection as mpc
import os
import shutil
import signal
import sys
import tempfile
import time
import traceback

# Default process-group timeout inside the workers, in seconds.
DEFAULT_GROUP_TIMEOUT = float(os.environ.get("OCCL_TEST_GROUP_TIMEOUT", "20"))
# How long a pool may take to start (spawn + import torch + init_process_group on every rank).
DEFAULT_START_TIMEOUT = float(os.environ.get("OCCL_TEST_START_TIMEOUT", "120"))

WORKER_ENV = {
    "OMP_NUM_THREADS": "1",
    "MKL_NUM_THREADS": "1",
    # Never let an unrelated `torch.backends` entry point break or slow down `import torch`.
    "TORCH_DEVICE_BACKEND_AUTOLOAD": "0",
}


def _format_exc() -> str:
    return "".join(traceback.format_exc())


def _fn_ref(fn):
    """(module name, module file, qualname): how a worker finds `fn`.

    Functions travel by reference. The file path makes this independent of pytest's import mode:
    a test module that is not importable by its name in the worker is loaded from its file.
    """
    modname = getattr(fn, "__module__", None)
    qualname = getattr(fn, "__qualname__", "")
    if modname is None or "<locals>" in qualname or "<lambda>" in qualname:
        raise TypeError(f"{fn!r}: DistPool.run needs a module-level function")
    module = sys.modules.get(modname)
    return modname, getattr(module, "__file__", None), qualname


def _resolve(modname, path, qualname):

    module = sys.modules.get(modname)
    if module is None:
        try:
            module = importlib.import_module(modname)
        except ImportError:
            if path is None:
                raise
            spec = importlib.util.spec_from_file_location(modname, path)
            module = importlib.util.module_from_spec(spec)
            sys.modules[modname] = module
            spec.loader.exec_module(module)
    obj = module
    for part in qualname.split("."):
        obj = getattr(obj, part)
    return obj


def _worker_main(rank, world_size, backend, packages, init_file, group_timeout, env, conn):
    """Entry point of one worker process."""
    os.environ.update(env)
    # `kill -USR1 <pid>` (sent by the pool before it kills a hung worker) dumps every thread's
    # stack to stderr, which pytest captures and shows with the failing test.
    faulthandler.register(signal.SIGUSR1, all_threads=True)
    try:
        from datetime import timedelta

        import torch
        import torch.distributed as dist

        torch.set_num_threads(1)
        for package in packages:  # e.g. the one that registers the backend
            importlib.import_module(package)
        dist.init_process_group(
            backend,
            init_method="file://" + init_file,
            rank=rank,
            world_size=world_size,
            timeout=timedelta(seconds=group_timeout),
        )
    except BaseException:
        try:
            conn.send(("init-error", _format_exc()))
        finally:
            os._exit(3)
    conn.send(("ready", os.getpid()))

    while True:
        try:
            msg = conn.recv()
        except (EOFError, OSError):  # the parent went away
            os._exit(0)
        if msg[0] == "close":
            try:
                dist.destroy_process_group()
                conn.send(("closed", None))
            except BaseException:
                conn.send(("error", _format_exc()))
            conn.close()
            os._exit(0)
        _, seq, fn_ref, args = msg
        try:
            fn = _resolve(*fn_ref)
            result = fn(rank, world_size, *args)
            reply = ("ok", seq, result)
        except BaseException:
            reply = ("error", seq, _format_exc())
        try:
            conn.send(reply)
        except BaseException:  # e.g. the result does not pickle
            conn.send(("error", seq, "result could not be sent back:\n" + _format_exc()))


class DistPool:
    """`world_size` worker processes sharing one torch.distributed process group."""

    def __init__(
        self,
        world_size: int,
        backend: str,
        packages: tuple[str, ...] = (),
        group_timeout: float = DEFAULT_GROUP_TIMEOUT,
        start_timeout: float = DEFAULT_START_TIMEOUT,
        env: dict | None = None,
        rank_env: dict[int, dict] | None = None,
    ):
        """`env` goes to every worker's environment, `rank_env[r]` to rank r's on top of it."""
        self.world_size = world_size
        self.backend = backend
        self.packages = tuple(packages)
        self.group_timeout = group_timeout
        self.alive = False
        self._seq = 0
        self._tmpdir = tempfile.mkdtemp(prefix=f"distpool_{backend}_{world_size}_")
        init_file = os.path.join(self._tmpdir, "rendezvous")
        worker_env = dict(WORKER_ENV)
        worker_env.update(env or {})
        ctx = mp.get_context("spawn")
        self._procs = []
        self._conns = []
        try:
            for rank in range(world_size):
                parent_conn, child_conn = ctx.Pipe(duplex=True)
                p = ctx.Process(
                    target=_worker_main,
                    args=(rank, world_size, backend, self.packages, init_file, group_timeout,
                          {**worker_env, **(rank_env or {}).get(rank, {})}, child_conn),
                    name=f"distpool-{backend}-{world_size}-rank{rank}",
                    daemon=True,
                )
                p.start()
                child_conn.close()
                self._procs.append(p)
                self._conns.append(parent_conn)
            replies = self._collect(start_timeout)
        except BaseException:
            self._kill()
            raise
        bad = {r: rep for r, rep in replies.items() if rep[0] != "ready"}
        missing = [r for r in range(world_size) if r not in replies]
        if bad or missing:
            self._kill(dump_stacks=missing)
            lines = [f"DistPool({world_size}, {backend!r}) failed to start"]
            if missing:
                lines.append(f"ranks {missing} did not answer within {start_timeout}s "
                             "(their stacks were dumped to stderr)")
            lines += [f"--- rank {r}: {rep[0]}\n{rep[1]}" for r, rep in sorted(bad.items())]
            raise RuntimeError("\n".join(lines))
        self.pids = [replies[r][1] for r in range(world_size)]
        self.alive = True

    # -- internals -------------------------------------------------------------------------

    def _collect(self, timeout, seq=None, grace_after_error=None):
        """Read one reply per rank until all answered or `timeout` seconds passed.

        Returns {rank: reply}. Replies tagged with another sequence number (stale answers of an
        earlier task) are dropped. A rank whose pipe closed yields ("died", exitcode). Once a
        rank reported an error, the others get at most `grace_after_error` more seconds (they
        are probably stuck in a collective the failed rank never joined).
        """
        deadline = time.monotonic() + timeout
        replies = {}
        pending = {self._conns[r]: r for r in range(len(self._conns))}
        while pending:
            left = deadline - time.monotonic()
            if left <= 0:
                break
            for conn in mpc.wait(list(pending), timeout=min(left, 1.0)):
                rank = pending[conn]
                try:
                    reply = conn.recv()
                except (EOFError, OSError):
                    self._procs[rank].join(timeout=1)
                    replies[rank] = ("died", f"worker exited (exit code "
                                             f"{self._procs[rank].exitcode})")
                    del pending[conn]
                    continue
                if seq is not None and len(reply) == 3 and reply[1] != seq:
                    continue  # stale
                replies[rank] = reply
                del pending[conn]
                if reply[0] != "ok" and grace_after_error is not None:
                    deadline = min(deadline, time.monotonic() + grace_after_error)
            # A worker that died without closing its pipe cleanly.
            for conn, rank in list(pending.items()):
                if not self._procs[rank].is_alive() and not conn.poll():
                    replies[rank] = ("died", f"worker exited (exit code "
                                             f"{self._procs[rank].exitcode})")
                    del pending[conn]
        return replies

    def _kill(self, dump_stacks=()):
        """Kill every worker; first dump the stacks of the ranks in `dump_stacks` to stderr."""
        self.alive = False
        if dump_stacks:
            for r in dump_stacks:
                p = self._procs[r]
                if p.is_alive():
                    try:
                        os.kill(p.pid, signal.SIGUSR1)
                    except OSError:
                        pass
            time.sleep(1.0)
        for p in self._procs:
            if p.is_alive():
                p.kill()
        for p in self._procs:
            p.join(timeout=5)
        for c in self._conns:
            c.close()
        shutil.rmtree(self._tmpdir, ignore_errors=True)

    # -- public API ------------------------------------------------------------------------

    def _send_task(self, fn, args):
        if not self.alive:
            raise RuntimeError("DistPool is closed or was discarded after a failure")
        self._seq += 1
        try:
            for conn in self._conns:
                conn.send(("run", self._seq, _fn_ref(fn), args))
        except OSError as e:  # a worker is gone
            self._kill()
            name = getattr(fn, "__qualname__", repr(fn))
            raise AssertionError(f"{name}: could not reach a worker of {self!r}: {e}") from e
        return self._seq

    def run_tolerating_deaths(self, fn, *args, timeout: float = 60):
        """Like run(), for tasks in which ranks may die: {rank: reply} where reply is
        ("ok", seq, result), ("error", seq, traceback) or ("died", message). The pool is
        closed afterwards."""
        replies = self._collect(timeout, seq=self._send_task(fn, args))
        self._kill()
        return replies

    def run(self, fn, *args, timeout: float = 60):
        """Run `fn(rank, world_size, *args)` on every rank; return the per-rank results."""
        name = getattr(fn, "__qualname__", repr(fn))
        seq = self._send_task(fn, args)
        replies = self._collect(timeout, seq=seq,
                                grace_after_error=self.group_timeout + 5)
        missing = [r for r in range(self.world_size) if r not in replies]
        failed = {r: rep for r, rep in replies.items() if rep[0] != "ok"}
        if not missing and not failed:
            return [replies[r][2] for r in range(self.world_size)]

        # Something went wrong: the ranks may disagree about which collectives ran, so the
        # group cannot be trusted any more. Discard the pool (the fixtures start a new one).
        self._kill(dump_stacks=missing)
        lines = [f"{name} failed on a {self.world_size}-rank {self.backend} pool:"]
        if missing:
            lines.append(f"ranks {missing} did not answer in time (timeout {timeout}s, or "
                         f"{self.group_timeout + 5:g}s after another rank failed); their stacks "
                         "were dumped to stderr and the pool was killed")
        for r in range(self.world_size):
            rep = replies.get(r)
            if rep is None:
                lines.append(f"--- rank {r}: no answer")
            elif rep[0] == "ok":
                lines.append(f"--- rank {r}: ok")
            else:
                lines.append(f"--- rank {r}: {rep[0]}\n{rep[-1]}")
        raise AssertionError("\n".join(lines))

    def close(self, timeout: float = 15):
        """Destroy the process groups and stop the workers (killing them after `timeout`)."""
        if not self.alive:
            return
        self.alive = False
        try:
            for conn in self._conns:
                conn.send(("close",))
            self._collect(timeout)
            deadline = time.monotonic() + 5
            for p in self._procs:
                p.join(timeout=max(0.1, deadline - time.monotonic()))
        except (OSError, EOFError):
            pass
        finally:
            self._kill()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __repr__(self):
        state = "alive" if self.alive else "closed"
        return f"DistPool(world_size={self.world_size}, backend={self.backend!r}, {state})"
