"""Impostors: processes that read the store (as anyone can reach a TCPStore) and join as a rank.

Without a key nobody can tell an impostor from the rank it claims to be, so occl must not let one
lock the real rank out silently: a claim of a rank that the store does not announce, or a second
claim of a rank that joined already, fails formation on every member, naming the rank and why,
within seconds. With a key (OCCL_AUTH_KEY or OCCL_AUTH_KEY_FILE, the same on every rank), an
impostor is refused and the real ranks form the group; a rank with another key is refused by name;
the key appears neither in the store nor in any message. Every case runs on both transports.
"""

from __future__ import annotations

import datetime
import os
import secrets
import socket
import threading
import time

import pytest
import torch.distributed as dist

from dist_harness import occl_only
from occl_handshake import hello, join
from rank_processes import KEYS, TRANSPORTS, failure, start_rank, stop, succeeded

pytestmark = occl_only("occl's bootstrap")

ADDRESS_0 = KEYS + "collective/address/0"
# Measured from each rank's start of init: the store waits, 2 s of grace for a rank refused while
# joining (bootstrap.hpp), 500 ms probes. The init timeout is 60 s.
WITHIN_SECONDS = 10


def _store():
    return dist.TCPStore("127.0.0.1", 0, is_master=True, wait_for_workers=False,
                         timeout=datetime.timedelta(seconds=60))


def _listening_rank_0(store, world_size, transport, **env):
    """Rank 0, once it listens, with what an impostor reads of the store: its address and the
    group's secret."""
    rank_0 = start_rank(0, world_size, store, transport, **env)
    store.wait([ADDRESS_0])
    return rank_0, store.get(ADDRESS_0).decode(), store.get(KEYS + "secret")


def _published(store, rank):
    """The pid and nonce that `rank` published with its address."""
    fields = store.get(KEYS + f"collective/address/{rank}").decode().split()
    return int(fields[2]), bytes.fromhex(fields[3])


