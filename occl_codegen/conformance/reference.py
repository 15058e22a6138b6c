"""What every rank's outputs must be, given every rank's inputs: one class per semantics.

For one case on one rank, a reference builds the backend method's arguments, the same call
through torch.distributed, and the values every output must hold afterwards, computed here from
the inputs of all ranks (each rank computes every rank's), never by the backend.
`semantics.py` declares, without torch, what each varies; `REFERENCES` has the same names.
"""

from __future__ import annotations

import dataclasses
import datetime
from typing import Callable

import torch
import torch._C._distributed_c10d as c10d
import torch.distributed as dist

from .data import COLUMNS, ROWS, differences, distinct, reducible, rows_for, shaped, unlike
from .reduction import is_exact, reduce, reduce_op

# How long a point-to-point wait may take before the case fails (a lost or misrouted message).
P2P_WAIT = datetime.timedelta(seconds=10)


@dataclasses.dataclass
class Prepared:
    """One rank's part of one case."""

    args: list  # the backend method's arguments, in c10d order
    public: Callable[[bool], object]  # issues the op through torch.distributed(async_op) -> Work
    # (label, the tensor the backend writes or keeps, the values it must hold afterwards)
    outputs: list[tuple[str, torch.Tensor, torch.Tensor]]
    # (label, an input the op only reads, the values it must still hold afterwards)
    kept: list[tuple[str, torch.Tensor, torch.Tensor]] = dataclasses.field(default_factory=list)
    # (label, a non-root rank's tensor that a rooted reduction must leave as it was, its values)
    non_root: list[tuple[str, torch.Tensor, torch.Tensor]] = dataclasses.field(default_factory=list)
    exact: bool = True  # floating results must match exactly (small integers), or nearly
    future: list[torch.Tensor] | None = None  # what the Work's future must hold (None: unchecked)
    # Runs after the op (e.g. a barrier's check that every rank entered); returns what is wrong.
    after: Callable[[], list[str]] | None = None


class Reference:
    """How one case of one semantics runs on one rank (semantics.py declares what it varies)."""

    def prepare(self, case, rank: int) -> Prepared:
        """The arguments, calls and expected outputs of a collective."""
        raise NotImplementedError

    def run(self, case, rank: int, backend) -> list[str]:
        """Runs an exchange whose calls depend on each other (point-to-point); what is wrong."""
        raise NotImplementedError

    def call_args(self, case, rank: int, method: str) -> list:
        """Good arguments of one call of the backend's `method` (the bad-input tests break them)."""
        return self.prepare(case, rank).args


def _options(name: str, case, **fields):
    options = getattr(c10d, name)()
    for key, value in fields.items():
        setattr(options, key, value)
    options.asyncOp = case.async_op
    return options


def _dtype_rows(case, rows=ROWS):
    return case.dtype, rows_for(case.layout, rows)


def _block(rank, case, salt=0, rows=ROWS):
    """Rank `rank`'s distinct (rows, COLUMNS) input in the case's layout."""
    dtype, rows = _dtype_rows(case, rows)
    return shaped(distinct(rank, rows * COLUMNS, dtype, salt), case.layout)


def _reducible_block(rank, case, salt=0):
    dtype, rows = _dtype_rows(case)
    return shaped(reducible(rank, case.world_size, rows * COLUMNS, dtype, salt), case.layout)


def _reduced_block(case, salt=0):
    return reduce(case.reduce_op, [_reducible_block(r, case, salt) for r in range(case.world_size)])


def _prefilled(expected, layout):
    """The output an op must fill with `expected`: in the case's layout, and holding other values
    everywhere before the op."""
    return shaped(unlike(expected.reshape(-1)), layout, expected.shape[-1] if expected.dim() else 1)


class Broadcast(Reference):

    def prepare(self, case, rank):
        expected = _block(case.root, case)
        tensor = expected.clone() if rank == case.root else _prefilled(expected, case.layout)
        return Prepared(
            args=[[tensor], _options("BroadcastOptions", case, rootRank=case.root)],
            public=lambda async_op: dist.broadcast(tensor, src=case.root, async_op=async_op),
            outputs=[("tensors[0]", tensor, expected)],
            future=[expected],
        )


class Allreduce(Reference):

    def prepare(self, case, rank):
        tensor = _reducible_block(rank, case)
        expected = _reduced_block(case)
        return Prepared(
            args=[[tensor], _options("AllreduceOptions", case, reduceOp=reduce_op(case.reduce_op))],
            public=lambda async_op: dist.all_reduce(
                tensor, op=reduce_op(case.reduce_op), async_op=async_op),
            outputs=[("tensors[0]", tensor, expected)],
            exact=is_exact(case.reduce_op),
            future=[expected],
        )


