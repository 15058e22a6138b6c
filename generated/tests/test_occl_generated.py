# generated — do not edit. Source: spec/collectives.yaml; regenerate with `python -m occl_codegen --spec spec/collectives.yaml --out generated` in the folder holding spec/ and generated/.
#
# Checks, from the spec alone, that the built backend is what the spec declares: its name,
# capabilities and options, and that every op runs in a group of one, where every output must
# equal the input (make_tensor(), or what the op's `examples:` make).
import datetime
import importlib

import pytest
import torch
import torch._C._distributed_c10d as c10d
import torch.distributed as dist

extension = importlib.import_module("torch_occl._C")
Backend = extension.ProcessGroupOCCL

OPS = ["broadcast", "allreduce", "allgather", "_allgather_base", "reduce_scatter", "_reduce_scatter_base", "barrier", "allreduce_coalesced", "allreduce_sparse", "reduce", "allgather_coalesced", "allgather_into_tensor_coalesced", "gather", "scatter", "reduce_scatter_tensor_coalesced", "alltoall_base", "alltoall", "send", "recv", "recv_anysource"]


def make_tensor():
    return torch.arange(6, dtype=torch.float32).reshape(2, 3)


def make_backend():
    options = Backend.Options()
    options._timeout = datetime.timedelta(seconds=10)
    return Backend(dist.HashStore(), 0, 1, options)


def test_module_declares_the_spec():
    assert extension.BACKEND_NAME == "occl"
    assert list(extension.DEVICES) == ["cpu", "occldev"]
    assert list(extension.OPS) == ["broadcast", "allreduce", "allgather", "_allgather_base", "reduce_scatter", "_reduce_scatter_base", "barrier", "allreduce_coalesced", "allreduce_sparse", "reduce", "allgather_coalesced", "allgather_into_tensor_coalesced", "gather", "scatter", "reduce_scatter_tensor_coalesced", "alltoall_base", "alltoall", "send", "recv", "recvAnysource"]


def test_backend_name_and_capabilities():
    backend = make_backend()
    assert backend.name() == "occl"
    assert backend.supports_coalescing is True
    assert backend.supports_splitting is True
    assert backend.supports_time_estimate is False
    assert backend.supports_shrinking is True


def test_allocate_tensor_gives_a_tensor_of_the_size_dtype_and_device_asked():
    backend = make_backend()
    cpu = torch.device("cpu")
    assert backend.supports_tensor_alloc(cpu) is True
    for dtype in (torch.float32, torch.bfloat16, torch.int64):
        tensor = backend.allocate_tensor(6, dtype=dtype, device=cpu)
        assert (tensor.shape, tensor.dtype, tensor.device) == ((6,), dtype, cpu)
    assert backend.allocate_tensor(0, dtype=torch.float32, device=cpu).shape == (0,)
    # Collectives take it: in a group of one, the output equals the input.
    tensor = backend.allocate_tensor(6, dtype=torch.float32, device=cpu)
    tensor.copy_(make_tensor().flatten())
    assert backend.allreduce([tensor]).wait()
    torch.testing.assert_close(tensor, make_tensor().flatten())


def test_allocate_tensor_refuses_a_negative_size_and_a_foreign_device():
    backend = make_backend()
    with pytest.raises(RuntimeError, match=r"^occl\.allocate_tensor: size is -1, expected a number of elements >= 0"):
        backend.allocate_tensor(-1, dtype=torch.float32, device=torch.device("cpu"))
    with pytest.raises(RuntimeError, match=r"^occl\.allocate_tensor: device is meta, expected one of: cpu, occldev"):
        backend.allocate_tensor(4, dtype=torch.float32, device=torch.device("meta"))


def test_option_defaults():
    options = Backend.Options()
    assert options.bind_address == '127.0.0.1'


