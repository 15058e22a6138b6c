"""Correctness of the extended-tier collectives across world sizes, dtypes, reduce ops and sizes.

Same scheme as test_collectives.py (whose helpers this file reuses): one `pool.run` per
(world size, op); the worker loops over every dtype x reduce op x case and returns failure
strings. Expected values are computed on every rank from all ranks' deterministic inputs with
plain torch ops, never with the backend.

Ops (c10d method <- Python API):
  reduce                          <- dist.reduce (non-root tensors must stay untouched)
  allreduce_coalesced             <- dist.all_reduce_coalesced, and all_reduce calls inside
                                     dist._coalescing_manager
  allgather_coalesced             <- dist.all_gather_coalesced
  allgather_into_tensor_coalesced <- all_gather_into_tensor inside dist._coalescing_manager
  reduce_scatter_tensor_coalesced <- reduce_scatter_tensor inside dist._coalescing_manager
  gather / scatter                <- dist.gather / dist.scatter (every root)
  alltoall_base                   <- dist.all_to_all_single (equal and uneven splits)
  alltoall                        <- dist.all_to_all (sizes differ per peer, some empty)
(_allgather_base, _reduce_scatter_base and barrier are covered by test_collectives.py; the
functional-collective paths by test_stacks.py; send/recv by test_p2p.py.)

With OCCL_TEST_BACKEND=gloo the combinations gloo rejects are skipped (see test_collectives.py),
as are the cases listed in GLOO_SKIPS.
"""

from __future__ import annotations

import warnings

import pytest
import torch
import torch.distributed as dist

from test_collectives import (
    CASES,
    DTYPES,
    LARGE,
    REDUCE_OPS,
    _run_batch,
    combo_status,
    fresh_output,
    make_op,
    make_values,
    place,
    reduce_expected,
    run_and_assert_no_failures,
    value_kind,
)

WORLD_SIZES = [1, 2, 3, 4]
RUN_TIMEOUT = 180

# (dtype, reduce op) combinations that also run at LARGE (~1e6) elements.
LARGE_REDUCE_COMBOS = {
    (torch.float32, "SUM"),
    (torch.bfloat16, "AVG"),
    (torch.int32, "MAX"),
    (torch.float64, "PREMUL_SUM(tensor)"),
}
LARGE_COPY_DTYPES = {torch.float32, torch.uint8}

# Cases gloo (2.13) cannot run; skipped with OCCL_TEST_BACKEND=gloo only (occl must pass them).
GLOO_SKIPS = {
    ("reduce", "non_root_untouched"),  # gloo uses non-root tensors as scratch space
    ("reduce", "strided"),  # gloo writes a non-contiguous view as if it were contiguous
    ("scatter", "strided"),  # same, for the output
    ("alltoall_base", "strided"),  # gloo: "Tensors must be contiguous"
    ("alltoall_base", "transposed"),
    ("alltoall", "uneven"),  # gloo: every tensor must have the same size
}


def _skip(backend, op, what):
    return backend != "occl" and (op, what) in GLOO_SKIPS


def _cases(dtype, opname=None, large_combos=(), large_dtypes=()):
    cases = list(CASES)
    if (dtype, opname) in large_combos or (opname is None and dtype in large_dtypes):
        cases.append(("contig", (LARGE,)))
    return cases


def _status(backend, opname, dtype):
    return combo_status(backend, opname, dtype)


# ---------------------------------------------------------------------------------------------
# Reductions: reduce, allreduce_coalesced, reduce_scatter_tensor_coalesced
# ---------------------------------------------------------------------------------------------


