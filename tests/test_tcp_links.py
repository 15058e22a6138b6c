"""TCP links between ranks on one host queue little: OCCL_LOOPBACK_SEND_BUFFER_BYTES.

Over loopback the kernel copies every byte twice, into its buffers and out of them; a send buffer
small enough to stay in cache between the two copies took a 64 MiB send from 23–30 ms to 15–18
ms against the megabytes the kernel grows it to (docs/PERFORMANCE.md). Links to other hosts keep the
kernel's own sizing, which a real network needs. Links across hosts: test_two_hosts.
"""

from __future__ import annotations

import pytest

from dist_harness import occl_only
from tcp_links import send_buffer_for, tcp_links

pytestmark = occl_only("occl's own transport")

DEFAULT_LIMIT = 256 * 1024


def _links(rank, world_size):
    # The pools rendezvous through a file: every TCP socket of a worker is one of occl's links.
    return [tuple(link) for link in tcp_links()]


@pytest.mark.parametrize("env, asked", [
    ({}, DEFAULT_LIMIT),
    ({"OCCL_LOOPBACK_SEND_BUFFER_BYTES": "150000"}, 150000),
])
def test_links_between_ranks_on_one_host_have_a_small_send_buffer(fresh_pool, env, asked):
    expected = send_buffer_for(asked)
    world_size = 3
    # Each rank listens on an address of its own, so some links join two different loopback
    # addresses (a connection's source address is 127.0.0.1 whatever it connects to).
    rank_env = {r: {"OCCL_SOCKET_ADDR": f"127.0.0.{r + 1}"} for r in range(world_size)}
    pool = fresh_pool(world_size, env=env, rank_env=rank_env)
    every_link = []
    for rank, links in enumerate(pool.run(_links)):
        # A collective and a point-to-point link to each other rank.
        assert len(links) == 2 * (world_size - 1), f"rank {rank}: {links}"
        for local, peer, send_buffer in links:
            assert send_buffer == expected, f"rank {rank}: {local} -> {peer}: {send_buffer}"
        every_link += links
    assert any(local[0] != peer[0] for local, peer, _ in every_link), every_link


def test_zero_leaves_the_send_buffer_to_the_kernel(fresh_pool):
    pool = fresh_pool(2, env={"OCCL_LOOPBACK_SEND_BUFFER_BYTES": "0"})
    for rank, links in enumerate(pool.run(_links)):
        assert len(links) == 2, f"rank {rank}: {links}"
        for local, peer, send_buffer in links:
            assert send_buffer != send_buffer_for(DEFAULT_LIMIT), f"rank {rank}: {local} -> {peer}"
