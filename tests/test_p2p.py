"""Point-to-point: send/recv/isend/irecv (with tags), recv from any source, batch_isend_irecv.

World sizes 2, 3, 4 (p2p needs a peer). Expected values are built on every rank from the
deterministic inputs (test_collectives.make_values), never with the backend.

occl's send/recv are `dispatch: posted` in the spec: they start at once on the caller's thread
instead of queueing behind the group's collectives; test_p2p_not_queued_behind_collectives
depends on that. occl advertises supports_coalescing, so dist.batch_isend_irecv goes through
startCoalescing/endCoalescing (checked in test_batch_isend_irecv_ring).
"""

from __future__ import annotations

import os
import signal
import time

import pytest
import torch
import torch.distributed as dist

from dist_harness import DistPool, occl_only
from test_collectives import (
    CASES,
    DTYPES,
    _run_batch,
    combo_status,
    fresh_output,
    make_values,
    place,
)

WORLD_SIZES = [2, 3, 4]
RUN_TIMEOUT = 180
LARGE = 1_000_003
# gloo (2.13) send/recv need contiguous tensors ("Tensors must be contiguous" / wrong data).
GLOO_SKIPS = {"strided", "transposed"}


def _cases(backend, dtype):
    cases = [c for c in CASES if backend == "occl" or c[0] not in GLOO_SKIPS]
    if dtype in (torch.float32, torch.int64):
        cases.append(("contig", (LARGE,)))
    return cases


def _dtypes(backend):
    return [d for d in DTYPES if combo_status(backend, None, d) != "skip"]


def w_send_recv_pairs(rank, ws, backend):
    """Blocking send/recv between every ordered pair, one pair at a time, every dtype and case.
    Ranks outside the pair do nothing; the payload depends on (src, dst)."""

    def body(fails):
        for dtype in _dtypes(backend):
            for layout, shape in _cases(backend, dtype):
                for src in range(ws):
                    for dst in range(ws):
                        if src == dst or rank not in (src, dst):
                            continue
                        w = f"send/recv {dtype} {src}->{dst} {layout}{list(shape)}"
                        payload = make_values(src, shape, dtype, "bits", f"p2p{dst}")
                        try:
                            if rank == src:
                                t, g = place(payload, layout)
                                dist.send(t, dst)
                                fails.compare(f"{w} sent tensor (must be unchanged)", t,
                                              payload, g)
                            else:
                                out, g = fresh_output(shape, dtype, layout)
                                got = dist.recv(out, src)
                                fails.compare(w, out, payload, g)
                                if got != src:
                                    fails.add(f"{w}: recv returned {got}, expected {src}")
                        except Exception as e:  # noqa: BLE001
                            fails.exception(w, e)
    return _run_batch(rank, body)


def w_isend_irecv_ring(rank, ws, backend):
    """Every rank isends to the next and irecvs from the previous at once (all dtypes/cases);
    the recv is posted before the send on odd ranks."""

    def body(fails):
        nxt, prv = (rank + 1) % ws, (rank - 1) % ws
        for dtype in _dtypes(backend):
            for layout, shape in _cases(backend, dtype):
                w = f"isend/irecv ring {dtype} {layout}{list(shape)}"
                mine = make_values(rank, shape, dtype, "bits", "ring")
                expected = make_values(prv, shape, dtype, "bits", "ring")
                t, tg = place(mine, layout)
                out, og = fresh_output(shape, dtype, layout)
                try:
                    if rank % 2:
                        rw = dist.irecv(out, prv)
                        sw = dist.isend(t, nxt)
                    else:
                        sw = dist.isend(t, nxt)
                        rw = dist.irecv(out, prv)
                    rw.wait()
                    sw.wait()
                except Exception as e:  # noqa: BLE001
                    fails.exception(w, e)
                    continue
                fails.compare(w, out, expected, og)
                fails.compare(f"{w} sent tensor (must be unchanged)", t, mine, tg)
    return _run_batch(rank, body)


TAG_MODES = {
    "isend": (("small isend", 10, False), ("large isend", 1 << 20, False)),
    "blocking_send": (("small blocking send", 10, True),),
}