def w_reduce(rank, ws, backend):
    def body(fails):
        for di, dtype in enumerate(DTYPES):
            for oi, opname in enumerate(REDUCE_OPS):
                status = _status(backend, opname, dtype)
                what = f"reduce {dtype} {opname}"
                if status == "skip":
                    continue
                if status == "reject":
                    fails.expect_rejection(
                        what,
                        lambda: dist.reduce(torch.ones(5, dtype=dtype), dst=ws - 1,
                                            op=make_op(opname, dtype)),
                        "reduce", "tensors[0]", dtype, opname)
                    continue
                kind = value_kind(opname, dtype)
                for ci, (layout, shape) in enumerate(_cases(dtype, opname, LARGE_REDUCE_COMBOS)):
                    if _skip(backend, "reduce", layout):
                        continue
                    root = (di + oi + ci) % ws  # every root comes up
                    w = f"{what} root={root} {layout}{list(shape)}"
                    inputs = [make_values(r, shape, dtype, kind, "red") for r in range(ws)]
                    t, guard = place(inputs[rank], layout)
                    try:
                        dist.reduce(t, dst=root, op=make_op(opname, dtype))
                    except Exception as e:  # noqa: BLE001
                        fails.exception(w, e)
                        continue
                    if rank == root:
                        fails.compare(w, t, reduce_expected(inputs, opname, dtype, ws), guard)
                    elif not _skip(backend, "reduce", "non_root_untouched"):
                        fails.compare(f"{w} non-root tensor (must be untouched)", t,
                                      inputs[rank], guard)
    return _run_batch(rank, body)


def w_allreduce_coalesced(rank, ws, backend):
    """One coalesced call per (dtype, op) holding every case; then the same through
    dist._coalescing_manager (all_reduce calls captured and issued as one allreduce_coalesced)."""

    def body(fails):
        for dtype in DTYPES:
            for opname in REDUCE_OPS:
                status = _status(backend, opname, dtype)
                what = f"all_reduce_coalesced {dtype} {opname}"
                if status == "skip":
                    continue
                if status == "reject":
                    fails.expect_rejection(
                        what,
                        lambda: dist.all_reduce_coalesced(
                            [torch.ones(5, dtype=dtype), torch.ones(3, dtype=dtype)],
                            op=make_op(opname, dtype)),
                        "allreduce_coalesced", "tensors[0]", dtype, opname)
                    continue
                kind = value_kind(opname, dtype)
                cases = [c for c in _cases(dtype, opname, LARGE_REDUCE_COMBOS)
                         if not _skip(backend, "allreduce_coalesced", c[0])]
                for form in ("api", "coalescing_manager"):
                    w = f"{what} via {form}"
                    inputs = [[make_values(r, shape, dtype, kind, f"arc{i}")
                               for i, (_, shape) in enumerate(cases)] for r in range(ws)]
                    placed = [place(x, layout) for x, (layout, _) in zip(inputs[rank], cases)]
                    tensors = [p for p, _ in placed]
                    try:
                        if form == "api":
                            dist.all_reduce_coalesced(tensors, op=make_op(opname, dtype))
                        else:
                            with dist._coalescing_manager(async_ops=True) as cm:
                                for t in tensors:
                                    dist.all_reduce(t, op=make_op(opname, dtype))
                            cm.wait()
                    except Exception as e:  # noqa: BLE001
                        fails.exception(w, e)
                        continue
                    for i, ((layout, shape), (t, g)) in enumerate(zip(cases, placed)):
                        expected = reduce_expected([inputs[r][i] for r in range(ws)],
                                                   opname, dtype, ws)
                        fails.compare(f"{w} tensors[{i}] {layout}{list(shape)}", t, expected, g)
    return _run_batch(rank, body)


