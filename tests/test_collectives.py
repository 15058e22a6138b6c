"""Correctness of every collective across world sizes, dtypes, reduce ops, sizes and layouts.

One `pool.run` per (world size, collective): the worker loops over every dtype x reduce op x
case and returns a list of failure strings, so one pytest test covers a few hundred collectives
without paying per-call round trips. Expected values are computed on every rank from all ranks'
(deterministic) inputs with plain torch ops, never with the backend.

Supported-combination rules (occl): bitwise ops (BAND/BOR/BXOR) only on integer and bool dtypes;
AVG and PREMUL_SUM not on bool; PREMUL_SUM is tested on floating dtypes only and must be
rejected on integers and bool (see PREMUL_SUM_ON_INTEGERS); AVG on integers = sum, then C++
integer division (truncating toward zero); bool: SUM = or, PRODUCT = and, MIN = and, MAX = or.
Unsupported combinations must raise at the call with
`occl.<method>: <label> has dtype <Dtype>, which reduce op <OP> does not support: <reason>`.

Inputs are small integers (or quarter steps) chosen so that every partial result is exact in
every dtype, whatever the reduction order; float16/bfloat16 rounding is therefore not tested here
(see test_half_precision_rounds_once).

With OCCL_TEST_BACKEND=gloo the combinations gloo rejects are skipped, as are the cases gloo gets
wrong or does not support (see GLOO_BROKEN_LAYOUTS; stacked all_gather_into_tensor /
reduce_scatter_tensor forms; non-contiguous outputs of the list reduce_scatter).
"""

from __future__ import annotations

import functools
import hashlib
import re
import time
import warnings
import zlib

import pytest
import torch
import torch.distributed as dist

from dist_harness import DistPool, occl_only

WORLD_SIZES = [1, 2, 3, 4]

DTYPES = [
    torch.float32,
    torch.float64,
    torch.float16,
    torch.bfloat16,
    torch.int8,
    torch.uint8,
    torch.int16,
    torch.int32,
    torch.int64,
    torch.bool,
]
# c10::ScalarType names, as the backend prints them.
SCALAR_TYPE_NAME = {
    torch.float32: "Float",
    torch.float64: "Double",
    torch.float16: "Half",
    torch.bfloat16: "BFloat16",
    torch.int8: "Char",
    torch.uint8: "Byte",
    torch.int16: "Short",
    torch.int32: "Int",
    torch.int64: "Long",
    torch.bool: "Bool",
}

REDUCE_OPS = [
    "SUM",
    "AVG",
    "PRODUCT",
    "MIN",
    "MAX",
    "BAND",
    "BOR",
    "BXOR",
    "PREMUL_SUM(float)",  # dist._make_nccl_premul_sum(python float)
    "PREMUL_SUM(tensor)",  # dist._make_nccl_premul_sum(1-element tensor)
]
BITWISE = ("BAND", "BOR", "BXOR")
# Factors chosen so that factor * input is exact in every floating dtype.
PREMUL_FLOAT_FACTOR = 0.75
PREMUL_TENSOR_FACTOR = 1.5
# occl rejects PREMUL_SUM on integers ("PREMUL_SUM needs a floating dtype"), although the spec's
# check description says "AVG and PREMUL_SUM need numbers". Flip this to True if integers become
# supported: the suite then tests them with integral factors (where every truncation rule agrees).
PREMUL_SUM_ON_INTEGERS = False
PREMUL_INT_FACTORS = {"PREMUL_SUM(float)": 2.0, "PREMUL_SUM(tensor)": 3.0}

# (layout, logical shape). "strided": every other element of a larger buffer whose other
# elements are guards that must stay untouched; "transposed": the .t() view of a 2-D buffer.
CASES = [
    ("contig", (0,)),
    ("contig", (1,)),
    ("contig", (1237,)),
    ("strided", (37,)),
    ("transposed", (12, 35)),
]
LARGE = 1_000_003  # >= 1e6 elements, odd, not divisible by any world size in the suite

# A few (dtype, reduce op) combinations also run at LARGE elements.
LARGE_REDUCE_COMBOS = {
    (torch.float32, "SUM"),
    (torch.bfloat16, "AVG"),
    (torch.int32, "MAX"),
    (torch.float64, "PREMUL_SUM(float)"),
}
LARGE_COPY_DTYPES = {torch.float32, torch.int64}  # broadcast / all_gather at LARGE

# gloo (2.13) ignores strides in these (collective, layout) cases: it reads and writes the view's
# elements as if they were contiguous from data_ptr() (the "strided" view's guard elements get
# overwritten; a transposed reduce_scatter input is read in memory order). With
# OCCL_TEST_BACKEND=gloo these cases are skipped; occl must handle them.
GLOO_BROKEN_LAYOUTS = {
    ("all_reduce", "strided"),
    ("broadcast", "strided"),
    ("reduce_scatter", "transposed"),  # inputs
}

MAX_UNEXPECTED_EXCEPTIONS = 3
RUN_TIMEOUT = 180  # seconds for one (world size, collective) batch


# ---------------------------------------------------------------------------------------------
# Rules
# ---------------------------------------------------------------------------------------------


def _base(opname: str) -> str:
    return opname.split("(")[0]


def occl_rejects(opname: str, dtype: torch.dtype) -> bool:
    base = _base(opname)
    if base in BITWISE:
        return dtype.is_floating_point
    if base == "AVG":
        return dtype == torch.bool
    if base == "PREMUL_SUM":
        if PREMUL_SUM_ON_INTEGERS:
            return dtype == torch.bool
        return not dtype.is_floating_point
    return False


def gloo_rejects(opname: str | None, dtype: torch.dtype) -> bool:
    if dtype in (torch.int16, torch.uint16):
        return True
    if opname is None:
        return False
    base = _base(opname)
    if base == "PREMUL_SUM":
        return True
    if base in BITWISE:
        return dtype.is_floating_point
    if base == "AVG":
        return not dtype.is_floating_point
    return False


def combo_status(backend: str, opname: str | None, dtype: torch.dtype) -> str:
    """'check' (run and compare), 'reject' (must raise at the call) or 'skip'."""
    if backend == "occl":
        return "reject" if opname is not None and occl_rejects(opname, dtype) else "check"
    if gloo_rejects(opname, dtype) or (opname is not None and occl_rejects(opname, dtype)):
        return "skip"
    return "check"


