"""Async work handles, the Work API, wait timeouts, a peer that never arrives, profiler events."""

from __future__ import annotations

import time
import warnings
from datetime import timedelta

import pytest
import torch
import torch.distributed as dist
from dist_harness import occl_only

N_IN_FLIGHT = 16
OPS = ["all_reduce", "broadcast", "all_gather", "all_gather_into_tensor", "reduce_scatter",
       "reduce_scatter_tensor", "barrier"]


def _values(rank, i, n):
    # small integers: float32 sums are exact in any order
    return (torch.arange(n, dtype=torch.float32) % 97) * (i % 7 + 1) + 1000 * rank + i


def _issue(rank, ws, i):
    """Start collective number i (op chosen by i) asynchronously.

    Returns (op, work, outputs to put in the future, check) where check() -> error or None.
    """
    op = OPS[i % len(OPS)]
    n = [1, 257, 100_003][i % 3]
    if op == "all_reduce":
        t = _values(rank, i, n)
        expected = sum(_values(r, i, n) for r in range(ws))
        work = dist.all_reduce(t, async_op=True)
        return op, work, [t], lambda: _eq(t, expected)
    if op == "broadcast":
        root = i % ws
        t = _values(rank, i, n)
        work = dist.broadcast(t, src=root, async_op=True)
        return op, work, [t], lambda: _eq(t, _values(root, i, n))
    if op == "all_gather":
        outs = [torch.zeros(n) for _ in range(ws)]
        work = dist.all_gather(outs, _values(rank, i, n), async_op=True)
        return op, work, outs, lambda: _first([_eq(outs[r], _values(r, i, n)) for r in range(ws)])
    if op == "all_gather_into_tensor":
        out = torch.zeros(ws * n)
        work = dist.all_gather_into_tensor(out, _values(rank, i, n), async_op=True)
        expected = torch.cat([_values(r, i, n) for r in range(ws)])
        return op, work, [out], lambda: _eq(out, expected)
    if op == "reduce_scatter":
        out = torch.zeros(n)
        inputs = [_values(rank, i * 31 + j, n) for j in range(ws)]
        expected = sum(_values(r, i * 31 + rank, n) for r in range(ws))
        work = dist.reduce_scatter(out, inputs, async_op=True)
        return op, work, [out], lambda: _eq(out, expected)
    if op == "reduce_scatter_tensor":
        out = torch.zeros(n)
        inp = torch.cat([_values(rank, i * 31 + j, n) for j in range(ws)])
        expected = sum(_values(r, i * 31 + rank, n) for r in range(ws))
        work = dist.reduce_scatter_tensor(out, inp, async_op=True)
        return op, work, [out], lambda: _eq(out, expected)
    work = dist.barrier(async_op=True)
    return op, work, [], lambda: None


def _eq(actual, expected):
    if torch.equal(actual, expected):
        return None
    bad = (actual != expected).nonzero()
    i = int(bad[0])
    return f"{len(bad)} elements differ, first at {i}: {actual[i].item()} vs {expected[i].item()}"


def _first(items):
    return next((x for x in items if x), None)


def w_in_flight(rank, ws, order, backend):
    warnings.simplefilter("ignore")
    issued = [_issue(rank, ws, i) for i in range(N_IN_FLIGHT)]
    indices = list(range(N_IN_FLIGHT))
    if order == "reverse":
        indices.reverse()
    problems = []
    for i in indices:
        op, work, outputs, check = issued[i]
        what = f"#{i} {op}"
        if work is None:
            problems.append(f"{what}: async_op=True returned no Work")
            continue
        ret = work.wait(timeout=timedelta(seconds=30))
        if ret is not True:
            problems.append(f"{what}: wait() returned {ret!r}, expected True")
    for i in range(N_IN_FLIGHT):
        op, work, outputs, check = issued[i]
        what = f"#{i} {op}"
        err = check()
        if err:
            problems.append(f"{what}: wrong result: {err}")
        # gloo's reduce_scatter works never report is_completed(); occl's must.
        if not work.is_completed() and not (backend != "occl" and "reduce_scatter" in op):
            problems.append(f"{what}: is_completed() is False after wait()")
        if not work.is_success():
            problems.append(f"{what}: is_success() is False after wait()")
        if work.exception() is not None:
            problems.append(f"{what}: exception() is {work.exception()!r}")
        # gloo's reduce_scatter works have no future; its _allgather_base future holds chunks.
        if backend != "occl" and op in ("reduce_scatter", "reduce_scatter_tensor",
                                        "all_gather_into_tensor"):
            continue
        try:
            fut = work.get_future()
            value = fut.value()
        except Exception as e:  # noqa: BLE001
            problems.append(f"{what}: get_future().value() raised {type(e).__name__}: {e}")
            continue
        if not fut.done():
            problems.append(f"{what}: future not done after wait()")
        if not isinstance(value, list) or len(value) != len(outputs):
            problems.append(f"{what}: future value {type(value).__name__} of length "
                            f"{len(value) if hasattr(value, '__len__') else '?'}, expected a list "
                            f"of the {len(outputs)} output tensor(s)")
            continue
        for j, (v, o) in enumerate(zip(value, outputs)):
            if not (isinstance(v, torch.Tensor) and v.data_ptr() == o.data_ptr()
                    and v.shape == o.shape and v.dtype == o.dtype):
                problems.append(f"{what}: future value[{j}] is not the output tensor itself")
    return problems


