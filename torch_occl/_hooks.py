"""occl's own Python, called by the generated registration (spec: backend.python_hooks)."""

from __future__ import annotations

import ipaddress
import os
import socket

import torch.distributed as dist

# Overrides the address this rank listens on (like GLOO_SOCKET_IFNAME, but an address).
BIND_ADDRESS_ENV = "OCCL_SOCKET_ADDR"


def bind_address(store: dist.Store) -> str:
    """The address peers can reach this rank at: the one it uses to reach the store's host.

    Listening there, and not on every interface, keeps occl off networks it was not asked to
    use. A FileStore or HashStore means one host, so loopback.
    """
    explicit = os.environ.get(BIND_ADDRESS_ENV)
    if explicit:
        return explicit
    host = _store_host(store)
    if host is None:
        return "127.0.0.1"
    try:
        address = socket.getaddrinfo(host, None, type=socket.SOCK_STREAM)[0][4][0]
        if ipaddress.ip_address(address).is_loopback:
            return address
        family = socket.AF_INET6 if ":" in address else socket.AF_INET
        with socket.socket(family, socket.SOCK_DGRAM) as probe:
            probe.connect((address, 9))  # UDP connect sends nothing; it only picks a route
            return probe.getsockname()[0]
    except OSError:
        return "127.0.0.1"


def _store_host(store: dist.Store) -> str | None:
    while isinstance(store, dist.PrefixStore):
        store = store.underlying_store
    return store.host if isinstance(store, dist.TCPStore) else None