class AllreduceSparse(Reference):

    @staticmethod
    def _sparse(rank, case):
        # Rank r holds rows r and r + 1 of a (world_size + 1) x COLUMNS tensor: rows overlap.
        rows = torch.tensor([[rank, rank + 1]])
        values = distinct(rank, 2 * COLUMNS, case.dtype).reshape(2, COLUMNS)
        return torch.sparse_coo_tensor(rows, values, (case.world_size + 1, COLUMNS))

    def prepare(self, case, rank):
        tensor = self._sparse(rank, case)
        expected = reduce("SUM", [self._sparse(r, case).to_dense() for r in range(case.world_size)])
        return Prepared(
            args=[[tensor], _options("AllreduceOptions", case)],
            public=lambda async_op: dist.all_reduce(tensor, async_op=async_op),
            outputs=[("tensors[0]", tensor, expected)],
        )


class Allgather(Reference):

    def prepare(self, case, rank):
        expected = [_block(r, case) for r in range(case.world_size)]
        outputs = [_prefilled(e, case.layout) for e in expected]
        source = _block(rank, case)
        return Prepared(
            args=[[outputs], [source], _options("AllgatherOptions", case)],
            public=lambda async_op: dist.all_gather(outputs, source, async_op=async_op),
            outputs=[(f"output_tensors[0][{r}]", outputs[r], expected[r]) for r in range(len(outputs))],
            kept=[("input_tensors[0]", source, _block(rank, case))],
            future=expected,
        )


class AllgatherBase(Reference):

    def prepare(self, case, rank):
        expected = torch.cat([_block(r, case) for r in range(case.world_size)])
        output = _prefilled(expected, case.layout)
        source = _block(rank, case)
        return Prepared(
            args=[output, source, _options("AllgatherOptions", case)],
            public=lambda async_op: dist.all_gather_into_tensor(output, source, async_op=async_op),
            outputs=[("output_tensor", output, expected)],
            kept=[("input_tensor", source, _block(rank, case))],
            future=[expected],
        )


class ReduceScatter(Reference):

    def prepare(self, case, rank):
        inputs = [_reducible_block(rank, case, salt=j) for j in range(case.world_size)]
        expected = _reduced_block(case, salt=rank)
        output = _prefilled(expected, case.layout)
        op = reduce_op(case.reduce_op)
        return Prepared(
            args=[[output], [inputs], _options("ReduceScatterOptions", case, reduceOp=op)],
            public=lambda async_op: dist.reduce_scatter(output, inputs, op=op, async_op=async_op),
            outputs=[("output_tensors[0]", output, expected)],
            exact=is_exact(case.reduce_op),
            future=[expected],
        )


class ReduceScatterBase(Reference):

    def prepare(self, case, rank):
        source = _stacked(case, [_reducible_block(rank, case, salt=j) for j in range(case.world_size)])
        expected = _reduced_block(case, salt=rank)
        output = _prefilled(expected, case.layout)
        op = reduce_op(case.reduce_op)
        return Prepared(
            args=[output, source, _options("ReduceScatterOptions", case, reduceOp=op)],
            public=lambda async_op: dist.reduce_scatter_tensor(output, source, op=op, async_op=async_op),
            outputs=[("output_tensor", output, expected)],
            exact=is_exact(case.reduce_op),
            future=[expected],
        )


def _stacked(case, blocks):
    """The blocks one under the other, in the case's layout."""
    flat = torch.cat([b.reshape(-1) for b in blocks])
    return shaped(flat, case.layout)


class Barrier(Reference):

    def prepare(self, case, rank):
        # The last rank enters late, after saying so in the store; a barrier that returns on the
        # others before it entered leaves them without its word.
        store = dist.distributed_c10d._get_default_store()
        key = f"conformance/{case}/entered"
        last = case.world_size - 1

        def public(async_op):
            return dist.barrier(async_op=async_op)

        def after():
            if rank != last and not store.check([key]):
                return [f"barrier returned on rank {rank} before rank {last} entered it"]
            return []

        if rank == last:
            import time

            time.sleep(0.2)
            store.set(key, "1")
        return Prepared(
            args=[_options("BarrierOptions", case)], public=public, outputs=[], future=[],
            after=after,
        )


