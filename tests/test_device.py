"""occldev, the accelerator of the occl_device package (device/), against CPU computations.

Every check runs in a fresh interpreter: importing occl_device claims torch's PrivateUse1 for the
whole process (as it should), and OCCL_DEVICE_COUNT / OCCL_DEVICE_HOST_ADDRESSABLE are read once
per process. The checks are the `_check_*` functions below, run as `test_device._check_x()`.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parent
OPTIONS = ("OCCL_DEVICE_COUNT", "OCCL_DEVICE_HOST_ADDRESSABLE")
# Both memory modes: data_ptr() a host address (1), or one the host cannot dereference (0).
MODES = pytest.mark.parametrize("host_addressable", ["1", "0"])


def _run(check: str, **env: str) -> subprocess.CompletedProcess:
    """Runs check() of this module in a fresh interpreter, with the device options at their
    defaults except those in `env`."""
    environment = {k: v for k, v in os.environ.items() if k not in OPTIONS}
    environment.update(env)
    code = (f"import sys; sys.path.insert(0, {str(TESTS)!r}); import test_device; "
            f"test_device.{check}()")
    return subprocess.run([sys.executable, "-c", code], env=environment, capture_output=True,
                          text=True, timeout=300)


def _passes(check: str, **env: str) -> str:
    result = _run(check, **env)
    assert result.returncode == 0, result.stdout + result.stderr
    return result.stdout


# -- opt-in --------------------------------------------------------------------------------------

def _check_not_activated():
    import importlib.util

    import torch

    assert importlib.util.find_spec("occl_device") is not None  # installed, and yet:
    assert torch.accelerator.current_accelerator() is None
    assert not torch.accelerator.is_available()
    assert torch._C._get_privateuse1_backend_name() == "privateuseone"
    assert not hasattr(torch, "occldev") and not hasattr(torch.Tensor, "occldev")
    assert "occl_device" not in sys.modules
    with pytest.raises(RuntimeError, match="occldev"):
        torch.device("occldev")


def test_a_process_that_does_not_import_it_is_unchanged():
    _passes("_check_not_activated")


def _check_activated():
    import importlib
    import warnings

    import torch

    import occl_device

    assert torch.accelerator.current_accelerator() == torch.device("occldev")
    assert torch.accelerator.is_available() and torch.accelerator.device_count() == 2
    assert torch._C._get_privateuse1_backend_name() == "occldev"
    assert sys.modules["torch.occldev"] is torch.occldev
    assert torch.occldev.is_available() and torch.occldev.device_count() == 2
    assert torch.tensor([1.0]).occldev().is_occldev
    assert next(torch.nn.Linear(2, 2).occldev(1).parameters()).device == torch.device("occldev:1")
    # Pinned host memory (DDP's reducer asserts that its staging buffer is pinned).
    assert torch.empty(4, pin_memory=True).is_pinned() and not torch.empty(4).is_pinned()
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # torch.manual_seed finds what it seeks in torch.occldev
        torch.manual_seed(0)
    # Random numbers on the device come from the CPU generator that torch.manual_seed seeds.
    drawn = torch.randn(5, device="occldev").cpu()
    torch.manual_seed(0)
    assert torch.equal(drawn, torch.randn(5))
    module = torch.occldev
    importlib.reload(occl_device)
    del sys.modules["occl_device"]
    importlib.import_module("occl_device")
    assert torch.occldev is module and torch.ones(2, device="occldev").sum().item() == 2.0


def test_importing_it_registers_occldev_and_importing_again_is_harmless():
    _passes("_check_activated")


# -- memory --------------------------------------------------------------------------------------

def _check_allocator():
    import torch

    import occl_device

    start = occl_device.memory_allocated()
    a = torch.empty(1000, device="occldev")
    assert occl_device.memory_allocated() - start == 4000
    b = torch.empty(10, dtype=torch.float64, device="occldev:1")
    assert occl_device.memory_allocated() - start == 4080
    b.resize_(100)  # grows through the allocator: the old 80 bytes freed, 800 allocated
    assert occl_device.memory_allocated() - start == 4800
    del a
    assert occl_device.memory_allocated() - start == 800
    del b
    assert occl_device.memory_allocated() == start
    # CPU tensors do not touch it.
    torch.ones(1000)
    assert occl_device.memory_allocated() == start


def test_device_memory_comes_from_its_allocator():
    _passes("_check_allocator")


def _check_copies():
    import torch

    import occl_device

    mode = os.environ.get("OCCL_DEVICE_HOST_ADDRESSABLE", "1") == "1"
    assert occl_device.host_addressable() is mode
    torch.manual_seed(0)
    for dtype in (torch.float32, torch.float64, torch.int64, torch.bool):
        cpu = torch.randn(5, 7).mul(10).to(dtype)
        device = cpu.to("occldev")
        assert device.device == torch.device("occldev:0") and device.dtype == dtype
        back = device.cpu()
        assert back.data_ptr() != cpu.data_ptr()
        assert torch.equal(back, cpu), dtype
        assert torch.equal(device.to("occldev:1").cpu(), cpu), dtype  # device to device
        assert torch.equal(device.clone().cpu(), cpu), dtype

    cpu = torch.randn(6, 8)
    device = cpu.to("occldev")
    # Host address or not, pointer arithmetic on views holds.
    assert device[2, 3:].data_ptr() - device.data_ptr() == (2 * 8 + 3) * 4
    if mode:
        assert device.data_ptr() < 1 << 62
    else:
        assert device.data_ptr() >= 1 << 62
    assert torch.equal(device[1:5, ::3].cpu(), cpu[1:5, ::3])
    assert torch.equal(device.t().contiguous().cpu(), cpu.t().contiguous())
    assert torch.equal(device.to(torch.float64).cpu(), cpu.to(torch.float64))
    # Writes into a strided view, a broadcast copy, fill_, zero_ and item.
    expected = cpu.clone()
    patch = torch.randn(3, 2)
    device[1:4, ::4] = patch.to("occldev")
    expected[1:4, ::4] = patch
    device[4:].copy_(torch.arange(8.0))  # broadcast over the rows
    expected[4:].copy_(torch.arange(8.0))
    device[0].fill_(2.5)
    expected[0].fill_(2.5)
    device[4].zero_()
    expected[4].zero_()
    assert torch.equal(device.cpu(), expected)
    assert device[3, 4].item() == expected[3, 4].item()
    # resize_ keeps the values it had (copied by the device, from device addresses).
    grown = cpu.reshape(-1).to("occldev")
    grown.resize_(1000)
    assert torch.equal(grown[:48].cpu(), cpu.reshape(-1))
    storage = cpu.to("occldev")
    storage.untyped_storage().resize_(4096)
    assert torch.equal(storage.cpu(), cpu)


@MODES
def test_copies_to_from_and_on_the_device_keep_values(host_addressable):
    _passes("_check_copies", OCCL_DEVICE_HOST_ADDRESSABLE=host_addressable)


def _check_dereference():
    """Reads data_ptr() directly, as code that ignores the device would: prints the bytes when the
    host can address the device, dies of a fault when it cannot."""
    import ctypes
    import resource

    import torch

    import occl_device  # noqa: F401

    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))  # the fault expected leaves no core file
    device = torch.arange(4, dtype=torch.int32, device="occldev")
    print(ctypes.string_at(device.data_ptr(), 16).hex(), flush=True)


def test_only_the_device_can_touch_memory_the_host_cannot_address():
    addressable = _passes("_check_dereference", OCCL_DEVICE_HOST_ADDRESSABLE="1")
    assert addressable.strip() == b"".join(i.to_bytes(4, "little") for i in range(4)).hex()
    result = _run("_check_dereference", OCCL_DEVICE_HOST_ADDRESSABLE="0")
    assert result.returncode < 0 and result.stdout == "", (result.returncode, result.stderr)


# -- devices -------------------------------------------------------------------------------------

def _check_three_devices():
    import threading

    import torch

    import occl_device

    assert torch.accelerator.device_count() == torch.occldev.device_count() == 3
    on_2 = torch.ones(3, device="occldev:2")
    assert on_2.device == torch.device("occldev:2") and on_2.sum().item() == 3.0
    assert (on_2 + on_2).device == torch.device("occldev:2")
    assert torch.accelerator.current_device_index() == 0
    with torch.occldev.device(2):
        assert torch.empty(1, device="occldev").device == torch.device("occldev:2")
    assert occl_device.current_device() == 0
    torch.accelerator.set_device_index(1)
    assert torch.accelerator.current_device_index() == torch.occldev.current_device() == 1
    assert torch.empty(1, device="occldev").device == torch.device("occldev:1")
    # The current device is the thread's own, as CUDA's.
    other = []
    thread = threading.Thread(target=lambda: other.append(torch.occldev.current_device()))
    thread.start()
    thread.join()
    assert other == [0]
    # Streams and events: all work is done when a kernel returns.
    torch.accelerator.synchronize()
    torch.occldev.synchronize(2)
    stream = torch.accelerator.current_stream()
    assert stream.device == torch.device("occldev:1") and stream.query()
    start, end = torch.Event(enable_timing=True), torch.Event(enable_timing=True)
    start.record()
    torch.randn(64, 64, device="occldev") @ torch.randn(64, 64, device="occldev")
    end.record()
    end.synchronize()
    assert end.query() and start.elapsed_time(end) > 0


def test_the_device_guard_follows_occl_device_count():
    _passes("_check_three_devices", OCCL_DEVICE_COUNT="3")


def _check_out_of_range():
    import torch

    import occl_device  # noqa: F401

    message = "occldev:{} does not exist: this process has 2 occldev device"
    with pytest.raises(RuntimeError, match=message.format(2)):
        torch.empty(1, device="occldev:2")
    with pytest.raises(RuntimeError, match=message.format(5)):
        torch.accelerator.set_device_index(5)
    with pytest.raises(RuntimeError, match=message.format(3)):
        torch.occldev.set_device(3)
    with pytest.raises(RuntimeError, match=message.format(4)):
        torch.ones(1).to("occldev:4")
    assert torch.accelerator.current_device_index() == 0


def test_a_device_index_out_of_range_is_a_clear_error():
    _passes("_check_out_of_range")


def _check_import_fails():
    import occl_device  # noqa: F401


@pytest.mark.parametrize("option, value, message", [
    ("OCCL_DEVICE_COUNT", "two", "must be a whole number from 0 to 64, not 'two'"),
    ("OCCL_DEVICE_COUNT", "65", "must be a whole number from 0 to 64, not '65'"),
    ("OCCL_DEVICE_HOST_ADDRESSABLE", "yes", "must be 0 or 1, not 'yes'"),
])
def test_a_bad_option_fails_the_import(option, value, message):
    result = _run("_check_import_fails", **{option: value})
    assert result.returncode != 0, result.stdout
    assert f"ValueError: {option} {message}" in result.stderr, result.stderr


# -- training ------------------------------------------------------------------------------------

def _train(model, device: str, steps: int = 3):
    """`steps` SGD steps (momentum: torch's foreach path) on fixed data; the losses and grads."""
    import torch

    generator = torch.Generator().manual_seed(1)
    inputs = torch.randn(steps, 16, 8, generator=generator)
    targets = torch.randn(steps, 16, 4, generator=generator)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    losses = []
    for step in range(steps):
        optimizer.zero_grad()
        output = model(inputs[step].to(device))
        loss = torch.nn.functional.mse_loss(output, targets[step].to(device))
        loss.backward()
        optimizer.step()
        losses.append(loss.detach().cpu())
    return losses, [p.grad.cpu() for p in model.parameters()]


def _model():
    import torch

    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(8, 32), torch.nn.ReLU(), torch.nn.Linear(32, 4))