def w_tags_out_of_order(rank, ws, mode):
    """Rank 0 sends tag 1 then tag 2 (then five messages with tag 7); rank 1 receives tag 2
    first, then tag 1 (then the tag-7 messages, which arrive in order). Ranks >= 2 idle."""
    problems = []
    if rank > 1:
        return problems
    for label, n, blocking in TAG_MODES[mode]:
        a = torch.full((n,), 1.0)
        b = torch.full((n,), 2.0)
        seq = [torch.full((n,), 10.0 + i) for i in range(5)]
        if rank == 0:
            if blocking:
                dist.send(a, 1, tag=1)
                dist.send(b, 1, tag=2)
                for s in seq:
                    dist.send(s, 1, tag=7)
            else:
                works = [dist.isend(a, 1, tag=1), dist.isend(b, 1, tag=2)]
                works += [dist.isend(s, 1, tag=7) for s in seq]
                for w in works:
                    w.wait()
        else:
            rb = torch.zeros(n)
            ra = torch.zeros(n)
            dist.recv(rb, 0, tag=2)
            dist.recv(ra, 0, tag=1)
            if not torch.equal(rb, b):
                problems.append(f"{label}: tag 2 received {rb[:3].tolist()}, expected 2.0")
            if not torch.equal(ra, a):
                problems.append(f"{label}: tag 1 received {ra[:3].tolist()}, expected 1.0")
            for i in range(5):
                r = torch.zeros(n)
                dist.recv(r, 0, tag=7)
                if not torch.equal(r, seq[i]):
                    problems.append(f"{label}: tag 7 message #{i} is {r[0].item()}, expected "
                                    f"{seq[i][0].item()} (same sender and tag must keep order)")
    return problems


def w_recv_posted_while_arriving(rank, ws):
    """Rank 0 sends 64 MiB messages; rank 1 posts each receive a different delay after the send
    started, so that the message is part-way in (arriving into occl's buffer for messages nobody
    waits for, then switching to the receive's memory) or complete. Every byte must land."""
    problems = []
    if rank > 1:
        return problems
    n = 16 << 20
    for i, delay in enumerate((0.0, 0.002, 0.005, 0.01, 0.03, 0.2)):
        expected = torch.arange(n, dtype=torch.int32) * (i + 1)
        got = torch.zeros(n, dtype=torch.int32)
        dist.barrier()  # the delay counts from (about) the start of the send
        if rank == 0:
            dist.send(expected, 1, tag=i)
        else:
            time.sleep(delay)
            dist.recv(got, 0, tag=i)
            wrong = (got != expected).nonzero()
            if wrong.numel():
                problems.append(f"recv posted after {delay * 1000:g} ms: {wrong.numel()} wrong "
                                f"elements, first at {wrong[0].item()}")
    return problems


def w_recv_any_source(rank, ws):
    """Every rank but 0 sends its rank (in a tensor) to rank 0 with tag 3; rank 0 receives
    ws - 1 times without naming a source: dist.recv returns the sender, which must match the
    payload; every sender exactly once. Then the same with irecv + work._source_rank()."""
    problems = []
    n = 257
    for round_ in ("recv", "irecv"):
        if rank != 0:
            if rank % 2:  # stagger the senders a little
                time.sleep(0.05)
            dist.send(torch.full((n,), float(rank * 10 + (round_ == "irecv"))), 0, tag=3)
        else:
            senders = []
            for _ in range(ws - 1):
                t = torch.zeros(n)
                if round_ == "recv":
                    src = dist.recv(t, tag=3)
                else:
                    work = dist.irecv(t, tag=3)
                    work.wait()
                    src = work._source_rank()
                senders.append(src)
                expected = float(src * 10 + (round_ == "irecv"))
                if not torch.equal(t, torch.full((n,), expected)):
                    problems.append(f"{round_} any source: from {src} got {t[:3].tolist()}, "
                                    f"expected {expected}")
            if sorted(senders) != list(range(1, ws)):
                problems.append(f"{round_} any source: senders {senders}, expected each of "
                                f"1..{ws - 1} once")
        dist.barrier()
    return problems


