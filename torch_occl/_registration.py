"""Registers occl with torch.distributed and builds a backend for each process group."""

from __future__ import annotations

import datetime
import ipaddress
import os
import socket

import torch.distributed as dist

from . import _C

BACKEND_NAME: str = _C.BACKEND_NAME
# Overrides the address this rank listens on (like GLOO_SOCKET_IFNAME, but an address).
BIND_ADDRESS_ENV = "OCCL_SOCKET_ADDR"


def register() -> None:
    """Makes `dist.init_process_group(BACKEND_NAME)` and `new_group(backend=...)` use occl.

    The extended API hands the factory the group's id and global ranks (for store keys and for
    errors that name global ranks) and its timeout as given to init_process_group.
    """
    if BACKEND_NAME in dist.Backend.backend_list:
        return
    dist.Backend.register_backend(
        BACKEND_NAME, create_backend, extended_api=True, devices=list(_C.DEVICES)
    )


def create_backend(backend_options, process_group_options=None) -> _C.ProcessGroupOCCL:
    """The factory torch.distributed calls, once per group, on the group's members."""
    options = _C.ProcessGroupOCCL.Options()
    timeout = backend_options.timeout
    options._timeout = (
        timeout if isinstance(timeout, datetime.timedelta) else datetime.timedelta(seconds=timeout)
    )
    options.group_id = backend_options.group_id
    options.group_name = backend_options.group_id
    options.global_ranks_in_group = list(backend_options.global_ranks_in_group)
    options.bind_address = bind_address(backend_options.store)
    return _C.ProcessGroupOCCL(
        backend_options.store, backend_options.group_rank, backend_options.group_size, options
    )


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
