"""occl's bootstrap handshake (torch_occl/csrc/transport/handshake.hpp), as a process that is not
a rank speaks it: for the tests that play strangers and impostors.

The MACs here come from Python's hmac module, independently of occl's OpenSSL code, so a join
that occl accepts with a key proves that both compute HMAC-SHA256 over the same transcript.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import socket
import struct

MAGIC, VERSION, HOLDS_KEY = 0x4F434C48, 3, 1
HELLO = struct.Struct("<IIiiII16s16s16s")
CHALLENGE = struct.Struct("<I16s")
ANSWER = struct.Struct("<IIi16s32s")
VERDICTS = {1: "Accepted", 2: "KeyRequired", 3: "KeyUnexpected", 4: "KeyRejected",
            5: "RankTaken", 6: "NotAnnounced"}


def hello(rank, size, secret, pid=0, nonce=None, flags=0, magic=MAGIC, version=VERSION):
    return HELLO.pack(magic, version, rank, size, flags, pid, secret, nonce or os.urandom(16),
                      os.urandom(16))


def mac(key, role, channel, record, hello_bytes, acceptor, acceptor_challenge, verdict=None):
    """The connector's proof (role "connect") or the acceptor's ("accept", of `verdict`), over
    what both sent and the acceptor's entry in the store (`record`)."""
    if key is None:
        return bytes(32)
    fields = [b"occl connect" if role == "connect" else b"occl accept", channel.encode(),
              str(acceptor).encode(), record.encode()]
    transcript = b"\0".join(fields) + b"\0" + hello_bytes + acceptor_challenge
    if role == "accept":
        transcript += struct.pack("<I", verdict)
    return hmac.new(key, transcript, hashlib.sha256).digest()


def _recv(sock, size):
    data = b""
    while len(data) < size:
        chunk = sock.recv(size - len(data))
        if not chunk:
            raise ConnectionError(f"closed after {len(data)} of {size} bytes")
        data += chunk
    return data


def join(record, acceptor, rank, size, secret, *, channel="collective", key=None, pid=0,
         nonce=None, timeout=20):
    """Joins `acceptor` at the address of its entry in the store (`record`: "host port pid
    nonce") as `rank`. Returns the verdict's name and the socket, left open so that an accepted
    impostor keeps its place."""
    host, port = record.split()[:2]
    sock = socket.create_connection((host, int(port)), timeout=timeout)
    greeting = hello(rank, size, secret, pid=pid, nonce=nonce,
                     flags=HOLDS_KEY if key is not None else 0)
    sock.sendall(greeting)
    magic, challenge = CHALLENGE.unpack(_recv(sock, CHALLENGE.size))
    assert magic == MAGIC, hex(magic)
    sock.sendall(mac(key, "connect", channel, record, greeting, acceptor, challenge))
    magic, verdict, answering, answer_secret, answer_mac = ANSWER.unpack(_recv(sock, ANSWER.size))
    assert (magic, answering, answer_secret) == (MAGIC, acceptor, secret)
    name = VERDICTS[verdict]
    if name in ("Accepted", "RankTaken", "NotAnnounced"):  # given once the proof matched
        assert answer_mac == mac(key, "accept", channel, record, greeting, acceptor, challenge,
                                 verdict), name
    return name, sock