def test_broadcast_in_a_group_of_one():
    backend = make_backend()
    args = ([make_tensor()], c10d.BroadcastOptions(),)
    work = backend.broadcast(*args)
    assert work.wait()
    assert work.is_completed() and work.is_success()
    tensors = [t for arg in args for t in _tensors(arg)]
    for tensor in tensors:
        torch.testing.assert_close(tensor.to_dense(), make_tensor())
    # The future holds the op's own output tensors, not copies.
    expected = [t._cdata for t in _tensors(args[0])]
    assert [t._cdata for t in work.get_future().value()] == expected


def test_allreduce_in_a_group_of_one():
    backend = make_backend()
    args = ([make_tensor()], c10d.AllreduceOptions(),)
    work = backend.allreduce(*args)
    assert work.wait()
    assert work.is_completed() and work.is_success()
    tensors = [t for arg in args for t in _tensors(arg)]
    for tensor in tensors:
        torch.testing.assert_close(tensor.to_dense(), make_tensor())
    # The future holds the op's own output tensors, not copies.
    expected = [t._cdata for t in _tensors(args[0])]
    assert [t._cdata for t in work.get_future().value()] == expected


def test_allgather_in_a_group_of_one():
    backend = make_backend()
    args = ([[make_tensor()]], [make_tensor()], c10d.AllgatherOptions(),)
    work = backend.allgather(*args)
    assert work.wait()
    assert work.is_completed() and work.is_success()
    tensors = [t for arg in args for t in _tensors(arg)]
    for tensor in tensors:
        torch.testing.assert_close(tensor.to_dense(), make_tensor())
    # The future holds the op's own output tensors, not copies.
    expected = [t._cdata for t in _tensors(args[0])]
    assert [t._cdata for t in work.get_future().value()] == expected


def test_allgather_base_in_a_group_of_one():
    backend = make_backend()
    args = (make_tensor(), make_tensor(), c10d.AllgatherOptions(),)
    work = backend._allgather_base(*args)
    assert work.wait()
    assert work.is_completed() and work.is_success()
    tensors = [t for arg in args for t in _tensors(arg)]
    for tensor in tensors:
        torch.testing.assert_close(tensor.to_dense(), make_tensor())
    # The future holds the op's own output tensors, not copies.
    expected = [t._cdata for t in _tensors(args[0])]
    assert [t._cdata for t in work.get_future().value()] == expected


def test_reduce_scatter_in_a_group_of_one():
    backend = make_backend()
    args = ([make_tensor()], [[make_tensor()]], c10d.ReduceScatterOptions(),)
    work = backend.reduce_scatter(*args)
    assert work.wait()
    assert work.is_completed() and work.is_success()
    tensors = [t for arg in args for t in _tensors(arg)]
    for tensor in tensors:
        torch.testing.assert_close(tensor.to_dense(), make_tensor())
    # The future holds the op's own output tensors, not copies.
    expected = [t._cdata for t in _tensors(args[0])]
    assert [t._cdata for t in work.get_future().value()] == expected


def test_reduce_scatter_base_in_a_group_of_one():
    backend = make_backend()
    args = (make_tensor(), make_tensor(), c10d.ReduceScatterOptions(),)
    work = backend._reduce_scatter_base(*args)
    assert work.wait()
    assert work.is_completed() and work.is_success()
    tensors = [t for arg in args for t in _tensors(arg)]
    for tensor in tensors:
        torch.testing.assert_close(tensor.to_dense(), make_tensor())
    # The future holds the op's own output tensors, not copies.
    expected = [t._cdata for t in _tensors(args[0])]
    assert [t._cdata for t in work.get_future().value()] == expected


def test_barrier_in_a_group_of_one():
    backend = make_backend()
    args = (c10d.BarrierOptions(),)
    work = backend.barrier(*args)
    assert work.wait()
    assert work.is_completed() and work.is_success()
    tensors = [t for arg in args for t in _tensors(arg)]
    for tensor in tensors:
        torch.testing.assert_close(tensor.to_dense(), make_tensor())
    assert work.get_future().value() == []