def _all_fail_naming(procs, words):
    for rank, proc in sorted(procs.items()):
        seconds, _, message = failure(rank, proc)
        assert words in message, f"rank {rank}: {message}"
        assert seconds < WITHIN_SECONDS, f"rank {rank} raised after {seconds:.1f}s: {message}"


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_an_impostor_before_the_rank_fails_formation_on_every_member(transport):
    store = _store()
    rank_0, address, secret = _listening_rank_0(store, 3, transport)
    procs = {0: rank_0}
    try:
        verdict, impostor = join(address, 0, 1, 3, secret)  # rank 1 has published nothing yet
        assert verdict == "NotAnnounced"
        impostor.close()
        procs.update({r: start_rank(r, 3, store, transport) for r in (1, 2)})
        # Rank 0's own error, and the report the others read: the rank, the reason, the remedy.
        _all_fail_naming(procs, "presented itself as rank 1, which published another pid or "
                                "nonce, or none yet: it is not rank 1")
    finally:
        stop(procs.values())


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_an_impostor_that_joined_first_fails_formation_on_every_member(transport):
    """The worst case: it wrote rank 1's entry itself and was accepted, so rank 0 stopped
    listening; the real rank 1 finds its place taken."""
    store = _store()
    rank_0, address, secret = _listening_rank_0(store, 2, transport)
    procs = {0: rank_0}
    try:
        pid, nonce = 4242, os.urandom(16)
        store.set(KEYS + "collective/address/1", f"127.0.0.1 9 {pid} {nonce.hex()}")
        verdict, impostor = join(address, 0, 1, 2, secret, pid=pid, nonce=nonce)
        assert verdict == "Accepted"
        procs[1] = start_rank(1, 2, store, transport)
        _all_fail_naming(procs, "rank 0 refused rank 1: another process joined it as rank 1 "
                                "first (someone who read the group's secret in the store; set "
                                "OCCL_AUTH_KEY to keep them out); it came from 127.0.0.1:")
        impostor.close()
    finally:
        stop(procs.values())


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_a_second_process_as_a_rank_that_joined_fails_formation_on_every_member(transport):
    store = _store()
    rank_0, address, secret = _listening_rank_0(store, 3, transport)
    procs = {0: rank_0, 1: start_rank(1, 3, store, transport)}
    try:
        store.wait([KEYS + "collective/joined/0/1"])  # rank 0 accepted the real rank 1
        pid, nonce = _published(store, 1)
        verdict, impostor = join(address, 0, 1, 3, secret, pid=pid, nonce=nonce)
        assert verdict == "RankTaken"
        impostor.close()
        procs[2] = start_rank(2, 3, store, transport)
        _all_fail_naming(procs, "two processes joined rank 0 as rank 1, first from 127.0.0.1:")
    finally:
        stop(procs.values())


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_with_a_key_impostors_are_refused_and_the_ranks_form_the_group(transport, tmp_path):
    key = secrets.token_hex(32)
    key_file = tmp_path / "occl.key"
    key_file.write_text(key + "\n")  # as `openssl rand -hex 32 > file` writes it
    key_file.chmod(0o600)
    linked = tmp_path / "mounted.key"  # as a mounted secret is: a link to the file
    linked.symlink_to(key_file)
    store = _store()
    # Rank 0 reads the key from a file, the others from the environment: the same key.
    rank_0, address, secret = _listening_rank_0(store, 3, transport,
                                                OCCL_AUTH_KEY_FILE=str(linked))
    procs = {0: rank_0}
    try:
        # Everything the store holds, and it is not enough: without a key, with a guessed one.
        assert join(address, 0, 1, 3, secret)[0] == "KeyRequired"
        assert join(address, 0, 1, 3, secret, key=os.urandom(32))[0] == "KeyRejected"
        procs.update({r: start_rank(r, 3, store, transport, OCCL_AUTH_KEY=key) for r in (1, 2)})
        for rank, proc in sorted(procs.items()):
            succeeded(rank, proc)
        keys = store.list_keys()
        assert KEYS + "secret" in keys and KEYS + "collective/joined/0/1" in keys, keys
        for name in keys:
            assert key not in name and key.encode() not in store.get(name), name
    finally:
        stop(procs.values())


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_with_a_key_store_readers_holding_every_slot_cannot_keep_the_ranks_out(transport):
    """Four threads keep opening connections that present the secret and then stay silent, more
    than rank 0 hears out at once: a connection silent after its Challenge gives way."""
    key = secrets.token_hex(32)
    store = _store()
    rank_0, record, secret = _listening_rank_0(store, 2, transport, OCCL_AUTH_KEY=key)
    procs = {0: rank_0}
    host, port = record.split()[:2]
    holding = threading.Event()
    holding.set()

    def hold_slots():
        held = []
        while holding.is_set():
            try:
                s = socket.create_connection((host, int(port)), timeout=1)
                s.sendall(hello(1, 2, secret))
                held.append(s)
            except OSError:
                time.sleep(0.01)  # refused once rank 0 stops listening
            if len(held) > 100:
                held.pop(0).close()
            time.sleep(0.002)
        for s in held:
            s.close()

    threads = [threading.Thread(target=hold_slots, daemon=True) for _ in range(4)]
    try:
        for thread in threads:
            thread.start()
        time.sleep(0.5)
        procs[1] = start_rank(1, 2, store, transport, OCCL_AUTH_KEY=key)
        for rank, proc in sorted(procs.items()):
            succeeded(rank, proc)
    finally:
        holding.clear()
        stop(procs.values())


def test_the_mac_is_hmac_sha256_of_the_documented_transcript():
    """A joiner with the key and a matching entry in the store is accepted: Python's hmac (in
    occl_handshake.join) agrees with occl's on both proofs."""
    key = secrets.token_hex(32)
    store = _store()
    rank_0, address, secret = _listening_rank_0(store, 2, "tcp", OCCL_AUTH_KEY=key)
    try:
        pid, nonce = 4242, os.urandom(16)
        store.set(KEYS + "collective/address/1", f"127.0.0.1 9 {pid} {nonce.hex()}")
        verdict, joiner = join(address, 0, 1, 2, secret, key=key.encode(), pid=pid, nonce=nonce)
        assert verdict == "Accepted"
        joiner.close()
    finally:
        stop([rank_0])


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_with_a_key_a_relay_at_an_address_written_into_the_store_fails_formation(transport):
    """A process without the key rewrites rank 0's entry to point at a relay of its own, which
    forwards every byte both ways: the proofs cover the entry each end knows, so they differ."""
    key = secrets.token_hex(32)
    store = _store()
    rank_0, record, _ = _listening_rank_0(store, 2, transport, OCCL_AUTH_KEY=key)
    procs = {0: rank_0}
    relay = socket.create_server(("127.0.0.1", 0))
    relayed = []

    def pump(source, sink):
        while data := source.recv(65536):
            relayed.append(len(data))
            sink.sendall(data)

    def serve():
        client, _ = relay.accept()
        host, port = record.split()[:2]
        upstream = socket.create_connection((host, int(port)))
        for ends in ((client, upstream), (upstream, client)):
            threading.Thread(target=pump, args=ends, daemon=True).start()

    threading.Thread(target=serve, daemon=True).start()
    host, _, pid, nonce = record.split()
    store.set(ADDRESS_0, f"{host} {relay.getsockname()[1]} {pid} {nonce}")
    try:
        procs[1] = start_rank(1, 2, store, transport, OCCL_AUTH_KEY=key)
        _all_fail_naming(procs, "rank 0 refused rank 1: their keys differ (OCCL_AUTH_KEY or "
                                "OCCL_AUTH_KEY_FILE must be the same on every rank), or someone "
                                "changed rank 0's address in the store")
        assert relayed, "rank 1 never went through the relay: the test tested nothing"
    finally:
        relay.close()
        stop(procs.values())


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_a_rank_with_another_key_is_refused_by_name(transport):
    key, other_key = secrets.token_hex(32), secrets.token_hex(32)
    store = _store()
    procs = {r: start_rank(r, 3, store, transport, OCCL_AUTH_KEY=other_key if r == 1 else key)
             for r in range(3)}
    try:
        for rank, proc in sorted(procs.items()):
            seconds, _, message = failure(rank, proc)
            assert "rank 0 refused rank 1: their keys differ" in message, f"rank {rank}: {message}"
            assert seconds < WITHIN_SECONDS, f"rank {rank} raised after {seconds:.1f}s"
            assert key not in message and other_key not in message, f"rank {rank}: {message}"
    finally:
        stop(procs.values())