def make_op(opname: str, dtype: torch.dtype):
    if opname.startswith("PREMUL_SUM"):
        if dtype.is_floating_point:
            f = PREMUL_FLOAT_FACTOR if opname == "PREMUL_SUM(float)" else PREMUL_TENSOR_FACTOR
        else:
            f = PREMUL_INT_FACTORS[opname]
        if opname == "PREMUL_SUM(float)":
            return dist._make_nccl_premul_sum(f)
        fdt = dtype if dtype.is_floating_point else torch.float64
        return dist._make_nccl_premul_sum(torch.tensor([f], dtype=fdt))
    return getattr(dist.ReduceOp, opname)


def premul_factor(opname: str, dtype: torch.dtype) -> float:
    if dtype.is_floating_point:
        return PREMUL_FLOAT_FACTOR if opname == "PREMUL_SUM(float)" else PREMUL_TENSOR_FACTOR
    return PREMUL_INT_FACTORS[opname]


# ---------------------------------------------------------------------------------------------
# Inputs and expected values
# ---------------------------------------------------------------------------------------------


def _seed(*parts) -> int:
    return zlib.crc32("|".join(map(str, parts)).encode())


def value_kind(opname: str | None, dtype: torch.dtype) -> str:
    base = None if opname is None else _base(opname)
    if dtype == torch.bool:
        if base in ("PRODUCT", "MIN", "BAND"):
            return "mostly_true"
        if base in ("SUM", "MAX", "BOR"):
            return "mostly_false"
        return "coin"
    if base in ("SUM", "AVG"):
        return "small"  # sums of up to 4 stay far from overflow and exact in bfloat16
    if base == "PREMUL_SUM":
        return "premul"
    if base == "PRODUCT":
        return "product"  # values in {-1, 1, 2} (unsigned {1, 2}): |product| <= 16
    if base in BITWISE or base is None:
        return "bits"  # full range
    return "minmax"


def make_values(rank, shape, dtype, kind, tag) -> torch.Tensor:
    """Deterministic input of `rank`: the same on every process that builds it."""
    n = 1
    for s in shape:
        n *= s
    g = torch.Generator().manual_seed(_seed(tag, rank, shape, dtype, kind))

    def ri(lo, hi):  # integers in [lo, hi)
        return torch.randint(lo, hi, (n,), generator=g, dtype=torch.int64)

    signed = dtype.is_floating_point or dtype.is_signed
    if dtype == torch.bool:
        r = ri(0, 8)
        v = {"mostly_true": r != 0, "mostly_false": r == 0}.get(kind, r < 4)
    elif kind == "small":
        v = ri(-64, 65).double() / 4 if dtype.is_floating_point else (
            ri(-20, 21) if signed else ri(0, 60))
    elif kind == "premul":
        # Integers in [-8, 8]: every partial sum of factor * x (factors 0.75, 1.5; <= 4 ranks)
        # has <= 8 significant bits, so it is exact in bfloat16 whatever the reduction order or
        # wherever the backend rounds (occl's ring rounds partial sums at every hop).
        v = ri(-8, 9).double() if dtype.is_floating_point else (ri(-8, 9) if signed else ri(0, 9))
    elif kind == "product":
        choices = torch.tensor([-1, 1, 2, 0.5] if dtype.is_floating_point else
                               [-1, 1, 2] if signed else [1, 2], dtype=torch.float64)
        v = choices[ri(0, len(choices))]
    elif kind == "bits":
        if dtype.is_floating_point:
            v = ri(-4000, 4000).double() / 8
        elif dtype == torch.int64:
            v = torch.randint(-(2**63), 2**63 - 1, (n,), generator=g, dtype=torch.int64)
        else:
            info = torch.iinfo(dtype)
            v = ri(info.min, info.max + 1)
    else:  # minmax
        if dtype.is_floating_point:
            v = ri(-1000, 1000).double() / 8
        elif dtype == torch.int64:
            v = ri(-(2**40), 2**40)
        else:
            info = torch.iinfo(dtype)
            v = ri(info.min, info.max + 1)
    return v.to(dtype).reshape(shape)


def _acc_dtype(dtype):
    if dtype == torch.float64:
        return torch.float64
    if dtype.is_floating_point:
        return torch.float32
    return torch.int64


def reduce_expected(inputs, opname, dtype, world_size) -> torch.Tensor:
    base = _base(opname)
    if dtype == torch.bool:
        st = torch.stack(inputs)
        if base in ("SUM", "MAX", "BOR"):
            return st.any(0)
        if base in ("PRODUCT", "MIN", "BAND"):
            return st.all(0)
        if base == "BXOR":
            return functools.reduce(torch.bitwise_xor, inputs)
        raise AssertionError(f"no bool rule for {opname}")
    if base in BITWISE:
        fn = {"BAND": torch.bitwise_and, "BOR": torch.bitwise_or, "BXOR": torch.bitwise_xor}[base]
        return functools.reduce(fn, inputs)
    acc = _acc_dtype(dtype)
    st = torch.stack([x.to(acc) for x in inputs])
    if base == "SUM":
        out = st.sum(0)
    elif base == "AVG":
        s = st.sum(0)
        if acc == torch.int64:  # C++ integer division: truncates toward zero
            out = torch.div(s, world_size, rounding_mode="trunc")
        else:
            out = s / world_size
    elif base == "PRODUCT":
        out = st.prod(0)
    elif base == "MIN":
        out = st.amin(0) if st.numel() else st.sum(0)
    elif base == "MAX":
        out = st.amax(0) if st.numel() else st.sum(0)
    elif base == "PREMUL_SUM":
        f = premul_factor(opname, dtype)
        if acc == torch.int64:
            out = torch.trunc(st.double() * f).to(torch.int64).sum(0)
        else:
            out = (st * f).sum(0)
    else:
        raise AssertionError(opname)
    return out.to(dtype)


