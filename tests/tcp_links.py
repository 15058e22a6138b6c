"""The TCP connections of the calling process, read from its own file descriptors."""

from __future__ import annotations

import os
import socket
from typing import NamedTuple


class TcpLink(NamedTuple):
    local: tuple  # (address, port)
    peer: tuple
    send_buffer: int  # SO_SNDBUF as the kernel reports it (twice what was asked for)


def tcp_links() -> list[TcpLink]:
    """Every connected TCP socket of this process (listeners left out)."""
    links = []
    for name in os.listdir("/proc/self/fd"):
        try:
            if not os.readlink(f"/proc/self/fd/{name}").startswith("socket:"):
                continue
            sock = socket.socket(fileno=os.dup(int(name)))
        except OSError:  # closed meanwhile, or not an internet socket
            continue
        with sock:
            internet = sock.family in (socket.AF_INET, socket.AF_INET6)
            if not internet or sock.type != socket.SOCK_STREAM:
                continue
            try:
                peer = sock.getpeername()
            except OSError:
                continue
            links.append(TcpLink(sock.getsockname()[:2], peer[:2],
                                 sock.getsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF)))
    return links


def send_buffer_for(asked: int) -> int:
    """What SO_SNDBUF reads back after asking for `asked`: capped by net.core.wmem_max, doubled."""
    with open("/proc/sys/net/core/wmem_max") as f:
        return 2 * min(asked, int(f.read()))
