"""Runs the generated conformance suite: the backend under test, its ranks, one case at a time.

The generated test module declares what the spec says (its ops and `support:`) and calls
`Conformance.check` per case. Which backend runs, and how its ranks start, comes from the
environment:

    CONFORMANCE_BACKEND       the backend to test (default: the spec's)
    CONFORMANCE_PACKAGES      modules every rank imports first, comma-separated (default: the
                              spec's backend.python_package, for the spec's backend)
    CONFORMANCE_CAPABILITIES  a capability table (YAML: backend, support, unsupported_ops) saying
                              what that backend supports; cases outside it are skipped, by reason.
                              Default: capabilities/<backend>.yaml beside this file if there is
                              one, else the spec's declaration.
    CONFORMANCE_GROUP_TIMEOUT the process group's timeout in seconds (default 15)

By default the suite starts its ranks itself: one pool of processes per world size (1 to 4), on
a FileStore. Under a launcher that sets the ranks in the environment (torchrun: RANK and
WORLD_SIZE; Open MPI's mpirun: OMPI_COMM_WORLD_RANK and OMPI_COMM_WORLD_SIZE, with MASTER_ADDR
and MASTER_PORT given) every launched process runs pytest, joins one group of the launcher's
size, runs the cases of that size, and learns every rank's verdict through the store. The
bad-input tests run on that group (a bad call breaks nothing); the mismatch and timeout tests on
a group of every launched rank made for each of them, since a backend that fails them may leave
its group broken.
"""

from __future__ import annotations

import dataclasses
import datetime
import os
import time
import traceback
from pathlib import Path

import pytest

from .cases import MAX_WORLD_SIZE, SPEC_SOURCE, Case, Declaration
from .pool import DistPool
from .violations import BadInput, base_case, call_bad_input, devices_besides_cpu

GROUP_TIMEOUT = float(os.environ.get("CONFORMANCE_GROUP_TIMEOUT", "15"))
CAPABILITY_TABLES = Path(__file__).parent / "capabilities"
# Mismatched calls must raise well before the group's timeout, which is set this long for them.
MISMATCH_GROUP_TIMEOUT = 120
MISMATCH_LIMIT = 60


@dataclasses.dataclass(frozen=True)
class Target:
    """The backend under test and what it declares."""

    backend: str
    packages: tuple[str, ...]
    declaration: Declaration
    is_spec_backend: bool


def target(spec: Declaration, python_package: str | None) -> Target:
    name = os.environ.get("CONFORMANCE_BACKEND", spec.backend)
    packages = os.environ.get("CONFORMANCE_PACKAGES")
    table = os.environ.get("CONFORMANCE_CAPABILITIES")
    if name == spec.backend and table is None:
        default_packages = (python_package,) if python_package else ()
        return Target(name, _split(packages, default_packages), spec, True)
    if table is None and (CAPABILITY_TABLES / f"{name}.yaml").is_file():
        table = str(CAPABILITY_TABLES / f"{name}.yaml")
    declaration = dataclasses.replace(spec, backend=name) if table is None else _table(table)
    return Target(name, _split(packages, ()), declaration, False)


def _split(value: str | None, default: tuple[str, ...]) -> tuple[str, ...]:
    return default if value is None else tuple(p for p in value.split(",") if p)


def _table(path: str) -> Declaration:
    from occl_codegen.loader import load_capabilities

    backend, support, unsupported = load_capabilities(path)
    return Declaration(
        backend=backend,
        dtypes=support.dtypes,
        reduce_dtypes=support.reduce_dtypes,
        reduce_ops=tuple((r.name, r.dtypes, r.rule) for r in support.reduce_ops),
        detects_mismatched=support.detects_mismatched,
        unsupported_ops=tuple(unsupported.items()),
        future_holds_outputs=support.future_holds_outputs,
        keeps_inputs=support.keeps_inputs,
        keeps_non_root_tensors=support.keeps_non_root_tensors,
        refuses=support.refuses,
        source=os.path.relpath(path),
    )