@pytest.mark.parametrize(("setting", "words"), [
    ({"OCCL_AUTH_KEY": "too short"}, "the key in OCCL_AUTH_KEY has 9 bytes; it must have at "
                                     "least 32"),
    ({"OCCL_AUTH_KEY": " " * 40}, "the key in OCCL_AUTH_KEY has only 1 different byte value(s); "
                                  "a key must be random, with at least 8"),
    ({"OCCL_AUTH_KEY": "ab" * 32}, "the key in OCCL_AUTH_KEY has only 2 different byte value(s)"),
    ({"OCCL_AUTH_KEY_FILE": "{dir}/zeros.key"}, "the key in OCCL_AUTH_KEY_FILE has only 1 "
                                                "different byte value(s)"),
    ({"OCCL_AUTH_KEY": "k" * 32, "OCCL_AUTH_KEY_FILE": "/nonexistent"},
     "both OCCL_AUTH_KEY and OCCL_AUTH_KEY_FILE are set; set only one of them"),
    ({"OCCL_AUTH_KEY_FILE": "{dir}/absent.key"}, "cannot open OCCL_AUTH_KEY_FILE ({dir}/absent"
                                                 ".key): No such file or directory"),
    ({"OCCL_AUTH_KEY_FILE": "{dir}/open.key"}, "OCCL_AUTH_KEY_FILE ({dir}/open.key) has mode "
                                               "0644: group or others may access it; the key "
                                               "file must be its owner's alone (chmod 600)"),
    ({"OCCL_AUTH_KEY_FILE": "{dir}/fifo"}, "OCCL_AUTH_KEY_FILE ({dir}/fifo) is not a regular "
                                           "file"),
    ({"OCCL_AUTH_KEY_FILE": "{dir}/large.key"}, "OCCL_AUTH_KEY_FILE ({dir}/large.key) has 5000 "
                                                "bytes: a key file holds one key, at most 4096"),
], ids=["short", "spaces", "repeated-pair", "zero-bytes-file", "both", "absent-file",
        "readable-file", "fifo", "large-file"])
def test_a_bad_key_setting_is_refused_naming_the_variable_and_the_rule(setting, words, tmp_path,
                                                                       monkeypatch):
    secret = "an-0644-key-" + secrets.token_hex(16)
    (tmp_path / "open.key").write_text(secret)
    (tmp_path / "open.key").chmod(0o644)
    os.mkfifo(tmp_path / "fifo", 0o600)  # opening it must not wait for a writer
    (tmp_path / "large.key").write_text("k" * 5000)
    (tmp_path / "large.key").chmod(0o600)
    (tmp_path / "zeros.key").write_bytes(bytes(32))
    (tmp_path / "zeros.key").chmod(0o600)
    for name, value in setting.items():
        monkeypatch.setenv(name, value.format(dir=tmp_path))
    with pytest.raises(dist.DistBackendError) as raised:
        dist.init_process_group("occl", store=dist.HashStore(), rank=0, world_size=1)
    message = str(raised.value)
    assert words.format(dir=tmp_path) in message, message
    assert secret not in message and "too short" not in message, message