def test_allreduce_coalesced_in_a_group_of_one():
    backend = make_backend()
    args = ([make_tensor()], c10d.AllreduceCoalescedOptions(),)
    work = backend.allreduce_coalesced(*args)
    assert work.wait()
    assert work.is_completed() and work.is_success()
    tensors = [t for arg in args for t in _tensors(arg)]
    for tensor in tensors:
        torch.testing.assert_close(tensor.to_dense(), make_tensor())
    # The future holds the op's own output tensors, not copies.
    expected = [t._cdata for t in _tensors(args[0])]
    assert [t._cdata for t in work.get_future().value()] == expected


def test_allreduce_sparse_in_a_group_of_one():
    backend = make_backend()
    args = ([make_tensor().to_sparse()], c10d.AllreduceOptions(),)
    work = backend.allreduce_sparse(*args)
    assert work.wait()
    assert work.is_completed() and work.is_success()
    tensors = [t for arg in args for t in _tensors(arg)]
    for tensor in tensors:
        torch.testing.assert_close(tensor.to_dense(), make_tensor())
    # The future holds the op's own output tensors, not copies.
    expected = [t._cdata for t in _tensors(args[0])]
    assert [t._cdata for t in work.get_future().value()] == expected


def test_reduce_in_a_group_of_one():
    backend = make_backend()
    args = ([make_tensor()], c10d.ReduceOptions(),)
    work = backend.reduce(*args)
    assert work.wait()
    assert work.is_completed() and work.is_success()
    tensors = [t for arg in args for t in _tensors(arg)]
    for tensor in tensors:
        torch.testing.assert_close(tensor.to_dense(), make_tensor())
    # The future holds the op's own output tensors, not copies.
    expected = [t._cdata for t in _tensors(args[0])]
    assert [t._cdata for t in work.get_future().value()] == expected


def test_allgather_coalesced_in_a_group_of_one():
    backend = make_backend()
    args = ([[make_tensor()]], [make_tensor()], c10d.AllgatherOptions(),)
    work = backend.allgather_coalesced(*args)
    assert work.wait()
    assert work.is_completed() and work.is_success()
    tensors = [t for arg in args for t in _tensors(arg)]
    for tensor in tensors:
        torch.testing.assert_close(tensor.to_dense(), make_tensor())
    # The future holds the op's own output tensors, not copies.
    expected = [t._cdata for t in _tensors(args[0])]
    assert [t._cdata for t in work.get_future().value()] == expected


def test_allgather_into_tensor_coalesced_in_a_group_of_one():
    backend = make_backend()
    args = ([make_tensor()], [make_tensor()], c10d.AllgatherOptions(),)
    work = backend.allgather_into_tensor_coalesced(*args)
    assert work.wait()
    assert work.is_completed() and work.is_success()
    tensors = [t for arg in args for t in _tensors(arg)]
    for tensor in tensors:
        torch.testing.assert_close(tensor.to_dense(), make_tensor())
    # The future holds the op's own output tensors, not copies.
    expected = [t._cdata for t in _tensors(args[0])]
    assert [t._cdata for t in work.get_future().value()] == expected


def test_gather_in_a_group_of_one():
    backend = make_backend()
    args = ([[make_tensor()]], [make_tensor()], c10d.GatherOptions(),)
    work = backend.gather(*args)
    assert work.wait()
    assert work.is_completed() and work.is_success()
    tensors = [t for arg in args for t in _tensors(arg)]
    for tensor in tensors:
        torch.testing.assert_close(tensor.to_dense(), make_tensor())
    # The future holds the op's own output tensors, not copies.
    expected = [t._cdata for t in _tensors(args[0])]
    assert [t._cdata for t in work.get_future().value()] == expected


def test_scatter_in_a_group_of_one():
    backend = make_backend()
    args = ([make_tensor()], [[make_tensor()]], c10d.ScatterOptions(),)
    work = backend.scatter(*args)
    assert work.wait()
    assert work.is_completed() and work.is_success()
    tensors = [t for arg in args for t in _tensors(arg)]
    for tensor in tensors:
        torch.testing.assert_close(tensor.to_dense(), make_tensor())
    # The future holds the op's own output tensors, not copies.
    expected = [t._cdata for t in _tensors(args[0])]
    assert [t._cdata for t in work.get_future().value()] == expected