@pytest.mark.parametrize("order", ["issue", "reverse"])
@pytest.mark.parametrize("occl_pool", [2, 3], indirect=True, ids=lambda n: f"ws{n}")
def test_sixteen_in_flight(occl_pool, order, backend):
    results = occl_pool.run(w_in_flight, order, backend, timeout=120)
    problems = [f"rank {r}: {p}" for r, ps in enumerate(results) for p in ps]
    assert not problems, "\n".join(problems)


def w_future_then(rank, ws):
    """Futures compose: a .then() callback sees the reduced tensor."""
    t = torch.full((4,), float(rank + 1))
    fut = dist.all_reduce(t, async_op=True).get_future()
    chained = fut.then(lambda f: f.value()[0] * 2)
    return chained.wait().tolist()


def test_future_then(occl_pool):
    ws = occl_pool.world_size
    res = occl_pool.run(w_future_then)
    assert res == [[ws * (ws + 1) / 2 * 2] * 4] * ws


def w_wait_with_timeout_ok(rank, ws):
    """wait(timeout) on an op that completes in time returns True."""
    t = torch.ones(1000)
    work = dist.all_reduce(t, async_op=True)
    assert work.wait(timeout=timedelta(seconds=10)) is True
    assert torch.equal(t, torch.full((1000,), float(ws)))
    return True


def test_wait_with_timeout_completes(occl_pool):
    assert occl_pool.run(w_wait_with_timeout_ok) == [True] * occl_pool.world_size


# ---- ops the caller waits for at once (async_op=False), and small async ones ---------------
# torch.distributed passes async_op as the options' asyncOp; occl then runs the op on the waiting
# thread instead of waking the group's worker for it (occl_kit/executor.hpp). It does the same for
# an asynchronous op of at most OCCL_DEFERRED_ASYNC_MAX_BYTES (64 KiB), which wait() runs.


def _worker_switches(thread="occl-worker"):
    """Voluntary context switches of this process's threads named `thread`, summed."""
    import os

    total = 0
    for tid in os.listdir("/proc/self/task"):
        try:
            with open(f"/proc/self/task/{tid}/comm") as f:
                if f.read().strip() != thread:
                    continue
            with open(f"/proc/self/task/{tid}/status") as f:
                total += next(int(line.split()[1]) for line in f
                              if line.startswith("voluntary_ctxt_switches"))
        except (FileNotFoundError, ProcessLookupError):
            continue
    return total


class _WorkerWakes:
    """The worker's wakes from here on beyond the ones it takes on its own: an idle worker looks
    for unclaimed ops every Executor::kLookAgain (100 ms)."""

    def __init__(self):
        self.switches, self.started = _worker_switches(), time.monotonic()

    def beyond_looking(self) -> int:
        looks = int((time.monotonic() - self.started) / 0.1) + 1
        return _worker_switches() - self.switches - looks


def w_waited_ops_leave_the_worker_asleep(rank, ws, calls):
    wrong = 0
    wakes = _WorkerWakes()
    for i in range(calls):
        t = _values(rank, i, 64)
        dist.all_reduce(t)
        wrong += _eq(t, sum(_values(r, i, 64) for r in range(ws))) is not None
        t = _values(rank, i, 64)
        dist.broadcast(t, src=i % ws)
        wrong += _eq(t, _values(i % ws, i, 64)) is not None
    return wrong, wakes.beyond_looking()