# -- on every rank ---------------------------------------------------------------------------

def run_case(rank: int, world_size: int, case: Case, promises: tuple[str, ...]) -> tuple[str, list[str]]:
    """Runs `case` on this rank: ("ok", what is wrong), ("raised", the error) or ("missing",
    why: the backend object has no such method). `promises` names what the backend declares
    beyond the outputs: "future" (the Work's future holds them), "kept" (tensors the op only
    reads stay as they were), "non_root" (reduce leaves the non-root ranks' tensors alone)."""
    import torch
    import torch.distributed as dist

    from .data import differences
    from .reference import REFERENCES
    from .semantics import SEMANTICS

    try:
        backend = dist.distributed_c10d._get_default_group()._get_backend(torch.device("cpu"))
        reference = REFERENCES[case.semantics]
        if case.api == "backend" and not hasattr(backend, case.method):
            return "missing", [f"{type(backend).__name__} has no method {case.method}"]
        if SEMANTICS[case.semantics].exchange:
            return "ok", reference.run(case, rank, backend)
        prepared = reference.prepare(case, rank)
        work = None
        if case.api == "backend":
            work = getattr(backend, case.method)(*prepared.args)
            work.wait()
        else:
            handle = prepared.public(case.async_op)
            if case.async_op:
                handle.wait()
                work = handle if case.api == "public" else None
        problems = []
        for label, actual, expected in prepared.outputs:
            problems += differences(label, actual, expected, prepared.exact)
        for promise, tensors in (("kept", prepared.kept), ("non_root", prepared.non_root)):
            if promise in promises:
                for label, actual, expected in tensors:
                    problems += differences(label, actual, expected, exact=True)
        if "future" in promises and work is not None and prepared.future is not None:
            problems += _future_problems(work, prepared)
        if prepared.after is not None:
            problems += prepared.after()
        return "ok", problems
    except Exception as error:  # noqa: BLE001  (reported as the case's failure)
        frames = traceback.format_exception(error)
        return "raised", [f"{type(error).__name__}: {error}".strip() + "\n" + "".join(frames[-3:])]


def bad_input_then_good_call(rank: int, world_size: int, bad: BadInput, declaration: Declaration):
    """This rank's bad call (see violations.call_bad_input), then the good call it was made from."""
    bad_call = call_bad_input(rank, world_size, bad, declaration)
    return bad_call, run_case(rank, world_size, base_case(bad, declaration, world_size), ())


def _future_problems(work, prepared) -> list[str]:
    import torch

    from .data import differences

    # all_reduce_coalesced and all_gather_coalesced hand back the future itself.
    future = work if isinstance(work, torch._C.Future) else work.get_future()
    values = future.value()
    if len(values) != len(prepared.future):
        return [f"the Work's future holds {len(values)} tensors, expected {len(prepared.future)}"
                " (the op's outputs)"]
    problems = []
    for index, (value, expected) in enumerate(zip(values, prepared.future)):
        if expected.is_complex() and not value.is_complex() and value.shape[-1:] == (2,):
            value = torch.view_as_complex(value.contiguous())  # torch.distributed's real view
        problems += differences(f"the Work's future[{index}]", value, expected, prepared.exact)
    return problems


# How ranks 0 and 1 call differently, for each kind of mismatch, in order of choice: the c10d
# methods the way needs, and its name in call_mismatched. The suite takes the first way whose
# methods the spec declares.
MISMATCH_WAYS = {
    "op": ((("allreduce", "broadcast"), "all_reduce|broadcast"),
           (("allgather", "barrier"), "all_gather|barrier")),
    "dtype": ((("allreduce",), "all_reduce dtype"), (("allgather",), "all_gather dtype")),
    "count": ((("allreduce",), "all_reduce count"), (("allgather",), "all_gather count")),
    "root": ((("broadcast",), "broadcast root"), (("gather",), "gather root")),
    "reduce_op": ((("allreduce",), "all_reduce op"), (("reduce",), "reduce op")),
}


