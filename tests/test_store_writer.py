"""A store writer cannot lead a rank into another process's memory.

Anyone who reaches a TCPStore may write to it. What a rank needs to copy from a peer's memory (the
peer's pid, its probe's address, the fd of the host's shared region) therefore travels on the
group's links, and every pid is the one its rank stated in its handshake. The attack found on an
earlier design: during formation of a keyed group of 3, a store client without the key copies
rank 2's shared-memory entry over rank 1's (and the region's over to rank 2's pid), and the group
then runs all_reduces large enough for single copies. Results must be exact on every rank and
rank 2's process unharmed; nothing that leads to memory is ever published in the store.
"""

from __future__ import annotations

import datetime
import secrets
import threading
import time

import pytest
import torch.distributed as dist

from dist_harness import occl_only
from rank_processes import KEYS, failure, start_rank, stop, succeeded

pytestmark = occl_only("occl's bootstrap")

# What the earlier design published, and where the writer points rank 1's entry: at rank 2.
FORGED = {KEYS + "shm/pid/1": KEYS + "shm/pid/2", KEYS + "shm/region/0": KEYS + "shm/pid/2"}


def _forge_until(store, done):
    seen = set()
    while not done.is_set():
        for target, source in FORGED.items():
            if store.check([source]):
                seen.add(source)
                store.set(target, store.get(source))
        time.sleep(0.0005)
    return seen


@pytest.mark.parametrize("keyed", [True, False], ids=["keyed", "no-key"])
def test_a_store_writer_cannot_redirect_copies_between_ranks(keyed):
    store = dist.TCPStore("127.0.0.1", 0, is_master=True, wait_for_workers=False,
                          timeout=datetime.timedelta(seconds=60))
    # The writer's own client: no key, as anyone who reaches the store.
    writer = dist.TCPStore("127.0.0.1", store.port, is_master=False,
                           timeout=datetime.timedelta(seconds=60))
    env = {"OCCL_TEST_ELEMENTS": f"{1 << 20},{3 << 20}"}
    if keyed:
        env["OCCL_AUTH_KEY"] = secrets.token_hex(32)
    done = threading.Event()
    published = []
    thread = threading.Thread(target=lambda: published.extend(_forge_until(writer, done)))
    thread.start()
    procs = []
    try:
        procs = [start_rank(r, 3, store, "auto", **env) for r in range(3)]
        for rank, proc in enumerate(procs):
            succeeded(rank, proc)  # exact sums, and a clean exit (rank 2's heap intact)
    finally:
        done.set()
        thread.join(timeout=10)
        stop(procs)
    assert not published, f"the store held what leads to a rank's memory: {published}"


def test_a_rank_whose_store_entry_names_another_pid_fails_formation_by_name():
    """Without a key, a writer rewrites the pid in rank 0's address entry before the others read
    it: ranks 1 and 2 connect to the real rank 0, whose process then states its own pid over the
    link. Those two name the mismatch, and rank 0 fails too, since they leave."""
    store = dist.TCPStore("127.0.0.1", 0, is_master=True, wait_for_workers=False,
                          timeout=datetime.timedelta(seconds=60))
    procs = [start_rank(0, 3, store, "auto")]
    try:
        address = KEYS + "collective/address/0"
        store.wait([address])
        host, port, pid, nonce = store.get(address).decode().split()
        store.set(address, f"{host} {port} {int(pid) + 1} {nonce}")
        procs += [start_rank(r, 3, store, "auto") for r in (1, 2)]
        for rank, proc in enumerate(procs):
            _, _, message = failure(rank, proc)
            if rank > 0:
                assert (f"rank 0's process is pid {pid}, but its entry in the store announced "
                        f"pid {int(pid) + 1}: someone rewrote the store") in message, message
    finally:
        stop(procs)
