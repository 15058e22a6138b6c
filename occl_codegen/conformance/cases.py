"""The conformance suite's cases: from what a spec declares, every pair of choices covered.

A case fixes every choice one run of an op makes: world size, dtype, reduce op, root, the call
(backend object, torch.distributed, _coalescing_manager, batch_isend_irecv), sync or async,
layout (contiguous, non-contiguous, zero-element) and splits. The full product is too big to run
on two cores, so `cases_for` covers it pairwise: every pair of values of any two choices that
can go together appears in some case, and so does every (dtype, reduce op) the backend declares
and every (world size, root).
"""

from __future__ import annotations

import itertools
import re
from dataclasses import dataclass
from typing import Callable

from .semantics import SEMANTICS

MAX_WORLD_SIZE = 4


@dataclass(frozen=True)
class Op:
    """An op the spec declares, as the suite calls it."""

    name: str  # the c10d::Backend method
    method: str  # its name on the Python backend object
    semantics: str | None


# The source of a declaration the generated suite renders from the spec itself.
SPEC_SOURCE = "the spec"


@dataclass(frozen=True)
class Declaration:
    """What a backend declares: the spec's `support:` (rendered into the generated suite), or
    another backend's capability table (occl_codegen/conformance/capabilities/)."""

    backend: str
    dtypes: tuple[str, ...]
    reduce_dtypes: tuple[str, ...]
    reduce_ops: tuple[tuple[str, tuple[str, ...], str | None], ...]  # (op, dtypes, rule)
    detects_mismatched: tuple[str, ...] = ()
    unsupported_ops: tuple[tuple[str, str], ...] = ()  # (op, why)
    future_holds_outputs: bool = True  # a Work's future completes with the op's outputs
    keeps_inputs: bool = True  # tensors an op only reads stay as they were
    keeps_non_root_tensors: bool = True  # reduce leaves the non-root ranks' tensors alone
    refuses: tuple[tuple[str, str], ...] = ()  # (regex over case ids, why)
    devices: tuple[str, ...] = ("cpu",)  # the device types whose tensors the backend accepts
    source: str = SPEC_SOURCE  # where the declaration comes from, for skip reasons

    def promises(self) -> tuple[str, ...]:
        """What cases check beyond the outputs (see suite.run_case)."""
        declared = (("future", self.future_holds_outputs), ("kept", self.keeps_inputs),
                    ("non_root", self.keeps_non_root_tensors))
        return tuple(name for name, promised in declared if promised)

    def reduce_op_dtypes(self, name: str) -> tuple[str, ...]:
        return next((dtypes for op, dtypes, _ in self.reduce_ops if op == name), ())

    def refusal(self, case: "Case") -> str | None:
        """Why this backend does not run `case` (None: it does)."""
        for op in case.ops:
            why = dict(self.unsupported_ops).get(op)
            if why:
                return f"{self.backend} does not implement {op} ({self.source}): {why}"
        for pattern, why in self.refuses:
            if re.search(pattern, str(case)):
                return f"{self.backend} refuses it ({self.source}): {why}"
        semantics = SEMANTICS[case.semantics]
        dtypes = semantics.case_dtypes(self.dtypes, self.reduce_dtypes, self.reduce_op_dtypes)
        if case.dtype is not None and case.dtype not in dtypes:
            return f"{self.backend} does not list {case.dtype} ({self.source})"
        if case.reduce_op is not None:
            rules = {op: (dtypes, rule) for op, dtypes, rule in self.reduce_ops}
            if case.reduce_op not in rules:
                return f"{self.backend} does not define {case.reduce_op} ({self.source})"
            dtypes, rule = rules[case.reduce_op]
            if case.dtype not in dtypes:
                return f"{self.backend}: {rule} ({self.source})"
        return None


@dataclass(frozen=True)
class Case:
    ops: tuple[str, ...]  # the spec's ops it exercises (send and recv run together)
    method: str  # the backend object's method the "backend" call uses
    semantics: str
    world_size: int
    api: str
    async_op: bool
    layout: str
    dtype: str | None = None
    reduce_op: str | None = None
    root: int | None = None
    splits: str | None = None

    def __str__(self) -> str:
        parts = [
            "+".join(self.ops), f"ws{self.world_size}", self.dtype, self.reduce_op,
            None if self.root is None else f"root{self.root}", self.api,
            "async" if self.async_op else "sync", self.layout,
            None if self.splits is None else f"{self.splits}-splits",
        ]
        return "-".join(p for p in parts if p)


@dataclass
class _Dimension:
    name: str
    values: tuple