def place(values: torch.Tensor, layout: str, fill=None):
    """A tensor with the logical contents `values` (or `fill` everywhere) in `layout`.

    Returns (tensor, guard): `guard()` is None when nothing around the view was disturbed,
    else a description.
    """
    dtype = values.dtype
    if layout == "contig":
        t = values.clone()
        return t, (lambda: None)
    if layout == "strided":
        n = values.numel()
        g = torch.Generator().manual_seed(_seed("guard", n, dtype))
        base = torch.randint(0, 100, (2 * n + 1,), generator=g).to(dtype)
        t = base[1::2].view(values.shape)
        t.copy_(values)
        saved = base[0::2].clone()

        def guard():
            if not torch.equal(base[0::2], saved):
                return "elements between the strided view's elements were overwritten"
            return None

        return t, guard
    if layout == "transposed":
        assert values.dim() == 2
        base = torch.empty(values.shape[::-1], dtype=dtype)
        t = base.t()
        t.copy_(values)
        assert not t.is_contiguous() or t.numel() <= 1
        return t, (lambda: None)
    raise AssertionError(layout)


def fresh_output(shape, dtype, layout):
    """An output tensor filled with junk (so unwritten elements show) in `layout`."""
    n = 1
    for s in shape:
        n *= s
    junk = torch.full((n,), 99, dtype=torch.int64).to(dtype).reshape(shape)
    return place(junk, layout)


class Failures:
    """Collects mismatch descriptions on one rank; aborts after repeated exceptions."""

    class Abort(Exception):
        pass

    def __init__(self, rank):
        self.rank = rank
        self.items: list[str] = []
        self.exceptions = 0

    def add(self, msg: str):
        self.items.append(msg)

    def compare(self, what, actual, expected, guard=None):
        msg = compare(actual, expected)
        if msg:
            self.add(f"{what}: {msg}")
        if guard is not None:
            g = guard()
            if g:
                self.add(f"{what}: {g}")

    def exception(self, what, exc):
        text = f"{type(exc).__name__}: {exc}"
        self.add(f"{what}: unexpected {text[:600]}")
        self.exceptions += 1
        low = text.lower()
        if self.exceptions >= MAX_UNEXPECTED_EXCEPTIONS or "timed out" in low or "timeout" in low:
            raise Failures.Abort()

    def expect_rejection(self, what, fn, method, label, dtype, opname):
        """`fn` must raise at the call with occl's unsupported-reduce-op message."""
        pattern = re.escape(
            f"occl.{method}: {label} has dtype {SCALAR_TYPE_NAME[dtype]}, "
            f"which reduce op {_base(opname)} does not support: "
        )
        try:
            fn()
        except (RuntimeError, ValueError) as e:
            if not re.search(pattern, str(e)):
                self.add(f"{what}: raised {type(e).__name__} {str(e)[:400]!r}, "
                         f"expected a message matching {pattern!r}")
            return
        self.add(f"{what}: expected {method} to reject this dtype/reduce-op combination, "
                 "but it returned normally")

    def result(self):
        return [f"rank {self.rank}: {m}" for m in self.items]


def compare(actual: torch.Tensor, expected: torch.Tensor) -> str | None:
    if tuple(actual.shape) != tuple(expected.shape):
        return f"shape {tuple(actual.shape)} != expected {tuple(expected.shape)}"
    if actual.dtype != expected.dtype:
        return f"dtype {actual.dtype} != expected {expected.dtype}"
    a = actual.reshape(-1)
    e = expected.reshape(-1)
    if a.dtype.is_floating_point:
        try:
            torch.testing.assert_close(a, e, equal_nan=True)
            return None
        except AssertionError as exc:
            bad = (~torch.isclose(a.double(), e.double(), equal_nan=True)).nonzero()
            first = int(bad[0]) if len(bad) else -1
            summary = " ".join(str(exc).split())[:300]
            return (f"{len(bad)}/{a.numel()} elements differ; first at {first}: "
                    f"got {a[first].item()!r}, expected {e[first].item()!r} ({summary})")
    if torch.equal(a, e):
        return None
    bad = (a != e).nonzero()
    first = int(bad[0])
    return (f"{len(bad)}/{a.numel()} elements differ; first at {first}: got {a[first].item()!r}, "
            f"expected {e[first].item()!r}")


def _layout_ok(backend, collective, layout):
    return backend == "occl" or (collective, layout) not in GLOO_BROKEN_LAYOUTS


def _cases_for(dtype, opname=None, large_combos=(), large_dtypes=()):
    cases = list(CASES)
    if (dtype, opname) in large_combos or (opname is None and dtype in large_dtypes):
        cases.append(("contig", (LARGE,)))
    return cases


def _run_batch(rank, body):
    fails = Failures(rank)
    warnings.simplefilter("ignore", FutureWarning)  # all_gather_into_tensor & co. are deprecated
    try:
        body(fails)
    except Failures.Abort:
        fails.add("stopped early after repeated or timeout exceptions (group may be broken)")
    return fails.result()


# ---------------------------------------------------------------------------------------------
# Worker bodies: fn(rank, world_size, backend) -> list of failure strings
# ---------------------------------------------------------------------------------------------


def w_all_reduce(rank, ws, backend):
    def body(fails):
        for dtype in DTYPES:
            for opname in REDUCE_OPS:
                status = combo_status(backend, opname, dtype)
                what = f"all_reduce {dtype} {opname}"
                if status == "skip":
                    continue
                if status == "reject":
                    fails.expect_rejection(
                        what,
                        lambda: dist.all_reduce(torch.ones(5, dtype=dtype),
                                                op=make_op(opname, dtype)),
                        "allreduce", "tensors[0]", dtype, opname)
                    continue
                kind = value_kind(opname, dtype)
                for layout, shape in _cases_for(dtype, opname, LARGE_REDUCE_COMBOS):
                    if not _layout_ok(backend, "all_reduce", layout):
                        continue
                    w = f"{what} {layout}{list(shape)}"
                    inputs = [make_values(r, shape, dtype, kind, "ar") for r in range(ws)]
                    expected = reduce_expected(inputs, opname, dtype, ws)
                    t, guard = place(inputs[rank], layout)
                    ptr = t.data_ptr()
                    try:
                        dist.all_reduce(t, op=make_op(opname, dtype))
                    except Exception as e:  # noqa: BLE001
                        fails.exception(w, e)
                        continue
                    fails.compare(w, t, expected, guard)
                    if t.data_ptr() != ptr:
                        fails.add(f"{w}: tensor storage changed")
    return _run_batch(rank, body)