def w_reduce_scatter_tensor_coalesced(rank, ws, backend):
    """reduce_scatter_tensor calls inside dist._coalescing_manager become one
    reduce_scatter_tensor_coalesced; every case of a (dtype, op) in one call."""

    def body(fails):
        for dtype in DTYPES:
            for opname in REDUCE_OPS:
                status = _status(backend, opname, dtype)
                what = f"reduce_scatter_tensor_coalesced {dtype} {opname}"
                if status == "skip":
                    continue
                if status == "reject":
                    def bad():
                        with dist._coalescing_manager():
                            dist.reduce_scatter_tensor(
                                torch.ones(5, dtype=dtype), torch.ones(5 * ws, dtype=dtype),
                                op=make_op(opname, dtype))
                    fails.expect_rejection(what, bad, "reduce_scatter_tensor_coalesced",
                                           "outputs[0]", dtype, opname)
                    continue
                kind = value_kind(opname, dtype)
                cases = list(CASES)
                if (dtype, opname) in LARGE_REDUCE_COMBOS:
                    cases.append(("contig", (LARGE // ws + 1,)))
                # chunks[r][i][j]: rank r's contribution to rank j's output of case i
                chunks = [[[make_values(r, shape, dtype, kind, f"rstc{i}.{j}") for j in range(ws)]
                           for i, (_, shape) in enumerate(cases)] for r in range(ws)]
                ins, outs = [], []
                for i, (layout, shape) in enumerate(cases):
                    full = torch.cat([c.reshape(-1) for c in chunks[rank][i]]).reshape(
                        (ws * shape[0],) + tuple(shape[1:]))
                    ins.append(place(full, layout))
                    outs.append(fresh_output(shape, dtype, layout))
                try:
                    with dist._coalescing_manager(async_ops=True) as cm:
                        for (inp, _), (out, _) in zip(ins, outs):
                            dist.reduce_scatter_tensor(out, inp, op=make_op(opname, dtype))
                    cm.wait()
                except Exception as e:  # noqa: BLE001
                    fails.exception(what, e)
                    continue
                for i, (layout, shape) in enumerate(cases):
                    # Rank `rank` receives block `rank` of every rank's input, reduced.
                    got = outs[i][0]
                    expected = reduce_expected([chunks[r][i][rank] for r in range(ws)],
                                               opname, dtype, ws)
                    fails.compare(f"{what} outputs[{i}] {layout}{list(shape)}", got, expected,
                                  outs[i][1])
                    if ins[i][1]():
                        fails.add(f"{what} inputs[{i}]: {ins[i][1]()}")
    return _run_batch(rank, body)


# ---------------------------------------------------------------------------------------------
# Copies: allgather_coalesced, allgather_into_tensor_coalesced, gather, scatter, alltoall(_base)
# ---------------------------------------------------------------------------------------------


def _copy_dtypes(backend):
    return [d for d in DTYPES if combo_status(backend, None, d) != "skip"]


def w_allgather_coalesced(rank, ws, backend):
    def body(fails):
        for dtype in _copy_dtypes(backend):
            cases = [c for c in _cases(dtype, large_dtypes=LARGE_COPY_DTYPES)
                     if not _skip(backend, "allgather_coalesced", c[0])]
            w = f"all_gather_coalesced {dtype}"
            inputs = [[make_values(r, shape, dtype, "bits", f"agc{i}")
                       for i, (_, shape) in enumerate(cases)] for r in range(ws)]
            ins = [place(x, layout) for x, (layout, _) in zip(inputs[rank], cases)]
            outs = [[fresh_output(shape, dtype, layout) for layout, shape in cases]
                    for _ in range(ws)]
            try:
                dist.all_gather_coalesced([[o for o, _ in row] for row in outs],
                                          [t for t, _ in ins])
            except Exception as e:  # noqa: BLE001
                fails.exception(w, e)
                continue
            for r in range(ws):
                for i, (layout, shape) in enumerate(cases):
                    fails.compare(f"{w} output_tensor_lists[{r}][{i}] {layout}{list(shape)}",
                                  outs[r][i][0], inputs[r][i], outs[r][i][1])
            for i, (t, g) in enumerate(ins):
                fails.compare(f"{w} input[{i}] (must be unchanged)", t, inputs[rank][i], g)
    return _run_batch(rank, body)


def w_allgather_into_tensor_coalesced(rank, ws, backend):
    def body(fails):
        for dtype in _copy_dtypes(backend):
            cases = _cases(dtype, large_dtypes={torch.float16})
            for async_ops in (True, False):
                w = f"all_gather_into_tensor x{len(cases)} in _coalescing_manager " \
                    f"(async_ops={async_ops}) {dtype}"
                inputs = [[make_values(r, shape, dtype, "bits", f"agtc{i}")
                           for i, (_, shape) in enumerate(cases)] for r in range(ws)]
                ins = [place(x, layout) for x, (layout, _) in zip(inputs[rank], cases)]
                expected = [torch.cat([inputs[r][i] for r in range(ws)])
                            for i in range(len(cases))]
                outs = [fresh_output(tuple(e.shape), dtype, layout)
                        for e, (layout, _) in zip(expected, cases)]
                try:
                    with dist._coalescing_manager(async_ops=async_ops) as cm:
                        for (o, _), (t, _) in zip(outs, ins):
                            dist.all_gather_into_tensor(o, t)
                    if async_ops:
                        cm.wait()
                except Exception as e:  # noqa: BLE001
                    fails.exception(w, e)
                    continue
                for i, (layout, shape) in enumerate(cases):
                    fails.compare(f"{w} outputs[{i}] {layout}{list(shape)}", outs[i][0],
                                  expected[i], outs[i][1])
                    fails.compare(f"{w} inputs[{i}] (must be unchanged)", ins[i][0],
                                  inputs[rank][i], ins[i][1])
    return _run_batch(rank, body)


def w_gather(rank, ws, backend):
    def body(fails):
        for di, dtype in enumerate(_copy_dtypes(backend)):
            for ci, (layout, shape) in enumerate(
                    _cases(dtype, large_dtypes=LARGE_COPY_DTYPES)):
                if _skip(backend, "gather", layout):
                    continue
                root = (di + ci) % ws
                w = f"gather {dtype} root={root} {layout}{list(shape)}"
                inputs = [make_values(r, shape, dtype, "bits", "ga") for r in range(ws)]
                inp, in_guard = place(inputs[rank], layout)
                outs = [fresh_output(shape, dtype, layout) for _ in range(ws)] \
                    if rank == root else None
                try:
                    dist.gather(inp, [o for o, _ in outs] if outs else None, dst=root)
                except Exception as e:  # noqa: BLE001
                    fails.exception(w, e)
                    continue
                if outs:
                    for r, (o, g) in enumerate(outs):
                        fails.compare(f"{w} gather_list[{r}]", o, inputs[r], g)
                fails.compare(f"{w} input (must be unchanged)", inp, inputs[rank], in_guard)
    return _run_batch(rank, body)


def w_scatter(rank, ws, backend):
    def body(fails):
        for di, dtype in enumerate(_copy_dtypes(backend)):
            for ci, (layout, shape) in enumerate(
                    _cases(dtype, large_dtypes=LARGE_COPY_DTYPES)):
                if _skip(backend, "scatter", layout):
                    continue
                root = (di + ci + 1) % ws
                w = f"scatter {dtype} root={root} {layout}{list(shape)}"
                # The root's scatter_list[j] is what rank j receives.
                pieces = [make_values(j, shape, dtype, "bits", f"sc{root}") for j in range(ws)]
                ins = [place(p, layout) for p in pieces] if rank == root else None
                out, out_guard = fresh_output(shape, dtype, layout)
                try:
                    dist.scatter(out, [t for t, _ in ins] if ins else None, src=root)
                except Exception as e:  # noqa: BLE001
                    fails.exception(w, e)
                    continue
                fails.compare(w, out, pieces[rank], out_guard)
                if ins:
                    for j, (t, g) in enumerate(ins):
                        fails.compare(f"{w} scatter_list[{j}] (must be unchanged)", t,
                                      pieces[j], g)
    return _run_batch(rank, body)


# alltoall_base cases: (name, rest shape of a row, layout)
A2A_ROW_SHAPES = [("scalar rows", (), "contig"), ("rows of 5", (5,), "contig"),
                  ("rows of 7, strided", (7,), "strided"),
                  ("rows of 3, transposed", (3,), "transposed")]


def _uneven_splits(ws, salt):
    """S[r][j]: rows rank r sends to rank j (0..3, some zero)."""
    return [[(r * 7 + j * 3 + salt) % 4 for j in range(ws)] for r in range(ws)]


def w_alltoall_base(rank, ws, backend):
    def body(fails):
        for di, dtype in enumerate(_copy_dtypes(backend)):
            split_kinds = ["equal", "equal_explicit", "uneven", "empty"]
            if dtype in LARGE_COPY_DTYPES:
                split_kinds.append("large")
            for si, splits in enumerate(split_kinds):
                for name, rest, layout in A2A_ROW_SHAPES:
                    if _skip(backend, "alltoall_base", layout):
                        continue
                    if layout == "transposed" and rest != (3,):
                        continue
                    if splits == "large" and rest != ():
                        continue
                    if splits in ("equal", "equal_explicit"):
                        k = 3
                        S = [[k] * ws for _ in range(ws)]
                    elif splits == "empty":
                        S = [[0] * ws for _ in range(ws)]
                    elif splits == "large":
                        S = [[(LARGE // ws) + (r + j) % 2 for j in range(ws)] for r in range(ws)]
                    else:
                        S = _uneven_splits(ws, di + si)
                    w = f"all_to_all_single {dtype} {splits} splits {name}"
                    rows = [sum(S[r]) for r in range(ws)]
                    inputs = [make_values(r, (rows[r],) + rest, dtype, "bits", "a2a")
                              for r in range(ws)]
                    # Rank `rank` gets, from each rank j, rows [off, off + S[j][rank]) of j's
                    # input, where off = sum(S[j][:rank]).
                    expected = torch.cat([
                        inputs[j][sum(S[j][:rank]):sum(S[j][:rank]) + S[j][rank]]
                        for j in range(ws)])
                    # A (rows, 3) .t() view of fewer than 2 rows is contiguous: place() refuses.
                    in_layout = "contig" if layout == "transposed" and rows[rank] < 2 \
                        else layout
                    inp, in_guard = place(inputs[rank], in_layout)
                    out_layout = "strided" if layout == "transposed" else layout
                    out, out_guard = fresh_output(tuple(expected.shape), dtype, out_layout)
                    if splits in ("equal", "empty"):  # no split sizes: equal splits
                        in_splits = out_splits = None
                    else:
                        in_splits = S[rank]
                        out_splits = [S[j][rank] for j in range(ws)]
                    try:
                        dist.all_to_all_single(out, inp, output_split_sizes=out_splits,
                                               input_split_sizes=in_splits)
                    except Exception as e:  # noqa: BLE001
                        fails.exception(w, e)
                        continue
                    fails.compare(w, out, expected, out_guard)
                    fails.compare(f"{w} input (must be unchanged)", inp, inputs[rank], in_guard)
    return _run_batch(rank, body)


def w_alltoall(rank, ws, backend):
    """all_to_all with a tensor per peer whose size depends on (sender, receiver)."""

    def numel(src, dst, salt):
        if salt is None:  # every peer the same size
            return 23
        return (src * 5 + dst * 3 + salt) % 6 * 7  # 0..35, some peers send nothing

    def body(fails):
        for di, dtype in enumerate(_copy_dtypes(backend)):
            for layout in ("contig", "strided"):
                if _skip(backend, "alltoall", layout):
                    continue
                for salt in (di, di + 1, None):
                    if salt is not None and _skip(backend, "alltoall", "uneven"):
                        continue
                    w = f"all_to_all {dtype} {layout} salt={salt}"
                    # sent[src][dst]: what src sends to dst
                    sent = [[make_values(s, (numel(s, d, salt),), dtype, "bits", f"a2al{d}")
                             for d in range(ws)] for s in range(ws)]
                    ins = [place(t, layout) for t in sent[rank]]
                    outs = [fresh_output((numel(s, rank, salt),), dtype, layout)
                            for s in range(ws)]
                    try:
                        dist.all_to_all([o for o, _ in outs], [t for t, _ in ins])
                    except Exception as e:  # noqa: BLE001
                        fails.exception(w, e)
                        continue
                    for s, (o, g) in enumerate(outs):
                        fails.compare(f"{w} output_tensor_list[{s}]", o, sent[s][rank], g)
                    for d, (t, g) in enumerate(ins):
                        fails.compare(f"{w} input_tensor_list[{d}] (must be unchanged)", t,
                                      sent[rank][d], g)
    return _run_batch(rank, body)


WORKERS = {
    "reduce": w_reduce,
    "all_reduce_coalesced": w_allreduce_coalesced,
    "reduce_scatter_tensor_coalesced": w_reduce_scatter_tensor_coalesced,
    "all_gather_coalesced": w_allgather_coalesced,
    "all_gather_into_tensor_coalesced": w_allgather_into_tensor_coalesced,
    "gather": w_gather,
    "scatter": w_scatter,
    "all_to_all_single": w_alltoall_base,
    "all_to_all": w_alltoall,
}


@pytest.mark.parametrize("collective", list(WORKERS))
@pytest.mark.parametrize("occl_pool", WORLD_SIZES, indirect=True, ids=lambda n: f"ws{n}")
def test_extended_collective(occl_pool, collective, backend):
    run_and_assert_no_failures(occl_pool, WORKERS[collective], collective, backend)


# Ranks on one host copy every alltoall slice of at least OCCL_SINGLE_COPY_MIN_BYTES straight out
# of the sender's tensor and pass smaller ones through shared memory, decided pair by pair: at
# 40 bytes the uneven splits above mix both kinds in one call.
@pytest.mark.parametrize("collective", ["all_to_all_single", "all_to_all"])
@pytest.mark.parametrize("world_size", [2, 3], ids=lambda n: f"ws{n}")
def test_alltoall_mixes_single_copy_and_rings(dist_pool, backend, world_size, collective):
    if backend != "occl":
        pytest.skip("occl tuning variables")
    pool = dist_pool(world_size, env={"OCCL_SINGLE_COPY_MIN_BYTES": "40"})
    run_and_assert_no_failures(pool, WORKERS[collective], collective, backend)


def _all_to_all_in_place(rank, world_size):
    """all_to_all whose output list is its input list: every tensor is sent and then overwritten
    (the sends read the inputs where they lie, so they must first be set apart). Whether each
    tensor ends with what its sender meant for this rank."""
    count = 1 << 17  # 512 KiB of float32 per peer: copied straight across on one host
    sent = [[torch.arange(count, dtype=torch.float32) + 1000 * s + d for d in range(world_size)]
            for s in range(world_size)]
    tensors = [t.clone() for t in sent[rank]]
    dist.all_to_all(tensors, tensors)
    return [torch.equal(tensors[s], sent[s][rank]) for s in range(world_size)]


@pytest.mark.parametrize("world_size", [2, 3], ids=lambda n: f"ws{n}")
def test_all_to_all_whose_outputs_are_its_inputs(dist_pool, backend, world_size):
    pool = dist_pool(world_size)
    assert pool.run(_all_to_all_in_place) == [[True] * world_size] * world_size


# ---------------------------------------------------------------------------------------------
# Async forms, futures, and mixing with the minimal tier
# ---------------------------------------------------------------------------------------------


def w_async_mix(rank, ws, backend):
    """Several extended ops in flight at once (async_op=True), waited in reverse order; their
    futures hold the output tensors."""
    problems = []
    n = 1000
    red = torch.full((n,), float(rank + 1))
    gat_in = torch.full((n,), float(rank))
    gat_out = [torch.zeros(n) for _ in range(ws)] if rank == 0 else None
    sc_out = torch.zeros(n)
    sc_in = [torch.full((n,), float(10 + j)) for j in range(ws)] if rank == ws - 1 else None
    a2a_in = torch.arange(ws * 4, dtype=torch.float64) + 100 * rank
    a2a_out = torch.zeros(ws * 4, dtype=torch.float64)
    arc = [torch.full((3,), float(rank)), torch.full((5,), 2.0)]
    works = [
        ("reduce", dist.reduce(red, dst=ws - 1, async_op=True)),
        ("gather", dist.gather(gat_in, gat_out, dst=0, async_op=True)),
        ("scatter", dist.scatter(sc_out, sc_in, src=ws - 1, async_op=True)),
        ("all_to_all_single", dist.all_to_all_single(a2a_out, a2a_in, async_op=True)),
    ]
    fut = dist.all_reduce_coalesced(arc, async_op=True)  # returns a Future
    for name, work in reversed(works):
        work.wait()
        if not work.is_completed():
            problems.append(f"rank {rank}: {name}: not completed after wait()")
    fut.wait()
    total = ws * (ws + 1) / 2
    if rank == ws - 1 and red.tolist() != [total] * n:
        problems.append(f"rank {rank}: reduce: got {red[:3].tolist()}")
    if rank != ws - 1 and red.tolist() != [float(rank + 1)] * n and \
            not _skip(backend, "reduce", "non_root_untouched"):
        problems.append(f"rank {rank}: reduce touched a non-root tensor: {red[:3].tolist()}")
    if rank == 0:
        for r, o in enumerate(gat_out):
            if o.tolist() != [float(r)] * n:
                problems.append(f"rank {rank}: gather[{r}]: got {o[:3].tolist()}")
    if sc_out.tolist() != [float(10 + rank)] * n:
        problems.append(f"rank {rank}: scatter: got {sc_out[:3].tolist()}")
    exp = torch.cat([torch.arange(rank * 4, rank * 4 + 4, dtype=torch.float64) + 100 * j
                     for j in range(ws)])
    if not torch.equal(a2a_out, exp):
        problems.append(f"rank {rank}: all_to_all_single: got {a2a_out.tolist()}")
    if arc[0].tolist() != [float(ws * (ws - 1) / 2)] * 3 or arc[1].tolist() != [2.0 * ws] * 5:
        problems.append(f"rank {rank}: all_reduce_coalesced: got {[a.tolist() for a in arc]}")
    fv = fut.value()
    if not (isinstance(fv, list) and len(fv) == 2 and fv[0].data_ptr() == arc[0].data_ptr()):
        problems.append(f"rank {rank}: all_reduce_coalesced future value is not the input "
                        f"tensors: {fv!r}"[:300])
    return problems


@pytest.mark.parametrize("occl_pool", [2, 3], indirect=True, ids=lambda n: f"ws{n}")
def test_async_extended_ops_in_flight(occl_pool, backend):
    problems = [p for per in occl_pool.run(w_async_mix, backend) for p in per]
    assert not problems, "\n".join(problems)


def w_half_rounds_once(rank, ws):
    """float16/bfloat16 reductions accumulate in float32 and round once for the whole
    collective: one big value (rank 0) plus (ws - 1) ones. Rounding partial sums to 16 bits at
    every step would lose the ones when the big value comes first."""
    warnings.simplefilter("ignore", FutureWarning)
    problems = []

    def bad(t, expected):
        """'' if every element equals expected, else a description of the first that does not."""
        wrong = (t != expected).nonzero()
        if not len(wrong):
            return ""
        i = int(wrong[0])
        return f"{len(wrong)}/{t.numel()} elements wrong, e.g. [{i}] = {t[i].item()}"

    for dtype, big in ((torch.bfloat16, 256.0), (torch.float16, 2048.0)):
        expected = torch.tensor([big] + [1.0] * (ws - 1)).sum().to(dtype)  # fp32, one rounding
        for n in (8, 50_000):  # small, and above 64 KiB
            mine = torch.full((n,), big if rank == 0 else 1.0, dtype=dtype)
            for root in range(ws):
                t = mine.clone()
                dist.reduce(t, dst=root)
                if rank == root and bad(t, expected):
                    problems.append(f"rank {rank}: reduce {dtype} [{n}] root={root}: "
                                    f"{bad(t, expected)}; fp32-once gives {expected.item()}")
            ts = [mine.clone(), mine[: n // 2].clone()]
            dist.all_reduce_coalesced(ts)
            for i, t in enumerate(ts):
                if bad(t, expected):
                    problems.append(f"rank {rank}: all_reduce_coalesced {dtype} [{t.numel()}] "
                                    f"tensors[{i}]: {bad(t, expected)}; fp32-once gives "
                                    f"{expected.item()}")
            out = torch.zeros(n, dtype=dtype)
            with dist._coalescing_manager(async_ops=True) as cm:
                dist.reduce_scatter_tensor(out, mine.repeat(ws))
            cm.wait()
            if bad(out, expected):
                problems.append(f"rank {rank}: reduce_scatter_tensor_coalesced {dtype} [{n}]: "
                                f"{bad(out, expected)}; fp32-once gives {expected.item()}")
    return problems


def test_half_precision_rounds_once_extended(dist_pool, backend):
    """reduce, allreduce_coalesced and reduce_scatter_tensor_coalesced on float16/bfloat16."""
    if backend != "occl":
        pytest.skip("gloo rounds per step")
    problems = [p for per in dist_pool(4).run(w_half_rounds_once) for p in per]
    assert not problems, "\n".join(problems[:40])


def w_identity_after_all(rank, ws):
    t = torch.full((3,), float(rank + 1))
    dist.all_reduce(t)
    return t.tolist()


@pytest.mark.parametrize("occl_pool", WORLD_SIZES, indirect=True, ids=lambda n: f"ws{n}")
def test_group_still_usable(occl_pool):
    results = occl_pool.run(w_identity_after_all)
    total = occl_pool.world_size * (occl_pool.world_size + 1) / 2
    assert results == [[total] * 3] * occl_pool.world_size