@occl_only("occl's worker thread")
def test_waited_ops_leave_the_worker_asleep(occl_pool):
    calls = 200
    for rank, (wrong, switches) in enumerate(occl_pool.run(w_waited_ops_leave_the_worker_asleep,
                                                           calls)):
        assert wrong == 0, f"rank {rank}: {wrong} wrong results"
        # Woken for every op, the worker would switch about once per op (223 for these 400).
        assert switches < calls // 10, (
            f"rank {rank}: the worker woke {switches} times for {2 * calls} waited ops")


SMALL = 64  # float32 elements: 256 B, within OCCL_DEFERRED_ASYNC_MAX_BYTES


def w_async_ops_and_the_worker(rank, ws, call, n, calls):
    """`calls` all_reduces of `n` elements, each issued asynchronously and waited for at once, as
    `call` says; how many results were wrong, and how often the worker thread woke meanwhile.
    (Whether a large op starts on the worker at once is tested through OCCL_DEBUG=TRACE, in
    test_telemetry.py: a worker that finds no free core is not seen to switch.)"""
    group = dist.distributed_c10d._get_default_group()
    functional = torch.ops._c10d_functional
    # Built before, so that the loop is short.
    inputs = [_values(rank, i, n) for i in range(calls)]
    expected = [sum(_values(r, i, n) for r in range(ws)) for i in range(calls)]
    outputs = []
    wakes = _WorkerWakes()
    for t in inputs:
        if call == "functional":
            t = functional.wait_tensor(functional.all_reduce(t, "sum", group.group_name))
        elif call == "wait_for_the_next":  # the wait for the next op runs this one too
            dist.all_reduce(t, async_op=True)
            dist.all_reduce(torch.zeros(n), async_op=True).wait()
        else:
            dist.all_reduce(t, async_op=True).wait()
        outputs.append(t)
    return sum(_eq(t, e) is not None for t, e in zip(outputs, expected)), wakes.beyond_looking()


@occl_only("occl's worker thread")
@pytest.mark.parametrize("call", ["async_op", "functional", "wait_for_the_next"])
def test_small_async_ops_leave_the_worker_asleep(occl_pool, call):
    calls = 200
    for rank, (wrong, switches) in enumerate(occl_pool.run(w_async_ops_and_the_worker, call,
                                                           SMALL, calls)):
        assert wrong == 0, f"rank {rank}: {wrong} wrong results"
        # Woken for every op (OCCL_DEFERRED_ASYNC_MAX_BYTES=0), the worker woke 31-154 times
        # for these 200 beyond its looks.
        assert switches < calls // 10, (
            f"rank {rank}: the worker woke {switches} times for {calls} small {call} ops")


def w_waited_op_behind_async_ones(rank, ws):
    """A waited op queued behind async ones runs after them; every result is right."""
    issued = [_issue(rank, ws, i) for i in range(6)]
    t = _values(rank, 99, 1000)
    dist.all_reduce(t)
    problems = [f"waited all_reduce: {p}" for p in [_eq(t, sum(_values(r, 99, 1000)
                                                                for r in range(ws)))] if p]
    for op, work, _, check in issued:
        assert work.is_completed(), f"{op} issued before a waited op is not complete after it"
        work.wait()
        problems += [f"{op}: {p}" for p in [check()] if p]
    return problems


def test_waited_op_behind_async_ones(occl_pool):
    results = occl_pool.run(w_waited_op_behind_async_ones)
    problems = [f"rank {r}: {p}" for r, ps in enumerate(results) for p in ps]
    assert not problems, "\n".join(problems)