def w_broadcast(rank, ws, backend):
    def body(fails):
        for dtype in DTYPES:
            if combo_status(backend, None, dtype) == "skip":
                continue
            for root in range(ws):
                cases = list(CASES)
                if dtype in LARGE_COPY_DTYPES and root == ws - 1:
                    cases.append(("contig", (LARGE,)))
                for layout, shape in cases:
                    if not _layout_ok(backend, "broadcast", layout):
                        continue
                    w = f"broadcast {dtype} root={root} {layout}{list(shape)}"
                    inputs = [make_values(r, shape, dtype, "bits", "bc") for r in range(ws)]
                    t, guard = place(inputs[rank], layout)
                    try:
                        dist.broadcast(t, src=root)
                    except Exception as e:  # noqa: BLE001
                        fails.exception(w, e)
                        continue
                    fails.compare(w, t, inputs[root], guard)
    return _run_batch(rank, body)


def w_all_gather(rank, ws, backend):
    def body(fails):
        for dtype in DTYPES:
            if combo_status(backend, None, dtype) == "skip":
                continue
            for layout, shape in _cases_for(dtype, large_dtypes=LARGE_COPY_DTYPES):
                w = f"all_gather {dtype} {layout}{list(shape)}"
                inputs = [make_values(r, shape, dtype, "bits", "ag") for r in range(ws)]
                inp, in_guard = place(inputs[rank], layout)
                outs = [fresh_output(shape, dtype, layout) for _ in range(ws)]
                try:
                    dist.all_gather([o for o, _ in outs], inp)
                except Exception as e:  # noqa: BLE001
                    fails.exception(w, e)
                    continue
                for i, (o, g) in enumerate(outs):
                    fails.compare(f"{w} output[{i}]", o, inputs[i], g)
                fails.compare(f"{w} input (must be unchanged)", inp, inputs[rank], in_guard)
    return _run_batch(rank, body)


def w_all_gather_into_tensor(rank, ws, backend):
    forms = ["concat", "stacked"] if backend == "occl" else ["concat"]

    def body(fails):
        for dtype in DTYPES:
            if combo_status(backend, None, dtype) == "skip":
                continue
            cases = _cases_for(dtype, large_dtypes={torch.float16})
            for form in forms:
                for layout, shape in cases:
                    w = f"all_gather_into_tensor {dtype} {form} {layout}{list(shape)}"
                    inputs = [make_values(r, shape, dtype, "bits", "agt") for r in range(ws)]
                    if form == "concat":
                        expected = torch.cat(inputs)
                    else:
                        expected = torch.stack(inputs)
                    out_layout = layout
                    if layout == "transposed" and form == "stacked":
                        out_layout = "strided"  # a 3-D stack has no .t(); use a strided view
                    inp, in_guard = place(inputs[rank], layout)
                    out, out_guard = fresh_output(tuple(expected.shape), dtype, out_layout)
                    try:
                        dist.all_gather_into_tensor(out, inp)
                    except Exception as e:  # noqa: BLE001
                        fails.exception(w, e)
                        continue
                    fails.compare(w, out, expected, out_guard)
                    fails.compare(f"{w} input (must be unchanged)", inp, inputs[rank], in_guard)
    return _run_batch(rank, body)