class AllreduceCoalesced(Reference):

    def prepare(self, case, rank):
        tensors = [_reducible_block(rank, case, salt=i) for i in range(3)]
        expected = [_reduced_block(case, salt=i) for i in range(3)]
        op = reduce_op(case.reduce_op)

        def public(async_op):
            if case.api == "coalescing_manager":
                return _coalesced(async_op, [lambda t=t: dist.all_reduce(t, op=op) for t in tensors])
            return dist.all_reduce_coalesced(tensors, op=op, async_op=async_op)

        return Prepared(
            args=[tensors, _options("AllreduceCoalescedOptions", case, reduceOp=op)],
            public=public,
            outputs=[(f"tensors[{i}]", tensors[i], expected[i]) for i in range(3)],
            exact=is_exact(case.reduce_op),
            future=expected,
        )


def _coalesced(async_op, calls):
    """Issues `calls` inside torch's _coalescing_manager; returns its handle (or None)."""
    from torch.distributed.distributed_c10d import _coalescing_manager

    with _coalescing_manager(async_ops=async_op) as manager:
        for call in calls:
            call()
    return manager if async_op else None


class Reduce(Reference):

    def prepare(self, case, rank):
        tensor = _reducible_block(rank, case)
        is_root = rank == case.root
        # Only the root's tensor changes; the others' are promised to stay as they were.
        result = [("tensors[0]", tensor, _reduced_block(case))] if is_root else []
        untouched = [] if is_root else [("tensors[0] (not the root's)", tensor, _reducible_block(rank, case))]
        op = reduce_op(case.reduce_op)
        return Prepared(
            args=[[tensor], _options("ReduceOptions", case, rootRank=case.root, reduceOp=op)],
            public=lambda async_op: dist.reduce(tensor, dst=case.root, op=op, async_op=async_op),
            outputs=result,
            non_root=untouched,
            exact=is_exact(case.reduce_op),
            future=[_reduced_block(case)] if is_root else None,
        )


class AllgatherCoalesced(Reference):

    def prepare(self, case, rank):
        sizes = (1, 2)  # rows of input i: inputs differ in size
        inputs = [_block(rank, case, salt=i, rows=n) for i, n in enumerate(sizes)]
        expected = [[_block(r, case, salt=i, rows=n) for i, n in enumerate(sizes)]
                    for r in range(case.world_size)]
        outputs = [[_prefilled(e, case.layout) for e in row] for row in expected]
        return Prepared(
            args=[outputs, inputs, _options("AllgatherOptions", case)],
            public=lambda async_op: dist.all_gather_coalesced(outputs, inputs, async_op=async_op),
            outputs=[(f"output_tensor_lists[{r}][{i}]", outputs[r][i], expected[r][i])
                     for r in range(case.world_size) for i in range(len(sizes))],
            kept=[(f"input_tensors[{i}]", inputs[i], _block(rank, case, salt=i, rows=n))
                  for i, n in enumerate(sizes)],
            future=[t for row in expected for t in row],
        )


class AllgatherIntoTensorCoalesced(Reference):

    def prepare(self, case, rank):
        inputs = [_block(rank, case, salt=i) for i in range(2)]
        expected = [torch.cat([_block(r, case, salt=i) for r in range(case.world_size)])
                    for i in range(2)]
        outputs = [_prefilled(e, case.layout) for e in expected]
        calls = [lambda o=o, i=i: dist.all_gather_into_tensor(o, i) for o, i in zip(outputs, inputs)]
        return Prepared(
            args=[outputs, inputs, _options("AllgatherOptions", case)],
            public=lambda async_op: _coalesced(async_op, calls),
            outputs=[(f"outputs[{i}]", outputs[i], expected[i]) for i in range(2)],
            future=expected,
        )


class Gather(Reference):

    def prepare(self, case, rank):
        source = _block(rank, case)
        is_root = rank == case.root
        expected = [_block(r, case) for r in range(case.world_size)] if is_root else []
        outputs = [_prefilled(e, case.layout) for e in expected]
        return Prepared(
            args=[[outputs] if is_root else [], [source], _options("GatherOptions", case, rootRank=case.root)],
            public=lambda async_op: dist.gather(
                source, outputs if is_root else None, dst=case.root, async_op=async_op),
            outputs=[(f"output_tensors[0][{r}]", outputs[r], expected[r]) for r in range(len(outputs))],
            kept=[("input_tensors[0]", source, _block(rank, case))],
            future=expected,
        )


