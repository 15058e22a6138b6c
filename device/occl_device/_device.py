"""torch.occldev: the device module torch and its utilities look up by device type.

Every kernel of occldev has finished when it returns, so synchronizing waits for nothing. Random
numbers on occldev come from CPU kernels drawing on the CPU generator, which torch.manual_seed
already seeds: manual_seed_all has nothing of occldev's own to seed.
"""

from __future__ import annotations

import torch

from . import DEVICE_TYPE, _C


def _index(device: int | str | torch.device | None) -> int:
    """The index `device` names; -1 for None (the current device)."""
    if device is None:
        return -1
    if isinstance(device, int):
        return device
    device = torch.device(device)
    if device.type != DEVICE_TYPE:
        raise ValueError(f"expected an {DEVICE_TYPE} device, got {device}")
    return -1 if device.index is None else device.index


def is_available() -> bool:
    return _C.device_count() > 0


_initialized = False


def _lazy_init() -> None:
    """torch calls it before the first occldev tensor made from Python; the device needs no
    setting up, only the fact is recorded (DeviceMesh picks a device per rank until then)."""
    global _initialized
    _initialized = True


def is_initialized() -> bool:
    return _initialized


def device_count() -> int:
    return _C.device_count()


def current_device() -> int:
    return _C.current_device()


def set_device(device: int | str | torch.device) -> None:
    """Makes `device` the calling thread's current device; a negative index changes nothing (as
    torch.cuda.set_device)."""
    index = _index(device)
    if index >= 0:
        _C.exchange_device(index)
        _lazy_init()


def synchronize(device: int | str | torch.device | None = None) -> None:
    """Nothing to wait for; the device must exist all the same (selected and restored)."""
    index = _index(device)
    if index >= 0:
        _C.exchange_device(_C.exchange_device(index))


class device:
    """Context manager making `device` current inside it (as torch.cuda.device)."""

    def __init__(self, device: int | str | torch.device | None):
        self.index = _index(device)
        self.previous = -1

    def __enter__(self):
        if self.index >= 0:
            self.previous = _C.exchange_device(self.index)

    def __exit__(self, *exc_info):
        if self.previous >= 0:
            _C.exchange_device(self.previous)
        return False


def _is_in_bad_fork() -> bool:
    # No device state that a fork could leave unusable.
    return False


def manual_seed_all(seed: int) -> None:
    """torch.manual_seed calls it; there is nothing of occldev's own to seed."""