def mismatch_way(kind: str, declared: set[str]) -> str | None:
    """The first of MISMATCH_WAYS[kind] whose methods are all in `declared`."""
    return next((way for needs, way in MISMATCH_WAYS[kind] if declared.issuperset(needs)), None)


def call_mismatched(rank: int, world_size: int, way: str, dtype: str,
                    group=None) -> tuple[str, float]:
    """Rank 1 calls unlike every other rank, as MISMATCH_WAYS' `way` says (on `group`, else the
    default group); what this rank saw, and after how long."""
    import torch
    import torch.distributed as dist

    torch_dtype = getattr(torch, dtype)
    tensor = torch.ones(12, dtype=torch_dtype)

    def all_gather(t):
        return lambda: dist.all_gather([torch.empty_like(t) for _ in range(world_size)], t,
                                       group=group)

    def gather(t, dst):
        return lambda: dist.gather(t, [torch.empty_like(t) for _ in range(world_size)],
                                   group_dst=dst, group=group)

    def all_reduce(t, op=dist.ReduceOp.SUM):
        return lambda: dist.all_reduce(t, op=op, group=group)

    def broadcast(root):
        return lambda: dist.broadcast(tensor, group_src=root, group=group)

    calls = {
        "all_reduce|broadcast": (all_reduce(tensor), broadcast(0)),
        "all_gather|barrier": (all_gather(tensor), lambda: dist.barrier(group=group)),
        "all_reduce dtype": (all_reduce(tensor), all_reduce(torch.ones(12, dtype=torch.int32))),
        "all_gather dtype": (all_gather(tensor), all_gather(torch.ones(12, dtype=torch.int32))),
        "all_reduce count": (all_reduce(tensor), all_reduce(tensor[:8])),
        "all_gather count": (all_gather(tensor), all_gather(tensor[:8])),
        "broadcast root": (broadcast(0), broadcast(1)),
        "gather root": (gather(tensor, 0), gather(tensor, 1)),
        "all_reduce op": (all_reduce(tensor), all_reduce(tensor, dist.ReduceOp.MAX)),
        "reduce op": (lambda: dist.reduce(tensor, group_dst=0, group=group),
                      lambda: dist.reduce(tensor, group_dst=0, op=dist.ReduceOp.MAX,
                                          group=group)),
    }
    start = time.monotonic()
    try:
        calls[way][1 if rank == 1 else 0]()
    except Exception as error:  # noqa: BLE001
        return f"raised {type(error).__name__}: {error}", time.monotonic() - start
    return "returned", time.monotonic() - start


# The collectives the timeout test may call alone on rank 0, by c10d method, in order of choice.
LATE_CALLS = ("allreduce", "barrier", "_allgather_base", "allgather", "broadcast")


def join_late(rank: int, world_size: int, op: str, group=None) -> tuple[str, float]:
    """Rank 0 calls `op` (one of LATE_CALLS) on `group` (else the default group); no other rank
    does. What rank 0 saw, and after how long."""
    import torch
    import torch.distributed as dist

    if rank != 0:
        return "did not call", 0.0
    calls = {
        "allreduce": lambda: dist.all_reduce(torch.ones(4), async_op=True, group=group),
        "barrier": lambda: dist.barrier(async_op=True, group=group),
        "_allgather_base": lambda: dist.all_gather_into_tensor(
            torch.ones(4 * world_size), torch.ones(4), async_op=True, group=group),
        "allgather": lambda: dist.all_gather(
            [torch.ones(4) for _ in range(world_size)], torch.ones(4), async_op=True,
            group=group),
        "broadcast": lambda: dist.broadcast(torch.ones(4), group_src=0, async_op=True,
                                            group=group),
    }
    start = time.monotonic()
    try:
        calls[op]().wait()
    except Exception as error:  # noqa: BLE001
        return f"raised {type(error).__name__}: {error}", time.monotonic() - start
    return "returned", time.monotonic() - start