class Scatter(Reference):

    def prepare(self, case, rank):
        is_root = rank == case.root
        inputs = [_block(case.root, case, salt=r) for r in range(case.world_size)] if is_root else []
        expected = _block(case.root, case, salt=rank)
        output = _prefilled(expected, case.layout)
        return Prepared(
            args=[[output], [inputs] if is_root else [], _options("ScatterOptions", case, rootRank=case.root)],
            public=lambda async_op: dist.scatter(
                output, inputs if is_root else None, src=case.root, async_op=async_op),
            outputs=[("output_tensors[0]", output, expected)],
            kept=[(f"input_tensors[0][{r}]", inputs[r], _block(case.root, case, salt=r))
                  for r in range(len(inputs))],
            future=[expected],
        )


class ReduceScatterTensorCoalesced(Reference):

    def prepare(self, case, rank):
        count = 2
        inputs = [_stacked(case, [_reducible_block(rank, case, salt=10 * i + j)
                                  for j in range(case.world_size)]) for i in range(count)]
        expected = [_reduced_block(case, salt=10 * i + rank) for i in range(count)]
        outputs = [_prefilled(e, case.layout) for e in expected]
        op = reduce_op(case.reduce_op)
        calls = [lambda o=o, i=i: dist.reduce_scatter_tensor(o, i, op=op)
                 for o, i in zip(outputs, inputs)]
        return Prepared(
            args=[outputs, inputs, _options("ReduceScatterOptions", case, reduceOp=op)],
            public=lambda async_op: _coalesced(async_op, calls),
            outputs=[(f"outputs[{i}]", outputs[i], expected[i]) for i in range(count)],
            exact=is_exact(case.reduce_op),
            future=expected,
        )


def _rows_sent(case, sender, receiver):
    """Rows `sender` sends `receiver` in all-to-all: uneven splits differ per pair, some are 0."""
    if case.layout == "empty":
        return 0
    if case.splits == "equal":
        return ROWS
    return (sender + 2 * receiver + 1) % 3


class AlltoallBase(Reference):

    @staticmethod
    def _input(case, rank):
        rows = sum(_rows_sent(case, rank, j) for j in range(case.world_size))
        return distinct(rank, rows * COLUMNS, case.dtype).reshape(rows, COLUMNS)

    def prepare(self, case, rank):
        ws = case.world_size
        sent = [_rows_sent(case, rank, j) for j in range(ws)]
        received = [_rows_sent(case, j, rank) for j in range(ws)]
        pieces = []
        for j in range(ws):
            start = sum(_rows_sent(case, j, k) for k in range(rank))
            pieces.append(self._input(case, j)[start:start + received[j]])
        expected = torch.cat(pieces)
        source = shaped(self._input(case, rank).reshape(-1), case.layout)
        output = _prefilled(expected, case.layout)
        uneven = case.splits == "uneven"
        output_splits, input_splits = (received, sent) if uneven else ([], [])
        return Prepared(
            args=[output, source, output_splits, input_splits, _options("AllToAllOptions", case)],
            public=lambda async_op: dist.all_to_all_single(
                output, source, output_splits or None, input_splits or None, async_op=async_op),
            outputs=[("output_tensor", output, expected)],
            kept=[("input_tensor", source, self._input(case, rank))],
            future=[expected],
        )


class Alltoall(Reference):

    def prepare(self, case, rank):
        ws = case.world_size
        # Uneven: what rank s sends rank r has (s + 2r) % 3 + 1 rows (none when the case is empty).
        def block(sender, receiver):
            rows = ROWS if case.splits == "equal" else (sender + 2 * receiver) % 3 + 1
            return _block(sender, case, salt=receiver, rows=rows)

        inputs = [block(rank, j) for j in range(ws)]
        expected = [block(j, rank) for j in range(ws)]
        outputs = [_prefilled(e, case.layout) for e in expected]
        return Prepared(
            args=[outputs, inputs, _options("AllToAllOptions", case)],
            public=lambda async_op: dist.all_to_all(outputs, inputs, async_op=async_op),
            outputs=[(f"output_tensors[{j}]", outputs[j], expected[j]) for j in range(ws)],
            kept=[(f"input_tensors[{j}]", inputs[j], block(rank, j)) for j in range(ws)],
            future=expected,
        )