def test_reduce_scatter_tensor_coalesced_in_a_group_of_one():
    backend = make_backend()
    args = ([make_tensor()], [make_tensor()], c10d.ReduceScatterOptions(),)
    work = backend.reduce_scatter_tensor_coalesced(*args)
    assert work.wait()
    assert work.is_completed() and work.is_success()
    tensors = [t for arg in args for t in _tensors(arg)]
    for tensor in tensors:
        torch.testing.assert_close(tensor.to_dense(), make_tensor())
    # The future holds the op's own output tensors, not copies.
    expected = [t._cdata for t in _tensors(args[0])]
    assert [t._cdata for t in work.get_future().value()] == expected


def test_alltoall_base_in_a_group_of_one():
    backend = make_backend()
    args = (make_tensor(), make_tensor(), [], [], c10d.AllToAllOptions(),)
    work = backend.alltoall_base(*args)
    assert work.wait()
    assert work.is_completed() and work.is_success()
    tensors = [t for arg in args for t in _tensors(arg)]
    for tensor in tensors:
        torch.testing.assert_close(tensor.to_dense(), make_tensor())
    # The future holds the op's own output tensors, not copies.
    expected = [t._cdata for t in _tensors(args[0])]
    assert [t._cdata for t in work.get_future().value()] == expected


def test_alltoall_in_a_group_of_one():
    backend = make_backend()
    args = ([make_tensor()], [make_tensor()], c10d.AllToAllOptions(),)
    work = backend.alltoall(*args)
    assert work.wait()
    assert work.is_completed() and work.is_success()
    tensors = [t for arg in args for t in _tensors(arg)]
    for tensor in tensors:
        torch.testing.assert_close(tensor.to_dense(), make_tensor())
    # The future holds the op's own output tensors, not copies.
    expected = [t._cdata for t in _tensors(args[0])]
    assert [t._cdata for t in work.get_future().value()] == expected


@pytest.mark.skip(reason="a point-to-point op needs a peer")
def test_send_in_a_group_of_one():
    backend = make_backend()
    args = ([make_tensor()], 0, 0,)
    work = backend.send(*args)
    assert work.wait()
    assert work.is_completed() and work.is_success()
    tensors = [t for arg in args for t in _tensors(arg)]
    for tensor in tensors:
        torch.testing.assert_close(tensor.to_dense(), make_tensor())
    # The future holds the op's own output tensors, not copies.
    expected = [t._cdata for t in _tensors(args[0])]
    assert [t._cdata for t in work.get_future().value()] == expected


@pytest.mark.skip(reason="a point-to-point op needs a peer")
def test_recv_in_a_group_of_one():
    backend = make_backend()
    args = ([make_tensor()], 0, 0,)
    work = backend.recv(*args)
    assert work.wait()
    assert work.is_completed() and work.is_success()
    tensors = [t for arg in args for t in _tensors(arg)]
    for tensor in tensors:
        torch.testing.assert_close(tensor.to_dense(), make_tensor())
    # The future holds the op's own output tensors, not copies.
    expected = [t._cdata for t in _tensors(args[0])]
    assert [t._cdata for t in work.get_future().value()] == expected


@pytest.mark.skip(reason="a point-to-point op needs a peer")
def test_recv_anysource_in_a_group_of_one():
    backend = make_backend()
    args = ([make_tensor()], 0,)
    work = backend.recv_anysource(*args)
    assert work.wait()
    assert work.is_completed() and work.is_success()
    tensors = [t for arg in args for t in _tensors(arg)]
    for tensor in tensors:
        torch.testing.assert_close(tensor.to_dense(), make_tensor())
    # The future holds the op's own output tensors, not copies.
    expected = [t._cdata for t in _tensors(args[0])]
    assert [t._cdata for t in work.get_future().value()] == expected


def _tensors(arg):
    if isinstance(arg, torch.Tensor):
        return [arg]
    if isinstance(arg, list):
        return [t for item in arg for t in _tensors(item)]
    return []
