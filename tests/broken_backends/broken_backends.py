"""Deliberately broken backends: occl with one op wrong, to prove the conformance suite fails.

Importing this module registers each of BREAKS under its name. A broken backend is a Python
ProcessGroup around a real occl backend: torch.distributed's calls reach its Python methods, and
`_get_backend(cpu)` returns a view that serves the broken method and forwards every other one to
occl. (c10d::Backend cannot be subclassed from Python, and a ProcessGroup that a creator returns
is used as the group as it is.) Nothing here touches occl's shipped runtime.
"""

from __future__ import annotations

import torch
import torch.distributed as dist
from torch._C._distributed_c10d import _create_work_from_future

import torch_occl._registration as occl

CPU = torch.device("cpu")
# ProcessGroup method -> the backend method it lands on.
PROCESS_GROUP_METHODS = {
    "allreduce": "allreduce", "broadcast": "broadcast", "allgather": "allgather",
    "reduce_scatter": "reduce_scatter", "send": "send", "reduce": "reduce", "scatter": "scatter",
}


def _completed(tensors):
    future = torch.futures.Future()
    future.set_result(tensors)
    return _create_work_from_future(future)


def _with(options, **fields):
    """A copy of c10d options with some fields changed."""
    copy = type(options)()
    for name in ("reduceOp", "rootRank", "rootTensor", "timeout", "asyncOp"):
        if hasattr(options, name):
            setattr(copy, name, fields.get(name, getattr(options, name)))
    return copy


def _sum_as_max(inner, tensors, options):
    if options.reduceOp == dist.ReduceOp.SUM:
        options = _with(options, reduceOp=dist.ReduceOp.MAX)
    return inner.allreduce(tensors, options)


def _premul_as_sum(inner, tensors, options):
    if options.reduceOp == dist.ReduceOp.PREMUL_SUM:
        options = _with(options, reduceOp=dist.ReduceOp.SUM)
    return inner.allreduce(tensors, options)


def _reduce_everywhere(inner, tensors, options):
    """reduce as an allreduce: the non-root ranks' tensors change too."""
    allreduce = dist.AllreduceOptions()
    allreduce.reduceOp, allreduce.timeout = options.reduceOp, options.timeout
    return inner.allreduce(tensors, allreduce)


def _allgather_future_of_inputs(inner, outputs, inputs, options):
    inner.allgather(outputs, inputs, options).wait()
    return _completed(inputs)


def _first_tensor_only(inner, tensors, options):
    """Accepts several tensors per process, silently reducing only the first."""
    return inner.allreduce(tensors[:1], options)


def _reworded(inner, tensors, options):
    """Raises its own message for bad arguments instead of the spec's."""
    try:
        return inner.broadcast(tensors, options)
    except RuntimeError as error:
        raise RuntimeError(f"broadcast: bad arguments ({error})") from None


BREAKS = {
    "broken_noop_allreduce": {"allreduce": lambda inner, tensors, options: _completed(tensors)},
    "broken_sum_as_max": {"allreduce": _sum_as_max},
    "broken_broadcast_root": {
        "broadcast": lambda inner, tensors, options: inner.broadcast(
            tensors, _with(options, rootRank=(options.rootRank + 1) % inner.size())),
    },
    "broken_allgather_order": {
        "allgather": lambda inner, outputs, inputs, options: inner.allgather(
            [outputs[0][::-1]], inputs, options),
    },
    # Every rank reduces block 0 only, so rank 1 is left rank 0's block.
    "broken_reduce_scatter_block": {
        "reduce_scatter": lambda inner, outputs, inputs, options: inner.reduce_scatter(
            outputs, [[inputs[0][0]] * len(inputs[0])], options),
    },
    "broken_send_tag": {
        "send": lambda inner, tensors, dst, tag: inner.send(tensors, dst, tag + 1),
    },
    "broken_premul_factor": {"allreduce": _premul_as_sum},
    "broken_reduce_non_root": {"reduce": _reduce_everywhere},
    "broken_scatter_order": {
        "scatter": lambda inner, outputs, inputs, options: inner.scatter(
            outputs, [inputs[0][::-1]] if inputs else inputs, options),
    },
    "broken_allgather_future": {"allgather": _allgather_future_of_inputs},
    "broken_lenient_allreduce": {"allreduce": _first_tensor_only},
    "broken_reworded_broadcast": {"broadcast": _reworded},
}


class _BackendView:
    """What `_get_backend(cpu)` returns: the broken methods, then occl's."""

    def __init__(self, inner, broken):
        self._inner, self._broken = inner, broken

    def __getattr__(self, name):
        if name in self._broken:
            return lambda *args: self._broken[name](self._inner, *args)
        return getattr(self._inner, name)


class _BrokenGroup(dist.ProcessGroup):
    def __init__(self, rank, size, inner, broken):
        super().__init__(rank, size)
        self._view = _BackendView(inner, broken)
        self._register_backend(CPU, dist.ProcessGroup.BackendType.CUSTOM, inner)

    def _get_backend(self, device):
        return self._view


def _register(name, broken):
    overrides = {
        group_method: (lambda method: lambda self, *args: getattr(self._view, method)(*args))(method)
        for group_method, method in PROCESS_GROUP_METHODS.items()
        if method in broken
    }
    group_class = type(f"Group_{name}", (_BrokenGroup,), overrides)

    def create(backend_options, process_group_options=None):
        inner = occl.create_backend(backend_options, process_group_options)
        return group_class(backend_options.group_rank, backend_options.group_size, inner, broken)

    dist.Backend.register_backend(name, create, extended_api=True, devices=["cpu"])


for _name, _broken in BREAKS.items():
    if _name not in dist.Backend.backend_list:
        _register(_name, _broken)
