"""The semantics a spec's op may name (`semantics:`), declared without torch.

Each says which argument kinds the c10d::Backend method takes (the loader checks the op against
them), what the conformance suite varies for it, and which torch.distributed calls reach it (for
the generated docs). `reference.py` implements each, under the same name.
"""

from __future__ import annotations

from dataclasses import dataclass

LAYOUTS = ("contiguous", "strided", "empty")


@dataclass(frozen=True)
class Semantics:
    name: str
    arg_kinds: tuple[str, ...]  # the method's arguments, as the spec's `args` kinds
    public_calls: str  # the torch.distributed calls that reach the method
    reduces: bool = False  # cases vary the reduce op over what the backend declares
    rooted: bool = False  # cases vary the root over every rank
    splits: bool = False  # cases vary equal and uneven split sizes
    min_world_size: int = 1
    # How cases issue the op: the backend object's method, torch.distributed's function, or
    # torch's _coalescing_manager / batch_isend_irecv around the public calls.
    apis: tuple[str, ...] = ("backend", "public")
    layouts: tuple[str, ...] = LAYOUTS  # contiguous, non-contiguous and zero-element tensors
    # A spec may name it on several ops (send and recv); their cases run once, under all names.
    shared: bool = False
    # Which of the backend's dtypes cases use: support.dtypes ("moved"), support.reduce_dtypes
    # ("reduced"), or none (barrier).
    dtypes: str = "moved"
    # Reduces with this one reduce op only, not varying it (sparse tensors are summed).
    fixed_reduce_op: str | None = None
    # Limits the dtypes further, to what torch itself can do with the tensors.
    dtype_limit: tuple[str, ...] | None = None
    # Its calls depend on each other (point-to-point): the reference runs the whole exchange.
    exchange: bool = False

    def case_dtypes(self, moved, reduced, reduce_op_dtypes) -> tuple:
        """The dtypes its cases vary over, given what a backend declares."""
        if self.dtypes == "none":
            return (None,)
        dtypes = moved if self.dtypes == "moved" else reduced
        if self.fixed_reduce_op is not None:
            dtypes = reduce_op_dtypes(self.fixed_reduce_op)
        if self.dtype_limit is not None:
            dtypes = tuple(d for d in dtypes if d in self.dtype_limit)
        return tuple(dtypes)


_OPTIONS = "options"
_ALL = (
    Semantics("broadcast", ("tensor_list", _OPTIONS), "broadcast", rooted=True),
    Semantics("allreduce", ("tensor_list", _OPTIONS), "all_reduce", reduces=True, dtypes="reduced"),
    # torch's sparse sum has no float16 or bool kernel: the four dtypes sparse gradients use.
    Semantics("allreduce_sparse", ("tensor_list", _OPTIONS), "all_reduce on a sparse tensor",
              layouts=("sparse",), dtypes="reduced", fixed_reduce_op="SUM",
              dtype_limit=("float32", "float64", "int32", "int64")),
    Semantics("allgather", ("tensor_list_list", "tensor_list", _OPTIONS), "all_gather"),
    Semantics("allgather_base", ("tensor", "tensor", _OPTIONS), "all_gather_into_tensor"),
    Semantics("reduce_scatter", ("tensor_list", "tensor_list_list", _OPTIONS), "reduce_scatter",
              reduces=True, dtypes="reduced"),
    Semantics("reduce_scatter_base", ("tensor", "tensor", _OPTIONS), "reduce_scatter_tensor",
              reduces=True, dtypes="reduced"),
    Semantics("barrier", (_OPTIONS,), "barrier", layouts=("none",), dtypes="none"),
    Semantics("allreduce_coalesced", ("tensor_list", _OPTIONS),
              "all_reduce_coalesced; _coalescing_manager around all_reduce", reduces=True, dtypes="reduced",
              apis=("backend", "public", "coalescing_manager")),
    Semantics("reduce", ("tensor_list", _OPTIONS), "reduce", reduces=True, dtypes="reduced", rooted=True),
    Semantics("allgather_coalesced", ("tensor_list_list", "tensor_list", _OPTIONS),
              "all_gather_coalesced"),
    Semantics("allgather_into_tensor_coalesced", ("tensor_list", "tensor_list", _OPTIONS),
              "_coalescing_manager around all_gather_into_tensor; functional all_gather_tensor",
              apis=("backend", "coalescing_manager")),
    Semantics("gather", ("tensor_list_list", "tensor_list", _OPTIONS), "gather", rooted=True),
    Semantics("scatter", ("tensor_list", "tensor_list_list", _OPTIONS), "scatter", rooted=True),
    Semantics("reduce_scatter_tensor_coalesced", ("tensor_list", "tensor_list", _OPTIONS),
              "_coalescing_manager around reduce_scatter_tensor; functional reduce_scatter_tensor",
              reduces=True, dtypes="reduced", apis=("backend", "coalescing_manager")),
    Semantics("alltoall_base", ("tensor", "tensor", "int_list", "int_list", _OPTIONS),
              "all_to_all_single", splits=True),
    Semantics("alltoall", ("tensor_list", "tensor_list", _OPTIONS), "all_to_all", splits=True),
    Semantics("point_to_point", ("tensor_list", "int", "int"),
              "send, recv, isend, irecv (with tags), batch_isend_irecv", min_world_size=2,
              apis=("backend", "public", "batch"), shared=True, exchange=True),
    Semantics("recv_anysource", ("tensor_list", "int"), "recv and irecv without src",
              min_world_size=2, exchange=True),
)
SEMANTICS: dict[str, Semantics] = {s.name: s for s in _ALL}
