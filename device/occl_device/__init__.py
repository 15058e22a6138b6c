"""occl_device: occldev, a small accelerator device of this project's own, behind torch's
PrivateUse1 dispatch key (as PyTorch's OpenReg reference device). Its memory is host memory from
its own allocator, so copies to and from it move real bytes; its kernels are torch's CPU kernels.

Opt-in: `import occl_device` makes the device exist in this process (torch.device("occldev"),
torch.occldev, torch.accelerator, Tensor.occldev()); nothing is registered in a process that does
not import it. Options, read when the package is first imported:

    OCCL_DEVICE_COUNT=2              how many occldev devices there are
    OCCL_DEVICE_HOST_ADDRESSABLE=1   0: data_ptr() is not a host address (as a discrete GPU's
                                     memory), so only the device's kernels can touch the bytes
"""

from __future__ import annotations

import torch

DEVICE_TYPE = "occldev"

_name = torch._C._get_privateuse1_backend_name()
# Checked before _C loads: its registrations would clash with the other device's.
if _name not in ("privateuseone", DEVICE_TYPE):
    raise ImportError(f"occl_device: torch's PrivateUse1 device is already {_name!r} in this "
                      "process, and a process has one PrivateUse1 device")

from . import _device  # noqa: E402  (loads _C: allocator, guard, hooks, kernels)
from ._C import host_addressable, memory_allocated  # noqa: E402
from ._device import (  # noqa: E402
    current_device,
    device,
    device_count,
    is_available,
    set_device,
    synchronize,
)


def _activate(name: str) -> None:
    """Registers occldev with torch; a second call (a reloaded package) finds it done."""
    if name != DEVICE_TYPE:
        torch.utils.rename_privateuse1_backend(DEVICE_TYPE)
    if not hasattr(torch, DEVICE_TYPE):
        torch._register_device_module(DEVICE_TYPE, _device)
    if not hasattr(torch.Tensor, DEVICE_TYPE):
        torch.utils.generate_methods_for_privateuse1_backend(for_storage=True)


_activate(_name)

__all__ = [
    "DEVICE_TYPE",
    "current_device",
    "device",
    "device_count",
    "host_addressable",
    "is_available",
    "memory_allocated",
    "set_device",
    "synchronize",
]