def split_and_reduce(rank: int, world_size: int, dtype: str) -> list[str]:
    """Splits the group (ProcessGroup.split_group, which needs no accelerator) into the ranks of
    even and of odd index, so that no subgroup is the group's first ranks, and all-reduces in
    each; then splits off the even ones alone, which the odd ones must see as None. What went
    wrong, in words."""
    import torch
    import torch.distributed as dist

    timeout = datetime.timedelta(seconds=GROUP_TIMEOUT)
    halves = [list(range(0, world_size, 2)), list(range(1, world_size, 2))]
    mine = halves[rank % 2]
    problems = []
    sub = dist.group.WORLD.split_group(mine, timeout=timeout,
                                       group_name=f"conformance-split-{rank % 2}")
    if sub is None:
        return [f"split_group({mine}) returned None on member {rank}"]
    if (sub.rank(), sub.size()) != (mine.index(rank), len(mine)):
        problems.append(f"subgroup {mine}: rank {sub.rank()} of {sub.size()}, expected rank"
                        f" {mine.index(rank)} of {len(mine)}")
    tensor = torch.full((4,), rank + 1, dtype=getattr(torch, dtype))
    sub.allreduce([tensor]).wait()
    expected = sum(r + 1 for r in mine)
    if tensor.tolist() != [expected] * 4:
        problems.append(f"allreduce in subgroup {mine} gave {tensor.tolist()}, expected"
                        f" {[expected] * 4}")
    sub.shutdown()
    evens = dist.group.WORLD.split_group(halves[0], timeout=timeout,
                                         group_name="conformance-split-evens")
    if (evens is None) != (rank % 2 == 1):
        problems.append(f"split_group({halves[0]}) returned {evens} on rank {rank}")
    if evens is not None:
        evens.shutdown()
    return problems


def collect_into_allocated(rank: int, world_size: int, dtype: str) -> list[str]:
    """What FSDP2 does with the backend's buffers: an all_gather_into_tensor whose input is this
    rank's block of its allocated output, and a reduce_scatter_tensor from one allocated buffer
    into another, 512 KiB per rank (large enough for a backend's copies between ranks). What went
    wrong, in words."""
    import torch
    import torch.distributed as dist

    cpu = torch.device("cpu")
    backend = dist.group.WORLD._get_backend(cpu)
    if not backend.supports_tensor_alloc(cpu):
        return [f"supports_tensor_alloc({cpu}) is False"]
    torch_dtype = getattr(torch, dtype)
    count = (512 << 10) // torch.empty((), dtype=torch_dtype).element_size()
    block = torch.arange(count, dtype=torch_dtype)

    def allocate(numel):
        return backend.allocate_tensor(numel, dtype=torch_dtype, device=cpu)

    problems = []
    gathered = allocate(world_size * count)
    gathered.narrow(0, rank * count, count).copy_(block + rank)
    dist.all_gather_into_tensor(gathered, gathered.narrow(0, rank * count, count))
    all_blocks = torch.cat([block + r for r in range(world_size)])
    if not torch.equal(gathered, all_blocks):
        problems.append("all_gather_into_tensor into an allocated buffer gave a wrong result")
    # Buffers of the same size while `gathered` is held: none may share its memory.
    scattered, whole = allocate(count), allocate(world_size * count)
    whole.copy_(torch.arange(world_size * count, dtype=torch_dtype) + rank)
    dist.reduce_scatter_tensor(scattered, whole)
    expected = world_size * (block + rank * count) + sum(range(world_size))
    if not torch.equal(scattered, expected):
        problems.append("reduce_scatter_tensor between allocated buffers gave a wrong result")
    if not torch.equal(gathered, all_blocks):
        problems.append("a buffer still held changed when another was allocated and written")
    return problems


