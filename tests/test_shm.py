"""The shared-memory transport: when it is used, what it leaves behind, mixed groups.

Ranks on one host share one memfd region per group (see torch_occl/csrc/transport/shm.hpp): it
shows in /proc/self/maps as "memfd:occl", never as a file in /dev/shm.
"""

from __future__ import annotations

import os
import signal
import stat
import time

import pytest
import torch
import torch.distributed as dist

from dist_harness import DistPool, occl_only

pytestmark = occl_only("occl's own transport")

REGION = "memfd:occl"


def _regions():
    """The occl shared-memory mappings of this process: [(address range, path)]."""
    with open("/proc/self/maps") as maps:
        return [(line.split()[0], line.split()[-2] if line.rstrip().endswith("(deleted)")
                 else line.split()[-1]) for line in maps if REGION in line]


def _dev_shm():
    return sorted(os.listdir("/dev/shm")) if os.path.isdir("/dev/shm") else []


def _mode_of(address_range):
    """Permission bits of the file behind a mapping, or None when /proc hides it."""
    try:
        return stat.S_IMODE(os.stat(f"/proc/self/map_files/{address_range}").st_mode)
    except PermissionError:
        return None


def w_regions_follow_groups(rank, ws):
    before_shm = _dev_shm()
    t = torch.full((1000,), float(rank + 1))
    dist.all_reduce(t)
    assert torch.equal(t, torch.full((1000,), ws * (ws + 1) / 2)), t[:4]
    default_regions = _regions()
    group = dist.new_group(backend="occl")
    dist.all_reduce(t, group=group)
    with_group = _regions()
    modes = {_mode_of(r) for r, _ in with_group}
    dist.destroy_process_group(group)
    after_destroy = _regions()
    return (len(default_regions), len(with_group), len(after_destroy), modes,
            before_shm == _dev_shm())


AUTO = {"OCCL_TRANSPORT": "auto"}  # whatever the suite runs under


def test_one_private_region_per_group_gone_after_destroy():
    with DistPool(2, env=AUTO) as pool:
        for rank, (default, with_group, after, modes, shm_unchanged) in enumerate(
                pool.run(w_regions_follow_groups)):
            assert default == 1, f"rank {rank}: {default} occl regions mapped, expected 1"
            assert with_group == 2, f"rank {rank}: a second group mapped {with_group - 1} regions"
            assert after == 1, f"rank {rank}: {after} regions left after destroying the group"
            assert modes <= {0o600, None}, f"rank {rank}: region modes {modes}, expected 0600"
            assert shm_unchanged, f"rank {rank}: /dev/shm changed"


def w_transport_summary(rank, ws, n):
    t = torch.arange(n, dtype=torch.float32) + rank
    dist.all_reduce(t)
    expected = torch.arange(n, dtype=torch.float32) * ws + ws * (ws - 1) / 2
    out = torch.zeros(n * ws)
    dist.all_gather_into_tensor(out, torch.full((n,), float(rank)))
    gathered = torch.cat([torch.full((n,), float(r)) for r in range(ws)])
    b = torch.full((n,), float(rank))
    dist.broadcast(b, src=ws - 1)
    return (len(_regions()), torch.equal(t, expected), torch.equal(out, gathered),
            torch.equal(b, torch.full((n,), float(ws - 1))))


@pytest.mark.parametrize("n", [3, 300_001])
def test_tcp_only_maps_no_shared_memory(n):
    with DistPool(2, env={"OCCL_TRANSPORT": "tcp"}) as pool:
        for rank, (regions, *correct) in enumerate(pool.run(w_transport_summary, n)):
            assert regions == 0, f"rank {rank}: OCCL_TRANSPORT=tcp mapped {regions} regions"
            assert all(correct), f"rank {rank}: allreduce/allgather/broadcast correct: {correct}"


@pytest.mark.parametrize("n", [3, 300_001])
def test_mixed_group_shm_on_one_host_tcp_to_the_other(n):
    # Rank 2 claims another host: ranks 0 and 1 share memory, both talk TCP to rank 2.
    with DistPool(3, env=AUTO, rank_env={2: {"OCCL_HOST_ID": "elsewhere"}}) as pool:
        results = pool.run(w_transport_summary, n)
    assert [r[0] for r in results] == [1, 1, 0], f"regions mapped per rank: {results}"
    for rank, (_, *correct) in enumerate(results):
        assert all(correct), f"rank {rank}: allreduce/allgather/broadcast correct: {correct}"


def test_forced_shm_across_hosts_names_the_remote_ranks():
    with pytest.raises(RuntimeError) as info:
        DistPool(3, env={"OCCL_TRANSPORT": "shm"}, rank_env={2: {"OCCL_HOST_ID": "elsewhere"}},
                 start_timeout=60)
    assert "OCCL_TRANSPORT=shm, but rank(s) 2 run on another host" in str(info.value)


def w_killed_peer(rank, ws, transport):
    n = 64 * 1024 * 1024  # 256 MiB of float32: well over 50 ms of work, still moving when rank 1 dies
    t = torch.ones(n)
    if rank == 1:
        dist.all_reduce(t, async_op=True)
        time.sleep(0.02)
        os.kill(os.getpid(), signal.SIGKILL)
    start = time.monotonic()
    errors = []
    for _ in range(2):  # the pending collective, then a later one
        try:
            dist.all_reduce(t)
            errors.append(None)
        except RuntimeError as e:
            errors.append(str(e))
    elapsed = time.monotonic() - start
    dist.destroy_process_group()
    return elapsed, errors, len(_regions()), _dev_shm()


@pytest.mark.parametrize("transport", ["shm", "tcp"])
def test_killed_peer_fails_fast_and_leaves_nothing(transport):
    before = _dev_shm()
    pool = DistPool(2, env={"OCCL_TRANSPORT": transport}, group_timeout=60)
    replies = pool.run_tolerating_deaths(w_killed_peer, transport, timeout=60)
    assert replies[1][0] == "died", replies[1]
    assert replies[0][0] == "ok", replies[0][-1]
    elapsed, errors, regions, dev_shm = replies[0][2]
    assert all(errors), f"a collective with a dead peer returned: {errors}"
    assert elapsed < 5, f"the survivor needed {elapsed:.1f}s to notice (timeout 60s)"
    assert "rank 1 closed the connection" in errors[0], errors[0]
    assert regions == 0, f"{regions} occl regions still mapped after destroy_process_group()"
    assert dev_shm == before, f"/dev/shm changed: {before} -> {dev_shm}"
