# generated — do not edit. Source: spec/occl_mpi.yaml; regenerate with `python -m occl_codegen --spec spec/occl_mpi.yaml --out generated` in the folder holding spec/ and generated/.
"""Registers occl_mpi with torch.distributed and builds a backend for each process group."""

from __future__ import annotations

import datetime

import torch
import torch.distributed as dist

from occl_mpi import _C

BACKEND_NAME: str = _C.BACKEND_NAME


def register() -> None:
    """Makes `dist.init_process_group(BACKEND_NAME)` and `new_group(backend=...)` use occl_mpi.

    The extended API hands the factory the group's id and global ranks (for store keys and for
    errors that name global ranks) and its timeout as given to init_process_group.
    """
    if BACKEND_NAME in dist.Backend.backend_list:
        return
    dist.Backend.register_backend(
        BACKEND_NAME, create_backend, extended_api=True, devices=list(_C.DEVICES)
    )
    dist.Backend.backend_capability[BACKEND_NAME] = _DeviceTypes(_C.DEVICES)


class _DeviceTypes(list):
    """The backend's device types as init_process_group reads them (backend_capability), each
    only once torch knows its name: init_process_group makes a torch.device of every entry, and a
    PrivateUse1 device is named when its package is imported, maybe after this registration."""

    def __iter__(self):
        return (device for device in list.__iter__(self) if _torch_knows(device))


def _torch_knows(device_type: str) -> bool:
    try:
        torch.device(device_type)
    except RuntimeError:
        return False
    return True


def create_backend(backend_options, process_group_options=None) -> _C.ProcessGroupOcclMpi:
    """The factory torch.distributed calls, once per group, on the group's members."""
    options = _C.ProcessGroupOcclMpi.Options()
    timeout = backend_options.timeout
    options._timeout = (
        timeout if isinstance(timeout, datetime.timedelta) else datetime.timedelta(seconds=timeout)
    )
    options.group_name = backend_options.group_id
    options.global_ranks_in_group = list(backend_options.global_ranks_in_group)
    return _C.ProcessGroupOcclMpi(
        backend_options.store, backend_options.group_rank, backend_options.group_size, options
    )