def die_or_shrink(rank: int, world_size: int, dtype: str) -> list[str]:
    """The last rank is SIGKILLed with an all_reduce in flight; the others see that all_reduce
    fail, shrink the group without it (dist.shrink_group) and all-reduce on what it returns.
    What went wrong, in words."""
    import signal

    import torch
    import torch.distributed as dist

    last = world_size - 1
    # Several ms even at one core's memcpy rate, well over the 1 ms it lives on: with 20 ms, a
    # fast backend finished the all_reduce before the kill (occl did, in one CI run of three).
    large = torch.ones(1 << 24, dtype=getattr(torch, dtype))
    if rank == last:
        dist.all_reduce(large, async_op=True)
        time.sleep(0.001)
        os.kill(os.getpid(), signal.SIGKILL)
    problems = []
    try:
        dist.all_reduce(large)
        problems.append("an all_reduce whose peer was killed in it returned")
    except RuntimeError:
        pass
    shrunk = dist.shrink_group([last])
    if (shrunk.rank(), shrunk.size()) != (rank, last):
        problems.append(f"the shrunk group: rank {shrunk.rank()} of {shrunk.size()}, expected"
                        f" rank {rank} of {last}")
    tensor = torch.full((4,), rank + 1, dtype=getattr(torch, dtype))
    dist.all_reduce(tensor, group=shrunk)
    expected = sum(r + 1 for r in range(last))
    if tensor.tolist() != [expected] * 4:
        problems.append(f"all_reduce on the shrunk group gave {tensor.tolist()}, expected"
                        f" {[expected] * 4}")
    return problems


# -- in pytest -------------------------------------------------------------------------------

class _SpawnedRanks:
    """Pools of processes the suite starts itself, one per world size."""

    def __init__(self, target: Target):
        self.target = target
        self.pools: dict[int, DistPool] = {}

    def run(self, case: Case):
        results = self.call(case.world_size, run_case, case, self.target.declaration.promises())
        if any(verdict != "missing" and problems for verdict, problems in results):
            self.restart(case.world_size)
        return results

    def call(self, world_size: int, function, *args):
        """Runs `function(rank, world_size, *args)` on the pooled ranks of this world size."""
        pool = self.pools.get(world_size)
        if pool is None or not pool.alive:
            pool = self.pool(world_size, GROUP_TIMEOUT)
            self.pools[world_size] = pool
        return pool.run(function, *args, timeout=GROUP_TIMEOUT + 30)

    def restart(self, world_size: int) -> None:
        """After a failure the ranks may disagree on what ran, or messages may wait for receives
        of later cases: the next call starts afresh."""
        self.pools[world_size].close(timeout=5)

    def pool(self, world_size: int, group_timeout: float) -> DistPool:
        return DistPool(world_size, self.target.backend, self.target.packages,
                        group_timeout=group_timeout)

    def close(self):
        for pool in self.pools.values():
            pool.close()