def w_reduce_scatter(rank, ws, backend):
    def body(fails):
        for dtype in DTYPES:
            for opname in REDUCE_OPS:
                status = combo_status(backend, opname, dtype)
                what = f"reduce_scatter {dtype} {opname}"
                if status == "skip":
                    continue
                if status == "reject":
                    fails.expect_rejection(
                        what,
                        lambda: dist.reduce_scatter(
                            torch.ones(5, dtype=dtype),
                            [torch.ones(5, dtype=dtype) for _ in range(ws)],
                            op=make_op(opname, dtype)),
                        "reduce_scatter", "output_tensors[0]", dtype, opname)
                    continue
                kind = value_kind(opname, dtype)
                cases = list(CASES)
                if (dtype, opname) in LARGE_REDUCE_COMBOS:
                    cases.append(("contig", (LARGE // ws + 1,)))
                for layout, shape in cases:
                    if not _layout_ok(backend, "reduce_scatter", layout):
                        continue
                    w = f"{what} {layout}{list(shape)}"
                    # inputs[r][i]: rank r's contribution to rank i's output
                    inputs = [[make_values(r, shape, dtype, kind, f"rs{i}") for i in range(ws)]
                              for r in range(ws)]
                    expected = reduce_expected([inputs[r][rank] for r in range(ws)],
                                               opname, dtype, ws)
                    placed = [place(x, layout) for x in inputs[rank]]
                    # gloo writes a non-contiguous output as if it were contiguous: skip that.
                    out_layout = layout if backend == "occl" else "contig"
                    out, out_guard = fresh_output(shape, dtype, out_layout)
                    try:
                        dist.reduce_scatter(out, [p for p, _ in placed],
                                            op=make_op(opname, dtype))
                    except Exception as e:  # noqa: BLE001
                        fails.exception(w, e)
                        continue
                    fails.compare(w, out, expected, out_guard)
                    for i, (p, g) in enumerate(placed):
                        if g():
                            fails.add(f"{w} input[{i}]: {g()}")
    return _run_batch(rank, body)


def w_reduce_scatter_tensor(rank, ws, backend):
    forms = ["concat", "stacked"] if backend == "occl" else ["concat"]
    large = {(torch.bfloat16, "SUM"), (torch.int64, "MIN")}

    def body(fails):
        for dtype in DTYPES:
            for opname in REDUCE_OPS:
                status = combo_status(backend, opname, dtype)
                what = f"reduce_scatter_tensor {dtype} {opname}"
                if status == "skip":
                    continue
                if status == "reject":
                    fails.expect_rejection(
                        what,
                        lambda: dist.reduce_scatter_tensor(
                            torch.ones(5, dtype=dtype), torch.ones(5 * ws, dtype=dtype),
                            op=make_op(opname, dtype)),
                        "_reduce_scatter_base", "output_tensor", dtype, opname)
                    continue
                kind = value_kind(opname, dtype)
                cases = list(CASES)
                if (dtype, opname) in large:
                    cases.append(("contig", (LARGE // ws + 1,)))
                for form in forms:
                    for layout, shape in cases:
                        w = f"{what} {form} {layout}{list(shape)}"
                        chunks = [[make_values(r, shape, dtype, kind, f"rst{i}")
                                   for i in range(ws)] for r in range(ws)]
                        full = [torch.cat(c) if form == "concat" else torch.stack(c)
                                for c in chunks]
                        expected = reduce_expected([chunks[r][rank] for r in range(ws)],
                                                   opname, dtype, ws)
                        in_layout = layout
                        if layout == "transposed" and form == "stacked":
                            in_layout = "strided"
                        inp, in_guard = place(full[rank], in_layout)
                        out, out_guard = fresh_output(shape, dtype, layout)
                        try:
                            dist.reduce_scatter_tensor(out, inp, op=make_op(opname, dtype))
                        except Exception as e:  # noqa: BLE001
                            fails.exception(w, e)
                            continue
                        fails.compare(w, out, expected, out_guard)
                        if in_guard():
                            fails.add(f"{w} input: {in_guard()}")
    return _run_batch(rank, body)


def w_barrier(rank, ws, backend):
    """Ranks arrive staggered; nobody may leave a barrier before the last one arrived."""

    def body(fails):
        records = []
        for it in range(3):
            late = (rank + it) % ws  # a different rank arrives last each time
            if rank == late:
                time.sleep(0.3)
            enter = time.time()
            try:
                dist.barrier()
            except Exception as e:  # noqa: BLE001
                fails.exception(f"barrier #{it}", e)
                continue
            records.append((enter, time.time()))
        stamps = torch.tensor(records, dtype=torch.float64)
        everyone = [torch.empty_like(stamps) for _ in range(ws)]
        dist.all_gather(everyone, stamps)
        for it in range(len(records)):
            last_enter = max(float(e[it, 0]) for e in everyone)
            first_exit = min(float(e[it, 1]) for e in everyone)
            if first_exit < last_enter:
                fails.add(f"barrier #{it}: a rank left at {first_exit:.4f} before the last rank "
                          f"entered at {last_enter:.4f}")
        for _ in range(20):  # back-to-back barriers
            dist.barrier()
    return _run_batch(rank, body)


def run_and_assert_no_failures(pool, worker, what, *args):
    """Runs a batched worker on every rank; each returns its list of failure descriptions."""
    results = pool.run(worker, *args, timeout=RUN_TIMEOUT)
    failures = [f for per_rank in results for f in per_rank]
    assert not failures, (
        f"{len(failures)} failures in {what} at world size {pool.world_size}:\n"
        + "\n".join(failures[:60])
    )


WORKERS = {
    "all_reduce": w_all_reduce,
    "broadcast": w_broadcast,
    "all_gather": w_all_gather,
    "all_gather_into_tensor": w_all_gather_into_tensor,
    "reduce_scatter": w_reduce_scatter,
    "reduce_scatter_tensor": w_reduce_scatter_tensor,
    "barrier": w_barrier,
}


@pytest.mark.parametrize("collective", list(WORKERS))
@pytest.mark.parametrize("occl_pool", WORLD_SIZES, indirect=True, ids=lambda n: f"ws{n}")
def test_collective(occl_pool, collective, backend):
    run_and_assert_no_failures(occl_pool, WORKERS[collective], collective, backend)


# The size thresholds of occl's algorithms (torch_occl/csrc/tuning.hpp) leave most small cases
# above on the direct paths. Pools with the thresholds at their extremes run every case through
# the other algorithms, in pieces of 1000 bytes (pieces that end mid-element and short last
# pieces): all_reduce through the ring (including segments of zero elements when numel < world
# size), broadcast through the pipelined chain, and the single-copy algorithms (ranks copying
# straight out of each other's tensors), which the ranks of one host run for large messages
# (broadcast only among more than two: two take the ring).
NO_SINGLE_COPY = {"OCCL_SINGLE_COPY_MIN_BYTES": str(1 << 62)}
SINGLE_COPY = {"OCCL_SINGLE_COPY_MIN_BYTES": "0", "OCCL_PIPELINE_CHUNK_BYTES": "1000"}
FORCED_ALGORITHMS = {
    "ring all_reduce": ({"OCCL_DIRECT_ALLREDUCE_MAX_BYTES": "0",
                         "OCCL_PIPELINE_CHUNK_BYTES": "1000", **NO_SINGLE_COPY}, "all_reduce"),
    "chain broadcast": ({"OCCL_CHAIN_BROADCAST_MIN_BYTES": "1",
                         "OCCL_PIPELINE_CHUNK_BYTES": "1000", **NO_SINGLE_COPY}, "broadcast"),
    "single-copy all_reduce": ({"OCCL_DIRECT_ALLREDUCE_MAX_BYTES": "0", **SINGLE_COPY},
                               "all_reduce"),
    "single-copy broadcast": (SINGLE_COPY, "broadcast"),
    "single-copy all_gather": (SINGLE_COPY, "all_gather"),
    "single-copy all_gather_into_tensor": (SINGLE_COPY, "all_gather_into_tensor"),
    "single-copy reduce_scatter_tensor": (SINGLE_COPY, "reduce_scatter_tensor"),
    "single-copy reduce_scatter": (SINGLE_COPY, "reduce_scatter"),
    # The signature exchange is the barrier when it runs; without it, the barrier's own round.
    "barrier without the agreement check": ({"OCCL_CHECK_SIGNATURES": "0"}, "barrier"),
}


@pytest.mark.parametrize("algorithm", list(FORCED_ALGORITHMS))
@pytest.mark.parametrize("world_size", [2, 3, 4], ids=lambda n: f"ws{n}")
def test_forced_algorithm(dist_pool, backend, world_size, algorithm):
    if backend != "occl":
        pytest.skip("occl tuning variables")
    env, collective = FORCED_ALGORITHMS[algorithm]
    results = dist_pool(world_size, env=env).run(WORKERS[collective], backend, timeout=RUN_TIMEOUT)
    failures = [f for per_rank in results for f in per_rank]
    assert not failures, (
        f"{len(failures)} failures in {algorithm} at world size {world_size}:\n"
        + "\n".join(failures[:60])
    )


def w_output_and_input_share_memory(rank, ws, op):
    """`op` (the list form) on 1 MiB per rank (single copies), on consecutive views of one tensor:
    all_gather's outputs, with its input the view that lies exactly on this rank's output or
    straddles two; reduce_scatter's inputs, with its output lying so. Every peer must read the
    input before anything writes over it."""
    n = 1 << 18
    problems = []
    for where, start in (("on its own part", rank * n),
                         ("straddling two parts", rank * n + (n // 2 if rank == 0 else -n // 2))):
        view = slice(start, start + n)
        if op == "all_gather":
            expected = torch.cat([torch.arange(n, dtype=torch.float32) + 1e6 * r
                                  for r in range(ws)])
            everything = torch.zeros(ws * n)
            everything[view] = expected[rank * n:(rank + 1) * n]
            dist.all_gather(list(everything.split(n)), everything[view])
            result = everything
        else:
            contribution = torch.arange(ws * n, dtype=torch.float32)  # every rank the same
            everything = contribution.clone()
            dist.reduce_scatter(everything[view], list(everything.split(n)))
            result, expected = everything[view], ws * contribution[rank * n:(rank + 1) * n]
        wrong = (result != expected).nonzero()
        if len(wrong):
            problems.append(f"rank {rank}, {op} {where}: {len(wrong)} elements wrong, first "
                            f"[{int(wrong[0])}] = {result[int(wrong[0])].item()}")
    return problems


@pytest.mark.parametrize("op", ["all_gather", "reduce_scatter"])
@pytest.mark.parametrize("world_size", [2, 3])
def test_collective_whose_output_and_input_share_memory(dist_pool, world_size, op):
    problems = dist_pool(world_size).run(w_output_and_input_share_memory, op)
    assert not [p for per_rank in problems for p in per_rank], problems


def w_half_rounds_once(rank, ws):
    """One big value and (ws - 1) ones: fp32 accumulation rounds once; per-hop rounding loses
    the ones when the big value comes first."""
    warnings.simplefilter("ignore", FutureWarning)
    problems = []
    for dtype, big in ((torch.bfloat16, 256.0), (torch.float16, 2048.0)):
        expected = torch.tensor([big] + [1.0] * (ws - 1)).sum().to(dtype)  # fp32, one rounding
        mine = torch.full((8,), big if rank == 0 else 1.0, dtype=dtype)
        out = torch.zeros(8, dtype=dtype)
        dist.reduce_scatter_tensor(out, mine.repeat(ws))
        if not torch.equal(out, expected.expand(8)):
            problems.append(f"rank {rank}: reduce_scatter_tensor {dtype}: got {out[0].item()}, "
                            f"fp32-accumulate-round-once gives {expected.item()}")
        t = mine.repeat(5000)  # 80 KB: above occl's 64 KiB direct-allreduce limit -> ring
        dist.all_reduce(t)
        bad = (t != expected).nonzero()
        if len(bad):
            problems.append(f"rank {rank}: all_reduce {dtype} [{t.numel()}]: {len(bad)} elements "
                            f"are {t[int(bad[0])].item()}, fp32-once gives {expected.item()}")
    return problems


def test_half_precision_rounds_once(dist_pool, backend):
    if backend == "gloo":
        pytest.skip("gloo rounds float16/bfloat16 partial sums to 16 bits at every ring hop")
    results = dist_pool(4).run(w_half_rounds_once)
    problems = [p for per_rank in results for p in per_rank]
    assert not problems, "\n".join(problems)


# Where the algorithm meets every rank's input in one kernel call (direct and single-copy
# algorithms, a ring of two), float16 and bfloat16 travel as they are and the kernel adds in
# float32; elsewhere (a longer ring; PREMUL_SUM and AVG) they reduce in a float32 copy. Either way
# the result must be the float32 reduction rounded once. The inputs make that reduction exact in
# float32 in any order (at most 8 or 11 significant bits, magnitudes 2^-6 to 16: every sum of
# three needs fewer than 24 bits), while most sums need more bits than 16-bit types hold: a
# rounding per step shows.
HALF_SIZES = {"direct": 8, "ring or single copy": 300_001}  # 600 KB: above 256 KiB


def _half_input(rank, numel, dtype):
    g = torch.Generator().manual_seed(1000 + rank)
    magnitude = torch.exp2(torch.randint(-6, 4, (numel,), generator=g).float())
    values = magnitude * (1 + torch.rand(numel, generator=g)) * (torch.randint(0, 2, (numel,),
                                                                               generator=g) * 2 - 1)
    return values.to(dtype)


def w_half_types_as_they_are(rank, ws):
    warnings.simplefilter("ignore", FutureWarning)
    problems = []
    ops = {"SUM": dist.ReduceOp.SUM, "MAX": dist.ReduceOp.MAX, "AVG": dist.ReduceOp.AVG}
    for dtype in (torch.bfloat16, torch.float16):
        for case, numel in HALF_SIZES.items():
            inputs = [_half_input(r, numel, dtype) for r in range(ws)]
            wide = [x.float() for x in inputs]
            exact = {"SUM": functools.reduce(torch.add, wide),
                     "MAX": functools.reduce(torch.maximum, wide)}
            exact["AVG"] = exact["SUM"] / ws
            for name, op in ops.items():
                expected = exact[name].to(dtype)

                def check(what, got, want):
                    wrong = (got != want).nonzero()
                    if len(wrong):
                        i = int(wrong[0])
                        problems.append(
                            f"rank {rank}: {what} {dtype} {name} [{numel}, {case}]: "
                            f"{len(wrong)}/{got.numel()} elements wrong, e.g. [{i}] = "
                            f"{got[i].item()}, float32 rounded once gives {want[i].item()}")

                t = inputs[rank].clone()
                dist.all_reduce(t, op=op)
                check("all_reduce", t, expected)
                # A strided view: staged into a contiguous buffer and back.
                guarded = torch.full((numel, 2), -7.0, dtype=dtype)
                guarded[:, 0] = inputs[rank]
                dist.all_reduce(guarded[:, 0], op=op)
                check("all_reduce (strided)", guarded[:, 0], expected)
                if not torch.all(guarded[:, 1] == -7.0):
                    problems.append(f"rank {rank}: all_reduce {dtype} wrote between strides")
                blocks = torch.cat([inputs[(rank + k) % ws] for k in range(ws)])
                out = torch.empty(numel, dtype=dtype)
                dist.reduce_scatter_tensor(out, blocks, op=op)
                # Block b of rank r is inputs[(r + b) % ws]: block `rank` of every rank r is
                # inputs[(r + rank) % ws], so the reduction is over all inputs.
                check("reduce_scatter_tensor", out, expected)
                if name != "AVG":  # reduce with AVG is not a c10d op on every backend
                    t = inputs[rank].clone()
                    dist.reduce(t, dst=ws - 1, op=op)
                    if rank == ws - 1:
                        check("reduce", t, expected)
                    elif not torch.equal(t, inputs[rank]):
                        problems.append(f"rank {rank}: reduce {dtype} changed a non-root input")
    return problems


@pytest.mark.parametrize("transport", ["auto", "tcp"])
@pytest.mark.parametrize("world_size", [2, 3])
def test_half_types_reduce_to_the_float32_result_rounded_once(dist_pool, backend, world_size,
                                                               transport):
    if backend == "gloo":
        pytest.skip("gloo rounds float16/bfloat16 partial sums to 16 bits at every ring hop")
    pool = dist_pool(world_size, env={"OCCL_TRANSPORT": transport})
    problems = [p for per_rank in pool.run(w_half_types_as_they_are) for p in per_rank]
    assert not problems, "\n".join(problems[:20])


# Every 16-bit pattern, and 13 more: a tail shorter than any vector of the kernel.
HALF_PATTERNS = 65536 + 13
# Rank 1's value in each round, against rank 0's every pattern: zeros, denormals, the extremes,
# infinities and NaNs of both signs (quiet, signalling, with payloads), and plain numbers.
FLOAT16_OTHERS = (0x0000, 0x8000, 0x0001, 0x8001, 0x03FF, 0x0400, 0x3C00, 0xBC00, 0x7BFF,
                  0xFBFF, 0x7C00, 0xFC00, 0x7E00, 0xFE00, 0x7C01, 0xFC01, 0x7FFF, 0x3555,
                  0x1234, 0xABCD, 0x0010)
# The same for bfloat16, with the smallest normals of both signs, whose sums with denormals
# are denormal again.
BFLOAT16_OTHERS = (0x0000, 0x8000, 0x0001, 0x8001, 0x007F, 0x0080, 0x8080, 0x00FF, 0x807F,
                   0x3F80, 0xBF80, 0x3F81, 0x7F7F, 0xFF7F, 0x7F80, 0xFF80, 0x7FC0, 0xFFC0,
                   0x7F81, 0xFFC1, 0x1234, 0xABCD)
HALF_OPS = ("SUM", "PRODUCT", "MIN", "MAX")
# Per half type: the variable that sets its kernel's width, each rank's width on two and on
# three ranks (every width the kernel has, where the CPU has it: float16's 32 lanes take two
# sources only), and rank 1's values.
HALF_KERNELS = {
    "float16": ("OCCL_FLOAT16_LANES", {2: ("32", "1"), 3: ("16", "8", "1")}, FLOAT16_OTHERS),
    "bfloat16": ("OCCL_BFLOAT16_LANES", {2: ("32", "1"), 3: ("32", "1", "32")}, BFLOAT16_OTHERS),
}


def _fold_in_rank_order(op, inputs):
    """The kernel's arithmetic in the inputs' dtype, in rank order: x86 gives a NaN result the
    first NaN operand's payload, which the kernel keeps in a + b and a * b by pairing a NaN `a`
    with itself; MIN and MAX are std::min and std::max; integers wrap around."""
    acc = inputs[0]
    for b in inputs[1:]:
        if acc.is_floating_point() and op in ("SUM", "PRODUCT"):
            b = torch.where(acc.isnan(), acc, b)
        if op == "SUM":
            acc = acc + b
        elif op == "PRODUCT":
            acc = acc * b
        elif op == "MIN":
            acc = torch.where(b < acc, b, acc)
        elif op == "MAX":
            acc = torch.where(acc < b, b, acc)
        else:
            acc = {"BAND": acc & b, "BOR": acc | b, "BXOR": acc ^ b}[op]
    return acc


def _fold_in_float32(op, inputs):
    return _fold_in_rank_order(op, [x.float() for x in inputs])


def _bfloat16_bits_as_c10_rounds(values):
    """c10's float -> bfloat16, in integers: round to nearest even, every NaN 0x7FC0."""
    bits = values.view(torch.int32).to(torch.int64) & 0xFFFFFFFF
    rounded = (bits + 0x7FFF + ((bits >> 16) & 1)) >> 16
    return torch.where(values.isnan(), 0x7FC0, rounded).to(torch.int16)


def _note_result(bits, wrong, digests, problems, describe):
    """Keeps a digest of a result's bits; where `wrong` holds anywhere, describe(first index,
    how many) among the problems."""
    digests.append(hashlib.sha1(bits.numpy().tobytes()).hexdigest())
    if wrong.any():
        problems.append(describe(int(wrong.nonzero()[0]), int(wrong.sum())))


def _digests_of_ranks_with_own_kernels(world_size, rank_env, worker, *args):
    """Runs `worker` (which returns digests and problems, _note_result) on ranks that each reduce
    every element themselves (the direct algorithm: each gets every input) with their own kernel
    settings; fails on any problem, else returns every rank's digests."""
    with DistPool(world_size, "occl", env={"OCCL_DIRECT_ALLREDUCE_MAX_BYTES": str(1 << 20)},
                  rank_env=rank_env) as pool:
        results = pool.run(worker, *args, timeout=600)
    problems = [p for _, rank_problems in results for p in rank_problems]
    assert not problems, "\n".join(problems[:20])
    return [rank_digests for rank_digests, _ in results]


def w_half_kernels(rank, world_size, dtype_name):
    """all_reduce of every bit pattern of a half type on ranks whose kernels use different
    instructions: per round and op, a digest of this rank's result's bits, and
    what differs from the float32 result rounded once. For float16 the reference is torch's
    rounding and NaNs compare as NaNs (c10 writes its own, torch keeps payloads); for bfloat16
    it is c10's rounding written out above, and every bit counts."""
    dtype = getattr(torch, dtype_name)
    index = torch.arange(HALF_PATTERNS, dtype=torch.int64)
    as_half = lambda bits: (bits & 0xFFFF).to(torch.int16).view(dtype)  # noqa: E731
    digests, problems = [], []
    for other in HALF_KERNELS[dtype_name][2]:
        inputs = [as_half(index), as_half(torch.full_like(index, other)),
                  as_half(index * 7919)][:world_size]
        for op in HALF_OPS:
            tensor = inputs[rank].clone()
            dist.all_reduce(tensor, op=getattr(dist.ReduceOp, op))
            bits = tensor.view(torch.int16)
            exact = _fold_in_float32(op, inputs)
            if dtype == torch.bfloat16:
                wrong = bits != _bfloat16_bits_as_c10_rounds(exact)
            else:
                expected = exact.half()
                wrong = ~(tensor.isnan() & expected.isnan()) & (bits != expected.view(torch.int16))
            _note_result(bits, wrong, digests, problems, lambda i, n: (
                f"rank {rank}, {op} against {other:#06x}: {n} elements differ, first [{i}]: "
                f"{int(index[i]):#06x} gave {int(bits[i]) & 0xFFFF:#06x} "
                f"(float32 result {exact[i].item()})"))
    return digests, problems


@occl_only("occl's kernel widths (OCCL_FLOAT16_LANES, OCCL_BFLOAT16_LANES)")
@pytest.mark.parametrize("world_size", [2, 3])
@pytest.mark.parametrize("dtype_name", list(HALF_KERNELS))
def test_half_type_kernels_of_every_width_give_the_same_bits(dtype_name, world_size):
    # Every rank reduces every element itself (the direct algorithm: each gets every input),
    # each with its own kernel width.
    variable, widths, others = HALF_KERNELS[dtype_name]
    digests = _digests_of_ranks_with_own_kernels(
        world_size, {r: {variable: n} for r, n in enumerate(widths[world_size])},
        w_half_kernels, dtype_name)
    rounds = [(hex(o), op) for o in others for op in HALF_OPS]
    differ = [rounds[k] for k in range(len(rounds)) if len({d[k] for d in digests}) > 1]
    assert not differ, f"the ranks' results differ in {differ}"


# Bit patterns that the reduction loops must treat alike in every width: both zeros, the
# smallest and largest denormals and normals, infinities, NaNs of both signs (quiet, signalling,
# with payloads), and plain numbers; integers at their limits.
WIDTH_PATTERNS = {
    torch.float32: (0x00000000, 0x80000000, 0x00000001, 0x807FFFFF, 0x00800000, 0x7F7FFFFF,
                    0xFF7FFFFF, 0x7F800000, 0xFF800000, 0x7FC00000, 0xFFC00001, 0x7F800001,
                    0x7FA00005, 0x3F800000, 0xBFC00000, 0x40490FDB),
    torch.float64: (0x0, 0x8000000000000000, 0x1, 0x800FFFFFFFFFFFFF, 0x0010000000000000,
                    0x7FEFFFFFFFFFFFFF, 0xFFEFFFFFFFFFFFFF, 0x7FF0000000000000,
                    0xFFF0000000000000, 0x7FF8000000000000, 0xFFF8000000000001,
                    0x7FF0000000000001, 0x7FF4000000000005, 0x3FF0000000000000,
                    0xBFF8000000000000, 0x400921FB54442D18),
    torch.int32: (0, 1, -1, 2, -2, 3, 0x7FFFFFFF, -0x80000000, 0x55555555, -0x55555556, 1000003,
                  -77, 65536, 0x7FFF, -0x8000, 12345678),
    torch.int8: (0, 1, -1, 2, -2, 3, 127, -128, 0x55, -0x56, 100, -77, 16, 15, -16, 64),
}
WIDTH_BITS = {torch.float32: torch.int32, torch.float64: torch.int64}


# Rank r's input: the 16 patterns in every combination with three ranks' (16 ** 3 elements), then
# 13 random values, a tail that no vector of either width covers evenly.
def _width_input(rank, dtype):
    bits = WIDTH_BITS.get(dtype, dtype)
    width = torch.iinfo(bits).bits
    signed = [(p + 2 ** (width - 1)) % 2 ** width - 2 ** (width - 1) for p in WIDTH_PATTERNS[dtype]]
    patterns = torch.tensor(signed, dtype=bits)
    index = torch.arange(16 ** 3)
    head = patterns[(index // 16 ** rank) % 16].view(dtype)
    generator = torch.Generator().manual_seed(rank)
    if dtype.is_floating_point:
        tail = torch.randn(13, generator=generator, dtype=dtype)
    else:
        tail = torch.randint(-100, 100, (13,), generator=generator, dtype=dtype)
    return torch.cat([head, tail])


def w_loop_widths(rank, world_size):
    """all_reduce of every combination of WIDTH_PATTERNS on ranks whose loops differ in width:
    per dtype and op, a digest of this rank's result's bits, and what differs from the fold in
    Python."""
    digests, problems = [], []
    for dtype in WIDTH_PATTERNS:
        inputs = [_width_input(r, dtype) for r in range(world_size)]
        ops = ("SUM", "PRODUCT", "MIN", "MAX") + (
            ("AVG",) if dtype.is_floating_point else BITWISE)
        for op in ops:
            tensor = inputs[rank].clone()
            dist.all_reduce(tensor, op=getattr(dist.ReduceOp, op))
            expected = _fold_in_rank_order("SUM" if op == "AVG" else op, inputs)
            if op == "AVG":
                expected = expected / world_size
            bits = WIDTH_BITS.get(dtype, dtype)
            actual, wanted = tensor.view(bits), expected.view(bits)
            unsigned = 2 ** torch.iinfo(bits).bits - 1
            _note_result(actual, actual != wanted, digests, problems, lambda i, n: (
                f"rank {rank}, {dtype} {op}: {n} elements differ, first [{i}]: "
                f"{int(actual[i]) & unsigned:#x}, expected {int(wanted[i]) & unsigned:#x}"))
    return digests, problems


@occl_only("occl's loop widths (OCCL_WIDE_LOOPS_MIN_BYTES)")
@pytest.mark.parametrize("world_size", [2, 3])
def test_reduction_loops_of_both_widths_give_the_same_bits(world_size):
    # Every rank reduces every element itself (the direct algorithm), rank 1 in AVX2's loops,
    # the others in AVX-512's where the CPU has them; the three-rank fold takes the loop over
    # blocks.
    widths = {r: {"OCCL_WIDE_LOOPS_MIN_BYTES": str(1 << 62) if r == 1 else "0"}
              for r in range(world_size)}
    digests = _digests_of_ranks_with_own_kernels(world_size, widths, w_loop_widths)
    assert all(d == digests[0] for d in digests), "the ranks' results differ"