def w_batch_ring(rank, ws, backend, nbytes, rounds, recv_first):
    """One batch_isend_irecv per round: send to next (tag 0) and to previous (tag 1), receive
    from previous (tag 0) and from next (tag 1), nbytes per message."""
    problems = []
    be = dist.group.WORLD._get_backend(torch.device("cpu"))
    if backend == "occl" and not be.supports_coalescing:
        problems.append("occl backend does not advertise supports_coalescing")
    n = nbytes // 4
    nxt, prv = (rank + 1) % ws, (rank - 1) % ws
    for it in range(rounds):
        to_next = torch.arange(n, dtype=torch.float32) + 1000 * rank + it
        to_prev = -(torch.arange(n, dtype=torch.float32) + 1000 * rank + it)
        from_prev = torch.zeros(n)
        from_next = torch.zeros(n)
        sends = [dist.P2POp(dist.isend, to_next, nxt, tag=0),
                 dist.P2POp(dist.isend, to_prev, prv, tag=1)]
        recvs = [dist.P2POp(dist.irecv, from_prev, prv, tag=0),
                 dist.P2POp(dist.irecv, from_next, nxt, tag=1)]
        reqs = dist.batch_isend_irecv(recvs + sends if recv_first else sends + recvs)
        if backend == "occl" and len(reqs) != 1:
            # The coalescing path returns the one Work of endCoalescing.
            problems.append(f"round {it}: batch_isend_irecv returned {len(reqs)} works, "
                            "expected 1 (startCoalescing/endCoalescing path)")
        for r in reqs:
            r.wait()
        exp_prev = torch.arange(n, dtype=torch.float32) + 1000 * prv + it
        exp_next = -(torch.arange(n, dtype=torch.float32) + 1000 * nxt + it)
        if not torch.equal(from_prev, exp_prev):
            problems.append(f"round {it}: from previous rank {prv}: {from_prev[:3].tolist()}, "
                            f"expected {exp_prev[:3].tolist()}")
        if not torch.equal(from_next, exp_next):
            problems.append(f"round {it}: from next rank {nxt}: {from_next[:3].tolist()}, "
                            f"expected {exp_next[:3].tolist()}")
    return problems


def w_batch_many_small(rank, ws):
    """One batch with a message to and from every other rank, three tags each, mixed dtypes."""
    problems = []
    ops, checks = [], []
    for peer in range(ws):
        if peer == rank:
            continue
        for tag, dtype in ((0, torch.float32), (5, torch.int64), (9, torch.bfloat16)):
            out = torch.zeros(17, dtype=dtype)
            ops.append(dist.P2POp(dist.irecv, out, peer, tag=tag))
            checks.append((peer, tag, out, make_values(peer, (17,), dtype, "bits",
                                                       f"bms{rank}.{tag}")))
            ops.append(dist.P2POp(dist.isend, make_values(rank, (17,), dtype, "bits",
                                                          f"bms{peer}.{tag}"), peer, tag=tag))
    for r in dist.batch_isend_irecv(ops):
        r.wait()
    for peer, tag, out, exp in checks:
        if not torch.equal(out, exp):
            problems.append(f"from {peer} tag {tag}: got {out[:3].tolist()}, "
                            f"expected {exp[:3].tolist()}")
    return problems


def w_p2p_not_queued(rank, ws):
    """Rank 1 posts an irecv, then joins an all_reduce, then waits for the recv; rank 0 joins
    the all_reduce first and sends afterwards. A recv that blocked the group's collective queue
    would deadlock here. Ranks >= 2 only join the all_reduce."""
    payload = torch.arange(100_000, dtype=torch.float64)
    t = torch.ones(8)
    if rank == 1:
        buf = torch.zeros(100_000, dtype=torch.float64)
        work = dist.irecv(buf, 0, tag=4)
        dist.all_reduce(t)
        work.wait()
        assert torch.equal(buf, payload), buf[:4]
    elif rank == 0:
        dist.all_reduce(t)
        dist.send(payload, 1, tag=4)
    else:
        dist.all_reduce(t)
    assert t.tolist() == [float(ws)] * 8, t
    # And the other way round: a large isend still in flight while collectives run.
    big = torch.arange(4_000_000, dtype=torch.float32)
    if rank == 0:
        work = dist.isend(big, 1, tag=6)
        for _ in range(3):
            dist.all_reduce(t)
        work.wait()
    elif rank == 1:
        for _ in range(3):
            dist.all_reduce(t)
        got = torch.zeros_like(big)
        dist.recv(got, 0, tag=6)
        assert torch.equal(got, big)
    else:
        for _ in range(3):
            dist.all_reduce(t)
    return True