class _LaunchedRanks:
    """This process is one rank of a group a launcher started; the store carries verdicts."""

    def __init__(self, target: Target, rank: int, world_size: int):
        import importlib

        import torch.distributed as dist

        for package in target.packages:
            importlib.import_module(package)
        os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
        os.environ.setdefault("MASTER_PORT", "29500")
        dist.init_process_group(
            target.backend, init_method="env://", rank=rank, world_size=world_size,
            timeout=datetime.timedelta(seconds=GROUP_TIMEOUT),
        )
        self.target, self.rank, self.world_size = target, rank, world_size
        self.store = dist.distributed_c10d._get_default_store()
        self.broken_by: Case | str | None = None
        self.calls = 0  # every rank calls alike, so the count names a call's store keys

    def run(self, case: Case):
        results = self.call(case.world_size, run_case, case, self.target.declaration.promises())
        if any(verdict == "raised" for verdict, _ in results):
            self.broken_by = case
        return results

    def call(self, world_size: int, function, *args, group_timeout: float | None = None,
             wait: float = GROUP_TIMEOUT + 30):
        """Runs `function(rank, world_size, *args)` on this rank and returns every rank's result
        (JSON through the store; a peer may first wait out a collective's timeout, so within
        `wait` seconds). With `group_timeout` the function runs on a new group of every rank with
        that timeout (passed as `group=`), destroyed once all ranks returned: a call that may
        break its group breaks that one only."""
        import json

        import torch.distributed as dist

        if self.broken_by is not None:
            # A launched group cannot start afresh: after a case raised, later ones would be
            # out of step. That case has failed already; stop.
            pytest.exit(f"{self.broken_by} raised on a rank and left the launched group out of"
                        " step; stopping", returncode=1)
        self.calls += 1
        group = None
        if group_timeout is not None:
            group = dist.new_group(timeout=datetime.timedelta(seconds=group_timeout))
        mine = function(self.rank, world_size, *args,
                        **({"group": group} if group is not None else {}))
        keys = [f"conformance/result/{self.calls}/{r}" for r in range(self.world_size)]
        self.store.set(keys[self.rank], json.dumps(mine))
        self.store.wait(keys, datetime.timedelta(seconds=wait))
        if group is not None:
            dist.destroy_process_group(group)
        return [json.loads(self.store.get(key)) for key in keys]

    def restart(self, world_size: int) -> None:
        """A failed bad-input test may have left the ranks out of step: later tests stop."""
        self.broken_by = "a bad-input test"

    def close(self):
        import torch.distributed as dist

        # Rank 0 may host the store: nobody leaves while another still reads verdicts.
        self.store.set(f"conformance/done/{self.rank}", "1")
        self.store.wait([f"conformance/done/{r}" for r in range(self.world_size)],
                        datetime.timedelta(seconds=GROUP_TIMEOUT + 30))
        dist.destroy_process_group()


def launched() -> tuple[int, int] | None:
    """(rank, world size) if a launcher started this process as a rank, else None."""
    for rank_key, size_key in (
        ("OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE"),
        ("PMI_RANK", "PMI_SIZE"),
        ("RANK", "WORLD_SIZE"),
    ):
        if rank_key in os.environ and size_key in os.environ:
            return int(os.environ[rank_key]), int(os.environ[size_key])
    return None