# Point-to-point cases run their own exchange: `prepare` does not fit them.
class PointToPoint(Reference):
    """send and recv together: every rank sends two messages with different tags to the next rank
    and receives the previous rank's, posting the receives in the other order where the call
    allows it, so a backend that ignores or changes tags delivers the wrong one."""

    tags = (3, 5)

    def run(self, case, rank, backend) -> list[str]:
        ws = case.world_size
        after, before = (rank + 1) % ws, (rank - 1) % ws
        messages = [_block(rank, case, salt=s) for s in range(2)]
        expected = [_block(before, case, salt=s) for s in range(2)]
        received = [_prefilled(e, case.layout) for e in expected]
        works = []
        if case.api == "backend":
            works += [backend.send([m], after, tag) for m, tag in zip(messages, self.tags)]
            works += [backend.recv([received[s]], before, self.tags[s]) for s in (1, 0)]
        elif case.api == "batch":
            ops = [dist.P2POp(dist.isend, m, after, tag=tag) for m, tag in zip(messages, self.tags)]
            ops += [dist.P2POp(dist.irecv, received[s], before, tag=self.tags[s]) for s in (1, 0)]
            works += dist.batch_isend_irecv(ops)
        elif case.async_op:
            works += [dist.isend(m, after, tag=tag) for m, tag in zip(messages, self.tags)]
            works += [dist.irecv(received[s], before, tag=self.tags[s]) for s in (1, 0)]
        else:
            # Blocking calls in tag order; even ranks send first, so a ring cannot deadlock.
            for step in (("send", "recv") if rank % 2 == 0 else ("recv", "send")):
                for s, tag in enumerate(self.tags):
                    if step == "send":
                        dist.send(messages[s], after, tag=tag)
                    else:
                        dist.recv(received[s], before, tag=tag)
        problems = _wait_all(works, "point-to-point")
        if problems:
            return problems
        return [p for s in range(2) for p in
                _diff(f"message with tag {self.tags[s]} from rank {before}", received[s], expected[s])]

    def call_args(self, case, rank, method):
        ws = case.world_size
        if method == "send":
            return [[_block(rank, case)], (rank + 1) % ws, self.tags[0]]
        return [[_prefilled(_block((rank - 1) % ws, case), case.layout)], (rank - 1) % ws, self.tags[0]]


class AnySource(Reference):
    """recvAnysource: rank 0 receives one message from every other rank with one tag, and must
    learn which rank sent each."""

    tag = 7

    def run(self, case, rank, backend) -> list[str]:
        ws = case.world_size
        if rank != 0:
            message = _block(rank, case)
            work = backend.send([message], 0, self.tag) if case.api == "backend" else dist.isend(
                message, 0, tag=self.tag)
            return _wait_all([work], "send")
        template = _block(1, case)
        buffers = [_prefilled(template, case.layout) for _ in range(1, ws)]
        sources = []
        if case.api == "backend":
            works = [backend.recv_anysource([b], self.tag) for b in buffers]
            problems = _wait_all(works, "recv_anysource")
            if problems:
                return problems
            sources = [w._source_rank() for w in works]
        elif case.async_op:
            works = [dist.irecv(b, src=None, tag=self.tag) for b in buffers]
            problems = _wait_all(works, "irecv without src")
            if problems:
                return problems
            sources = [w._source_rank() for w in works]
        else:
            sources = [dist.recv(b, src=None, tag=self.tag) for b in buffers]
        problems = []
        if sorted(sources) != list(range(1, ws)):
            problems.append(f"senders reported as {sources}, expected each of 1..{ws - 1} once")
        for source, buffer in zip(sources, buffers):
            if 0 < source < ws:
                problems += _diff(f"message reported from rank {source}", buffer, _block(source, case))
        return problems

    def call_args(self, case, rank, method):
        return [[_prefilled(_block(1, case), case.layout)], self.tag]


def _wait_all(works, what) -> list[str]:
    problems = []
    for work in works:
        try:
            if not work.wait(P2P_WAIT):
                problems.append(f"{what}: wait() returned False")
        except Exception as error:  # noqa: BLE001  (the case fails with the backend's message)
            problems.append(f"{what}: wait() raised {type(error).__name__}: {error}")
            break
    return problems


def _diff(label, actual, expected):
    return differences(label, actual, expected, exact=True)


REFERENCES: dict[str, Reference] = {
    "broadcast": Broadcast(),
    "allreduce": Allreduce(),
    "allreduce_sparse": AllreduceSparse(),
    "allgather": Allgather(),
    "allgather_base": AllgatherBase(),
    "reduce_scatter": ReduceScatter(),
    "reduce_scatter_base": ReduceScatterBase(),
    "barrier": Barrier(),
    "allreduce_coalesced": AllreduceCoalesced(),
    "reduce": Reduce(),
    "allgather_coalesced": AllgatherCoalesced(),
    "allgather_into_tensor_coalesced": AllgatherIntoTensorCoalesced(),
    "gather": Gather(),
    "scatter": Scatter(),
    "reduce_scatter_tensor_coalesced": ReduceScatterTensorCoalesced(),
    "alltoall_base": AlltoallBase(),
    "alltoall": Alltoall(),
    "point_to_point": PointToPoint(),
    "recv_anysource": AnySource(),
}