def w_recv_of_another_size(rank, ws, count):
    """Rank 0 sends `count` floats with tag 3, rank 1 receives into half as many: the receive
    fails naming both sizes; the send succeeds; the next message between them arrives intact."""
    if rank > 1:
        return None
    if rank == 0:
        dist.send(torch.ones(count), 1, tag=3)
        dist.send(torch.full((count,), 2.0), 1, tag=4)
        return None
    error = None
    try:
        dist.recv(torch.zeros(count // 2), 0, tag=3)
    except RuntimeError as e:
        error = str(e)
    after = torch.zeros(count)
    dist.recv(after, 0, tag=4)
    return error, torch.equal(after, torch.full((count,), 2.0))


@occl_only("occl's error text")
@pytest.mark.parametrize("count", [10, 1 << 20], ids=["small", "4MiB"])
def test_recv_of_another_size_names_both(dist_pool, count):
    error, next_ok = dist_pool(2).run(w_recv_of_another_size, count, timeout=60)[1]
    assert error is not None and (
        f"rank 0 sent {4 * count} bytes with tag 3, but the receive expects {2 * count}") in error
    assert next_ok, "the message after the failed receive did not arrive intact"


@pytest.mark.parametrize("occl_pool", WORLD_SIZES, indirect=True, ids=lambda n: f"ws{n}")
def test_send_recv_every_pair(occl_pool, backend):
    problems = [p for per in occl_pool.run(w_send_recv_pairs, backend, timeout=RUN_TIMEOUT)
                for p in per]
    assert not problems, "\n".join(problems[:60])


@pytest.mark.parametrize("occl_pool", WORLD_SIZES, indirect=True, ids=lambda n: f"ws{n}")
def test_isend_irecv_ring(occl_pool, backend):
    problems = [p for per in occl_pool.run(w_isend_irecv_ring, backend, timeout=RUN_TIMEOUT)
                for p in per]
    assert not problems, "\n".join(problems[:60])


def test_tags_may_be_received_out_of_order(dist_pool):
    """isend tag 1, isend tag 2 / recv tag 2, recv tag 1: both arrive intact."""
    problems = [p for per in dist_pool(2).run(w_tags_out_of_order, "isend") for p in per]
    assert not problems, "\n".join(problems)


def test_recv_posted_while_a_large_message_arrives(dist_pool):
    problems = [p for per in dist_pool(2).run(w_recv_posted_while_arriving) for p in per]
    assert not problems, "\n".join(problems)


def test_tags_out_of_order_blocking_small_send(dist_pool, backend):
    """Blocking dist.send of a small message (tag 1) returns before the receiver posts the
    matching recv, which it does only after receiving tag 2. gloo cannot (its send completes
    only once the peer posted the recv: 'Timed out waiting ... for send operation')."""
    if backend != "occl":
        pytest.skip("gloo's send is a rendezvous: this pattern deadlocks on gloo")
    problems = [p for per in dist_pool(2).run(w_tags_out_of_order, "blocking_send")
                for p in per]
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize("occl_pool", WORLD_SIZES, indirect=True, ids=lambda n: f"ws{n}")
def test_recv_from_any_source(occl_pool):
    problems = [p for per in occl_pool.run(w_recv_any_source) for p in per]
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize("recv_first", [False, True], ids=["sends_first", "recvs_first"])
@pytest.mark.parametrize("occl_pool", WORLD_SIZES, indirect=True, ids=lambda n: f"ws{n}")
def test_batch_isend_irecv_ring(occl_pool, backend, recv_first):
    """4 MB messages both ways around the ring in one batch: must not deadlock."""
    problems = [p for per in occl_pool.run(w_batch_ring, backend, 4 << 20, 3, recv_first,
                                           timeout=120) for p in per]
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize("occl_pool", [2, 4], indirect=True, ids=lambda n: f"ws{n}")
def test_batch_isend_irecv_many_small(occl_pool):
    problems = [p for per in occl_pool.run(w_batch_many_small) for p in per]
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize("occl_pool", [2, 3], indirect=True, ids=lambda n: f"ws{n}")
def test_p2p_not_queued_behind_collectives(occl_pool):
    assert occl_pool.run(w_p2p_not_queued, timeout=60) == [True] * occl_pool.world_size


def w_sender_dies_mid_message(rank, ws):
    """Rank 0 starts a 256 MiB send nobody receives yet (about 80 ms of copying here) and is
    killed while it is under way; rank 1 then posts the receive for it, and one from any
    source."""
    t = torch.ones(64 << 20)
    if rank == 0:
        dist.isend(t, 1, tag=5)
        time.sleep(0.02)
        os.kill(os.getpid(), signal.SIGKILL)
    time.sleep(0.5)  # the message is held, then read on to the end of the connection
    errors = []
    for source in (0, None):
        start = time.monotonic()
        try:
            dist.recv(t, source, tag=5)
            errors.append(None)
        except RuntimeError as e:
            errors.append((str(e), time.monotonic() - start))
    return errors


@occl_only("occl's own transport")
@pytest.mark.parametrize("transport", ["tcp", "auto"])
def test_receives_from_a_sender_killed_mid_message_fail_at_once(transport):
    # The half-read message of a dead connection must not take the receives posted after it.
    pool = DistPool(2, env={"OCCL_TRANSPORT": transport}, group_timeout=30)
    replies = pool.run_tolerating_deaths(w_sender_dies_mid_message, timeout=60)
    assert replies[0][0] == "died", replies[0]
    assert replies[1][0] == "ok", replies[1][-1]
    from_rank_0, from_any = replies[1][2]
    assert from_rank_0 is not None and "rank 0 closed the connection" in from_rank_0[0], from_rank_0
    assert from_rank_0[1] < 5, f"took {from_rank_0[1]:.1f}s (timeout 30s)"
    assert from_any is not None and "every other rank closed its connection" in from_any[0], \
        from_any
    assert from_any[1] < 5, f"took {from_any[1]:.1f}s (timeout 30s)"


# Lend the messages of these tests (4 MiB), as from OCCL_P2P_LEND_MIN_BYTES (64 MiB) on.
LEND_FROM_256K = {"OCCL_P2P_LEND_MIN_BYTES": str(256 << 10)}


def w_receiver_exits_right_after_its_last_receive(rank, ws):
    """Rank 0 receives one large message (lent, between ranks that may read each other's
    memory) and exits at once. Small messages nobody receives follow the large one; rank 1
    sends them all while rank 0 is stopped, so that on resuming rank 0's engine finds them in
    the socket behind the large one, and is still reading them when the process ends."""
    import signal

    pids = [None] * ws
    dist.all_gather_object(pids, os.getpid())
    if rank == 0:
        got = torch.zeros(1 << 20)
        work = dist.irecv(got, 1, tag=1)
        work.wait()  # rank 1 stops and resumes this process meanwhile
        os._exit(0 if torch.all(got == 7) else 1)
    time.sleep(0.5)  # rank 0 has posted its receive
    os.kill(pids[0], signal.SIGSTOP)
    try:
        sent = dist.isend(torch.full((1 << 20,), 7.0), 0, tag=1)
        burst = [dist.isend(torch.ones(1), 0, tag=2) for _ in range(2000)]
        time.sleep(0.5)  # every frame is in rank 0's socket
    finally:
        os.kill(pids[0], signal.SIGCONT)
    try:
        sent.wait()
    except RuntimeError as e:
        return str(e)
    for work in burst:
        try:
            work.wait()
        except RuntimeError:
            pass  # nobody receives them: those still queued when rank 0 exits fail
    return None


@pytest.mark.parametrize("attempt", range(3))
def test_a_send_whose_message_arrived_succeeds_when_the_receiver_exits_at_once(attempt):
    """The send must not fail because the receiver exited right after receiving (its answer
    that it had copied the message once went down with it)."""
    with DistPool(2, env=LEND_FROM_256K) as pool:
        replies = pool.run_tolerating_deaths(w_receiver_exits_right_after_its_last_receive)
    assert replies[0][0] == "died" and "0" in str(replies[0][1]), replies[0]
    assert replies[1] == ("ok", replies[1][1], None), replies[1]


# ---- between ranks on one host: the p2p lane's shared-memory rings ----------------------------
# A send is written into the ring on the caller's thread; a thread waiting for a request reads
# the rings itself for a while (OCCL_SPIN_US); the engine's thread is poked (a byte on the
# socket) only when a request waits for frames and nobody reads, or when the receiver must read
# although it may wait for nothing (a full ring, a lent message, a failure report). Unpoked, the
# engine's thread still looks once a second: the tests below tell a poke (milliseconds) from that
# look (a second per message or per ring-full) by bounds far from both.
AUTO = {"OCCL_TRANSPORT": "auto"}
LOOK_SECONDS = 1.0  # transport/p2p/engine.cpp: kMaxPollMillis


def w_ping_pong(rank, ws, rounds, nbytes, batched):
    """`rounds` round trips between ranks 0 and 1, by send/recv or by batch_isend_irecv (whose
    coalesced Work waits for its ops); wrong messages, and the p2p thread's wakes meanwhile."""
    from test_async_and_timeout import _worker_switches

    def one(op, tensor, peer):  # op: dist.isend or dist.irecv
        if batched:
            for work in dist.batch_isend_irecv([dist.P2POp(op, tensor, peer)]):
                work.wait()
        else:
            (dist.send if op is dist.isend else dist.recv)(tensor, peer)

    def send(tensor, peer):
        one(dist.isend, tensor, peer)

    def recv(tensor, peer):
        one(dist.irecv, tensor, peer)

    t = torch.zeros(nbytes // 4)
    wrong = 0
    before = _worker_switches("occl-p2p")
    for i in range(rounds):
        if rank == 0:
            send(torch.full_like(t, float(i)), 1)
            recv(t, 1)
            wrong += not torch.all(t == i + 0.5)
        else:
            recv(t, 0)
            wrong += not torch.all(t == i)
            send(t + 0.5, 0)
    return wrong, _worker_switches("occl-p2p") - before


@occl_only("occl's p2p thread")
@pytest.mark.parametrize("nbytes,batched", [(8, False), (4096, False), (8, True)],
                         ids=["8B", "4KiB", "8B-batched"])
def test_ping_pong_on_one_host_leaves_the_p2p_thread_asleep(nbytes, batched):
    rounds = 300
    with DistPool(2, env=AUTO) as pool:
        replies = pool.run(w_ping_pong, rounds, nbytes, batched)
    for rank, (wrong, switches) in enumerate(replies):
        assert wrong == 0, f"rank {rank}: {wrong} wrong messages"
        # Through the engine's thread (OCCL_TRANSPORT=tcp), every message wakes it: 600 or more.
        # Over the rings a posted receive is its waiter's to read, however late the wait comes
        # (once in 600 on a quiet machine); when receives asked for pokes as they were posted,
        # messages arriving before the wait woke it 178 times under CI's load.
        assert switches < rounds // 10, (
            f"rank {rank}: the p2p thread woke {switches} times for {2 * rounds} messages")


def w_recv_waited_elsewhere(rank, ws, rounds, how):
    """Rank 1 posts each receive and waits for it without wait(): it polls is_completed(), or
    waits on the Work's future; rank 0 sends a little later. Nobody reads the rings for the
    message, so the engine's thread must be poked for it."""
    start = time.monotonic()
    for i in range(rounds):
        if rank == 0:
            time.sleep(0.005)
            dist.send(torch.full((16,), float(i)), 1, tag=i)
        elif rank == 1:
            got = torch.zeros(16)
            work = dist.irecv(got, 0, tag=i)
            if how == "polled":
                while not work.is_completed():
                    assert time.monotonic() < start + rounds * LOOK_SECONDS / 10, (
                        f"receive {i} of {rounds} still pending")
                    time.sleep(0.0005)
            else:
                work.get_future().wait()
            assert torch.all(got == i), (i, got)
        dist.barrier()
    return time.monotonic() - start


@occl_only("occl's p2p thread")
@pytest.mark.parametrize("how", ["polled", "future"])
def test_a_receive_waited_for_without_wait_completes_soon(occl_pool, how):
    # Poked, 20 rounds take about 0.15 s; found at the thread's looks, about 10 s.
    rounds = 20
    took = occl_pool.run(w_recv_waited_elsewhere, rounds, how)
    assert max(took) < rounds * LOOK_SECONDS / 10, f"{rounds} receives took {max(took):.1f} s"


def w_blocking_sends_beyond_a_ring(rank, ws, count, nbytes):
    """Rank 0 sends `count` messages with blocking sends (more than a ring holds), then joins a
    collective; rank 1 joins the collective first and receives afterwards. Rank 1's engine must
    buffer what fills the ring, or rank 0 never reaches the collective."""
    t = torch.ones(1)
    took = None
    if rank == 0:
        start = time.monotonic()
        for i in range(count):
            dist.send(torch.full((nbytes // 4,), float(i)), 1, tag=3)
        took = time.monotonic() - start
        dist.all_reduce(t)
    elif rank == 1:
        dist.all_reduce(t)
        got = torch.zeros(nbytes // 4)
        for i in range(count):
            dist.recv(got, 0, tag=3)
            assert torch.all(got == i), (i, got[:4])
    else:
        dist.all_reduce(t)
    return t.item(), took


@occl_only("occl's rings")
def test_blocking_sends_beyond_a_ring_complete_while_the_receiver_is_elsewhere():
    count, nbytes = 2000, 8192  # 16 MB: the 1 MiB ring fills 16 times
    with DistPool(2, env=AUTO, group_timeout=60) as pool:
        (total, took), (other, _) = pool.run(w_blocking_sends_beyond_a_ring, count, nbytes)
    assert total == other == 2.0
    # The full ring pokes the receiver's engine, which buffers what it holds: milliseconds per
    # ring. Unpoked, each ring-full waits for the engine's next look (16 s in all).
    assert took < 5 * LOOK_SECONDS, f"the sends took {took:.1f} s"


SENDS_BEFORE_RECEIVES = 5


def w_lent_send_before_its_receive(rank, ws):
    """Five 4 MiB messages complete their blocking sends without a receive posted: the
    receiver's engine copies each into a buffer (after kReceiveGrace) while the receiver
    sleeps. Rank 0 returns when its sends completed and how long they took."""
    big = torch.arange(1 << 20, dtype=torch.float32)
    if rank == 0:
        start = time.time()
        for k in range(SENDS_BEFORE_RECEIVES):
            dist.send(big + k, 1, tag=8 + k)
        sent_at = time.time()
        dist.barrier()
        return sent_at, sent_at - start
    time.sleep(3 * LOOK_SECONDS)
    posted_at = time.time()
    got = torch.zeros_like(big)
    for k in range(SENDS_BEFORE_RECEIVES):
        dist.recv(got, 0, tag=8 + k)
        assert torch.equal(got, big + k), k
    dist.barrier()
    return posted_at


@occl_only("occl's lent messages")
def test_a_lent_send_completes_before_its_receive_is_posted():
    # Poked for it, the receiver's engine buffers the message, though it waits for nothing.
    with DistPool(2, env={**AUTO, **LEND_FROM_256K}) as pool:
        (sent_at, took), posted_at = pool.run(w_lent_send_before_its_receive)
    assert sent_at < posted_at, f"the send completed {sent_at - posted_at:.3f} s after the receive"
    # Not at the engine's looks, a second apart (4 s or more for five): each message poked it.
    assert took < LOOK_SECONDS, f"the sends took {took:.2f} s"


@occl_only("occl's rings")
def test_a_streamed_send_completes_before_its_receive_is_posted():
    # 4 MiB through the 1 MiB ring: the full ring pokes the receiver's engine, which buffers it.
    with DistPool(2, env=AUTO) as pool:
        (sent_at, took), posted_at = pool.run(w_lent_send_before_its_receive)
    assert sent_at < posted_at, f"the send completed {sent_at - posted_at:.3f} s after the receive"
    assert took < LOOK_SECONDS, f"the sends took {took:.2f} s"