class Conformance:
    """What the generated tests call: one method per kind of test."""

    def __init__(self, target: Target):
        self.target = target
        position = launched()
        self.launched_size = position[1] if position else None
        self.ranks = _LaunchedRanks(target, *position) if position else _SpawnedRanks(target)

    def check(self, case: Case) -> None:
        refusal = self.target.declaration.refusal(case)
        if refusal:
            pytest.skip(refusal)
        if self.launched_size is not None and case.world_size != self.launched_size:
            pytest.skip(f"the launcher started {self.launched_size} ranks")
        try:
            results = self.ranks.run(case)
        except AssertionError as error:  # a rank hung or died: the pool says which
            pytest.fail(f"{case} on {self.target.backend}: {error}", pytrace=False)
        missing = [problem for verdict, problems in results if verdict == "missing"
                   for problem in problems]
        if missing and not self.target.is_spec_backend:
            pytest.skip(f"{self.target.backend}'s backend object: {missing[0]}")
        problems = [
            f"rank {rank}: {'raised ' if verdict == 'raised' else ''}{problem}"
            for rank, (verdict, rank_problems) in enumerate(results)
            for problem in rank_problems
        ]
        if problems:
            pytest.fail(f"{case} on {self.target.backend}:\n" + "\n".join(problems), pytrace=False)

    def check_mismatch(self, kind: str, ops) -> None:
        if kind not in self.target.declaration.detects_mismatched:
            pytest.skip(f"{self.target.backend} does not declare that it detects mismatched {kind}")
        way = mismatch_way(kind, {op.name for op in ops})
        if way is None:
            needs = " or ".join("+".join(needs) for needs, _ in MISMATCH_WAYS[kind])
            pytest.skip(f"the spec declares no op to call with mismatched {kind} ({needs})")
        dtype = self._reduce_dtype()
        try:
            seen = self._on_a_fresh_group(MISMATCH_GROUP_TIMEOUT, MISMATCH_LIMIT,
                                          call_mismatched, way, dtype)
        except AssertionError as error:
            pytest.fail(f"mismatched {kind} on {self.target.backend}: not detected within"
                        f" {MISMATCH_LIMIT} s: {error}", pytrace=False)
        silent = [rank for rank, (what, _) in enumerate(seen) if not what.startswith("raised")]
        late = [rank for rank, (_, elapsed) in enumerate(seen) if elapsed > MISMATCH_LIMIT]
        if silent or late:
            pytest.fail(f"mismatched {kind} on {self.target.backend}: ranks {silent} did not"
                        f" raise, ranks {late} raised after more than {MISMATCH_LIMIT} s ({seen})",
                        pytrace=False)

    def check_bad_input(self, bad: BadInput) -> None:
        """The bad call raises exactly the check's message on every rank the check applies to;
        then the op, called well, still works on the same group."""
        if self.target.declaration.source != SPEC_SOURCE:
            pytest.skip(f"{self.target.backend} declares its own support"
                        f" ({self.target.declaration.source}), so its own messages")
        declaration = self.target.declaration
        case = base_case(bad, declaration, self.launched_size)
        if case.world_size < 2:
            pytest.skip(f"the launcher started {case.world_size} rank; bad inputs need peers")
        if bad.change == "to_other_device" and not all(
                self.ranks.call(case.world_size, devices_besides_cpu, declaration)):
            pytest.skip(f"{self.target.backend}: no call can mix devices here, as the ranks know"
                        f" no device of its ({', '.join(declaration.devices)}) but cpu (a"
                        " PrivateUse1 device is known once its package is imported:"
                        " CONFORMANCE_PACKAGES)")
        results = self.ranks.call(case.world_size, bad_input_then_good_call, bad, declaration)
        problems = []
        for rank, ((verdict, seen, expected), (_, good)) in enumerate(results):
            if verdict == "accepted":
                problems.append(f"rank {rank}: accepted the call ({seen}), expected it to raise"
                                f"\n    {expected}")
            elif verdict == "raised" and seen != expected:
                problems.append(f"rank {rank}: raised\n    {seen}\n  expected\n    {expected}")
            problems += [f"rank {rank}: afterwards, {case}: {problem}" for problem in good]
        if all(verdict == "not called" for (verdict, _, _), _ in results):
            problems.append("no rank's call breaks the check: "
                            + "; ".join(seen for (_, seen, _), _ in results))
        if problems:
            self.ranks.restart(case.world_size)
            pytest.fail(f"{bad} on {self.target.backend}:\n" + "\n".join(problems), pytrace=False)

    def check_timeout(self, ops) -> None:
        """A collective (the first of LATE_CALLS the spec declares) whose peer never calls it
        raises from wait() at the group's timeout."""
        declared = {op.name for op in ops}
        op = next((name for name in LATE_CALLS if name in declared), None)
        if op is None:
            pytest.skip(f"the spec declares none of {', '.join(LATE_CALLS)}")
        timeout = 3.0
        (seen, elapsed), *_ = self._on_a_fresh_group(timeout, timeout + 60, join_late, op)
        assert seen.startswith("raised"), (
            f"{op} on {self.target.backend} whose peer never joined: {seen} after"
            f" {elapsed:.1f} s, expected it to raise from wait() at the group's timeout ({timeout} s)")
        assert elapsed >= timeout * 0.8, (
            f"{op} on {self.target.backend} raised after {elapsed:.1f} s, before the group's"
            f" timeout ({timeout} s): {seen}")

    def check_split(self) -> None:
        """The spec declares supportsSplitting: the group splits into subgroups that work, and a
        rank left out of every subgroup gets None."""
        if not self.target.is_spec_backend:
            pytest.skip(f"{self.target.backend} is not the spec's backend")
        world_size = self.launched_size or MAX_WORLD_SIZE
        if world_size < 3:
            pytest.skip(f"the launcher started {world_size} ranks; a split needs 3")
        dtype = self._reduce_dtype()
        results = self.ranks.call(world_size, split_and_reduce, dtype)
        problems = [f"rank {rank}: {problem}" for rank, rank_problems in enumerate(results)
                    for problem in rank_problems]
        if problems:
            self.ranks.restart(world_size)
            pytest.fail(f"split_group on {self.target.backend}:\n" + "\n".join(problems),
                        pytrace=False)

    def check_tensor_alloc(self) -> None:
        """The spec declares supportsTensorAlloc: collectives on the buffers allocate_tensor
        gives, as FSDP2 runs them, give the reference results on every rank."""
        if not self.target.is_spec_backend:
            pytest.skip(f"{self.target.backend} is not the spec's backend")
        dtype = self._reduce_dtype()
        world_size = self.launched_size or 3
        results = self.ranks.call(world_size, collect_into_allocated, dtype)
        problems = [f"rank {rank}: {problem}" for rank, rank_problems in enumerate(results)
                    for problem in rank_problems]
        if problems:
            pytest.fail(f"allocate_tensor on {self.target.backend}:\n" + "\n".join(problems),
                        pytrace=False)

    def check_shrink(self) -> None:
        """The spec declares supportsShrinking: after a rank dies in a collective, the others
        shrink the group without it and go on."""
        if not self.target.is_spec_backend:
            pytest.skip(f"{self.target.backend} is not the spec's backend")
        if self.launched_size is not None:
            pytest.skip("a launcher takes a killed rank for the job's failure")
        dtype = self._reduce_dtype()
        pool = self.ranks.pool(3, GROUP_TIMEOUT)
        replies = pool.run_tolerating_deaths(die_or_shrink, dtype, timeout=GROUP_TIMEOUT + 30)
        problems = []
        for rank in range(3):
            verdict, *rest = replies.get(rank, ("no answer",))
            if rank == 2 and verdict != "died":
                problems.append(f"rank 2 was to be killed, but: {verdict} {rest}")
            elif rank < 2 and verdict != "ok":
                problems.append(f"rank {rank}: {verdict} {rest}")
            elif rank < 2:
                problems += [f"rank {rank}: {problem}" for problem in rest[1]]
        if problems:
            pytest.fail(f"shrink_group on {self.target.backend}:\n" + "\n".join(problems),
                        pytrace=False)

    def _reduce_dtype(self) -> str:
        """The dtype the checks beyond the cases reduce: float32, or int64 where it is not."""
        return "float32" if "float32" in self.target.declaration.reduce_dtypes else "int64"

    def _on_a_fresh_group(self, group_timeout: float, limit: float, function, *args):
        """Every rank's result of `function(rank, world_size, *args)` on a group of two ranks
        (the suite's own) or of every launched rank, made for it with `group_timeout`, so that a
        call that breaks its group breaks that one only; an AssertionError after `limit`
        seconds."""
        if self.launched_size is not None:
            return self.ranks.call(self.launched_size, function, *args,
                                   group_timeout=group_timeout, wait=limit)
        pool = self.ranks.pool(2, group_timeout)
        try:
            return pool.run(function, *args, timeout=limit)
        finally:
            pool.close(timeout=5)

    def close(self):
        self.ranks.close()


@pytest.fixture(scope="module")
def conformance(request):
    """The backend under test and its ranks, for one generated test module (its TARGET)."""
    suite = Conformance(request.module.TARGET)
    yield suite
    suite.close()