def _check_training():
    import copy

    import torch

    import occl_device

    reference = _model()
    model = copy.deepcopy(reference).to("occldev")
    assert all(p.device == torch.device("occldev:0") for p in model.parameters())
    expected = _train(reference, "cpu")
    got = _train(model, "occldev")
    assert all(g.device == torch.device("occldev:0") for g in (p.grad for p in model.parameters()))
    assert occl_device.memory_allocated() > 0
    torch.testing.assert_close(got, expected)
    for trained, on_device in zip(reference.parameters(), model.parameters()):
        torch.testing.assert_close(on_device.cpu(), trained)


@MODES
def test_a_model_trains_on_the_device_as_on_the_cpu(host_addressable):
    _passes("_check_training", OCCL_DEVICE_HOST_ADDRESSABLE=host_addressable)


def _check_ddp():
    """DDP's device mechanics without a backend that takes occldev tensors: a fake group of one
    for its construction-time collectives, and a comm hook that leaves each bucket as it is (the
    all-reduce of a group of one) for the reducer's."""
    import copy

    import torch
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel
    from torch.testing._internal.distributed.fake_pg import FakeStore

    import occl_device  # noqa: F401

    def keep_bucket(state, bucket):
        future = torch.futures.Future()
        future.set_result(bucket.buffer())
        return future

    dist.init_process_group("cpu:fake,occldev:fake", store=FakeStore(), rank=0, world_size=1)
    try:
        for options in ({"device_ids": [1]}, {"find_unused_parameters": True},
                        {"gradient_as_bucket_view": True}):
            reference = _model()
            ddp = DistributedDataParallel(copy.deepcopy(reference).to("occldev:1"), **options)
            ddp.register_comm_hook(None, keep_bucket)
            expected = _train(reference, "cpu")
            torch.testing.assert_close(_train(ddp, "occldev:1"), expected, msg=str(options))
            for trained, on_device in zip(reference.parameters(), ddp.module.parameters()):
                assert on_device.device == torch.device("occldev:1")
                torch.testing.assert_close(on_device.cpu(), trained, msg=str(options))
            # The reducer times occldev with the timer occl_device registers for it.
            assert ddp._get_ddp_logging_data()["avg_forward_compute_time"] > 0
    finally:
        dist.destroy_process_group()


@MODES
def test_ddp_constructs_and_trains_on_the_device(host_addressable):
    _passes("_check_ddp", OCCL_DEVICE_HOST_ADDRESSABLE=host_addressable)