def cases_for(ops: tuple[Op, ...], declaration: Declaration) -> list[Case]:
    """Every op's cases, in spec order; ops sharing a semantics (send, recv) run once together."""
    cases: list[Case] = []
    seen: set[str] = set()
    for op in ops:
        if op.semantics is None or op.semantics in seen:
            continue
        semantics = SEMANTICS[op.semantics]
        sharing = [o for o in ops if o.semantics == op.semantics] if semantics.shared else [op]
        seen.add(op.semantics)
        for choice in _pairwise(_dimensions(semantics, declaration), _valid(semantics, declaration)):
            cases.append(
                Case(ops=tuple(o.name for o in sharing), method=op.method,
                     semantics=op.semantics, **choice)
            )
    return cases


def _dimensions(semantics, declaration: Declaration) -> list[_Dimension]:
    dtypes = semantics.case_dtypes(
        declaration.dtypes, declaration.reduce_dtypes, declaration.reduce_op_dtypes
    )
    dims = [_Dimension("dtype", dtypes)]
    if semantics.reduces:
        dims.append(_Dimension("reduce_op", tuple(op for op, _, _ in declaration.reduce_ops)))
    dims.append(_Dimension("world_size", tuple(range(semantics.min_world_size, MAX_WORLD_SIZE + 1))))
    if semantics.rooted:
        dims.append(_Dimension("root", tuple(range(MAX_WORLD_SIZE))))
    dims.append(_Dimension("api", semantics.apis))
    dims.append(_Dimension("async_op", (False, True)))
    dims.append(_Dimension("layout", semantics.layouts))
    if semantics.splits:
        dims.append(_Dimension("splits", ("equal", "uneven")))
    return dims


def takes_async(semantics) -> bool:
    """Whether the backend method takes an async flag: a method without options (send, recv)
    does not, and its calls all return a Work."""
    return "options" in semantics.arg_kinds


def _valid(semantics, declaration: Declaration) -> Callable[[dict], bool]:
    """Whether a (partial) choice can run: the constraints are all between two choices."""

    def valid(choice: dict) -> bool:
        if not takes_async(semantics) and choice.get("api") == "backend" and choice.get("async_op") is False:
            return False
        if "root" in choice and "world_size" in choice and choice["root"] >= choice["world_size"]:
            return False
        if "reduce_op" in choice and "dtype" in choice:
            if choice["dtype"] not in declaration.reduce_op_dtypes(choice["reduce_op"]):
                return False
        # batch_isend_irecv is asynchronous by nature.
        if choice.get("api") == "batch" and choice.get("async_op") is False:
            return False
        return True

    return valid


def _pairwise(dims: list[_Dimension], valid: Callable[[dict], bool]) -> list[dict]:
    """A small set of choices covering every valid pair of values of any two dimensions (greedy:
    each new choice starts from the first uncovered pair and adds, dimension by dimension, the
    value that covers most pairs not yet covered). Deterministic, so case ids are stable.

    A choice on one rank or on zero-element tensors cannot tell much from nothing, so it covers
    only the pairs that hold its one rank or its emptiness: every other pair (a dtype with a
    reduce op, a world size with a root, ...) is covered by a choice with data and peers."""
    names = [d.name for d in dims]
    values = {d.name: d.values for d in dims}
    uncovered = {
        ((a, va), (b, vb))
        for a, b in itertools.combinations(names, 2)
        for va in values[a]
        for vb in values[b]
        if valid({a: va, b: vb})
    }
    order = {name: i for i, name in enumerate(names)}

    def key(pair):
        return tuple((order[n], values[n].index(v)) for n, v in pair)

    def covered(choice: dict) -> set:
        pairs = {_pair(order, (x, choice[x]), (y, choice[y]))
                 for x, y in itertools.combinations(choice, 2)}
        if not any(_is_weak(item) for item in choice.items()):
            return pairs
        return {pair for pair in pairs if any(_is_weak(item) for item in pair)}

    choices = []
    while uncovered:
        seed = min(uncovered, key=key)
        choice = dict(seed)
        for name in names:
            if name in choice:
                continue
            candidates = [v for v in values[name] if valid({**choice, name: v})]
            if not any(_is_weak(item) for item in seed):  # the seed needs a strong choice
                candidates = [v for v in candidates if not _is_weak((name, v))]
            if not candidates:
                raise ValueError(f"no value of {name} fits {choice}")
            choice[name] = max(
                candidates, key=lambda v: len(covered({**choice, name: v}) & uncovered)
            )
        uncovered -= covered(choice)
        choices.append({name: choice[name] for name in names})
    return choices


def _is_weak(item) -> bool:
    """Whether a (dimension, value) makes a choice weak: one rank, or no elements."""
    return item in (("world_size", 1), ("layout", "empty"))


def _pair(order, first, second):
    return (first, second) if order[first[0]] < order[second[0]] else (second, first)