def w_op_marked_waited_completes_any_way(rank, ws, async_op, how):
    """A caller that says it waits at once (asyncOp False), or issues a small async op, but waits
    through the future, is_completed() or wait(timeout) still gets the op done (the worker is
    woken for it), and so does one that does not wait at all."""
    group = dist.distributed_c10d._get_default_group()
    t = torch.full((1000,), float(rank + 1))
    opts = dist.AllreduceOptions()
    opts.asyncOp = async_op
    work = group.allreduce([t], opts)
    if how == "future":
        work.get_future().wait()
    elif how == "is_completed":
        deadline = time.monotonic() + 20
        while not work.is_completed():
            assert time.monotonic() < deadline, "is_completed() stayed False for 20 s"
            time.sleep(0.001)
    elif how == "not_at_all":  # the idle worker finds it within a second (Executor::kLookAgain)
        time.sleep(3)
        result = _eq(t, torch.full((1000,), float(ws * (ws + 1) // 2)))
        work.wait()
        return result
    else:
        assert work.wait(timeout=timedelta(seconds=20)) is True
    return _eq(t, torch.full((1000,), float(ws * (ws + 1) // 2)))


@pytest.mark.parametrize("how", ["future", "is_completed", "wait_with_timeout", "not_at_all"])
@pytest.mark.parametrize("async_op", [False, True], ids=["marked_waited", "small_async"])
def test_op_marked_waited_completes_any_way(occl_pool, async_op, how):
    assert occl_pool.run(w_op_marked_waited_completes_any_way, async_op, how,
                         timeout=60) == [None] * occl_pool.world_size


# ---- wait(timeout) honoured; a peer that never arrives (private pools) -------------------


def w_late_peer_wait_timeout(rank, ws, delay, wait_timeout):
    """Rank 1 joins `delay` s late; rank 0's wait(timeout=wait_timeout) must give up in time."""
    if rank == 1:
        time.sleep(delay)
        t = torch.ones(8)
        work = dist.all_reduce(t, async_op=True)
        try:
            work.wait(timeout=timedelta(seconds=delay + 10))
        except Exception:  # noqa: BLE001  (rank 0 may have abandoned the op)
            pass
        return None
    t = torch.ones(8)
    work = dist.all_reduce(t, async_op=True)
    start = time.monotonic()
    try:
        work.wait(timeout=timedelta(seconds=wait_timeout))
    except RuntimeError as e:
        return ("raised", time.monotonic() - start, str(e))
    return ("returned", time.monotonic() - start, t.tolist())


def test_wait_timeout_is_honoured(fresh_pool):
    delay, wait_timeout = 6.0, 1.0
    pool = fresh_pool(2, group_timeout=30)
    res = pool.run(w_late_peer_wait_timeout, delay, wait_timeout, timeout=60)
    kind, elapsed, detail = res[0]
    assert kind == "raised", (f"wait(timeout={wait_timeout}s) returned after {elapsed:.2f}s "
                              f"although the peer joins only after {delay}s: {detail}")
    assert elapsed < wait_timeout + 2.0, f"wait(timeout={wait_timeout}s) took {elapsed:.2f}s"
    pool.close()


def w_missing_peer(rank, ws, group_timeout):
    if rank != 0:
        return None  # never joins the all_reduce; stays alive, idle
    t = torch.ones(16)
    start = time.monotonic()
    try:
        work = dist.all_reduce(t, async_op=True)
        work.wait()
    except RuntimeError as e:
        return ("raised", time.monotonic() - start, str(e))
    except Exception as e:  # noqa: BLE001
        return ("raised-other", time.monotonic() - start, f"{type(e).__name__}: {e}")
    return ("returned", time.monotonic() - start, t.tolist())


def test_missing_peer_times_out(fresh_pool, backend):
    group_timeout = 3.0
    pool = fresh_pool(2, group_timeout=group_timeout)
    res = pool.run(w_missing_peer, group_timeout, timeout=group_timeout + 30)
    kind, elapsed, detail = res[0]
    assert kind == "raised", f"rank 0: expected RuntimeError from wait(), got {kind}: {detail}"
    assert elapsed < group_timeout + 5, f"timed out only after {elapsed:.1f}s"
    assert elapsed > group_timeout * 0.8, f"gave up after {elapsed:.1f}s, before the timeout"
    low = detail.lower()
    assert "timed out" in low or "timeout" in low, detail
    if backend == "occl":
        assert "allreduce" in detail, f"the message does not name the op: {detail}"
    pool.close()  # discard the broken group


# ---- profiler ------------------------------------------------------------------------------

PROFILER_EVENT = {"occl": "occl:allreduce", "gloo": "gloo:all_reduce"}


def w_profiled_all_reduce(rank, ws, backend):
    from torch.profiler import ProfilerActivity, profile

    t = torch.ones(64)
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        dist.all_reduce(t)
        work = dist.all_reduce(t, async_op=True)
        work.wait()
    names = sorted({e.name for e in prof.events()})
    return [n for n in names if backend in n or "all_reduce" in n or "allreduce" in n]


def test_profiler_event(occl_pool, backend):
    if backend not in PROFILER_EVENT:
        pytest.skip(f"no known profiler event name for {backend}")
    expected = PROFILER_EVENT[backend]
    for rank, names in enumerate(occl_pool.run(w_profiled_all_reduce, backend)):
        assert any(expected in n for n in names), (
            f"rank {rank}: no profiler event containing {expected!r}; related events: {names}")
