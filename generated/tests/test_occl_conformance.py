# generated — do not edit. Source: spec/collectives.yaml; regenerate with `python -m occl_codegen --spec spec/collectives.yaml --out generated` in the project root.
#
# The conformance suite of the occl backend: every op the spec declares, on 1 to 4
# ranks, checked against its semantics (occl_codegen/conformance/reference.py), which every rank
# evaluates in Python. Cases cover every supported dtype and reduce op, every root, the backend
# object and the torch.distributed calls, sync and async, non-contiguous and zero-element
# tensors, uneven splits and tagged point-to-point messages: pairwise (occl_codegen/conformance/cases.py).
# Which backend runs, and how its ranks start: occl_codegen/conformance/suite.py.
import pytest

from occl_codegen.conformance.cases import Declaration, Op, cases_for
from occl_codegen.conformance.suite import conformance, target  # noqa: F401 (a fixture)

OPS = (
    Op("broadcast", "broadcast", 'broadcast'),
    Op("allreduce", "allreduce", 'allreduce'),
    Op("allgather", "allgather", 'allgather'),
    Op("_allgather_base", "_allgather_base", 'allgather_base'),
    Op("reduce_scatter", "reduce_scatter", 'reduce_scatter'),
    Op("_reduce_scatter_base", "_reduce_scatter_base", 'reduce_scatter_base'),
    Op("barrier", "barrier", 'barrier'),
    Op("allreduce_coalesced", "allreduce_coalesced", 'allreduce_coalesced'),
    Op("allreduce_sparse", "allreduce_sparse", 'allreduce_sparse'),
    Op("reduce", "reduce", 'reduce'),
    Op("allgather_coalesced", "allgather_coalesced", 'allgather_coalesced'),
    Op("allgather_into_tensor_coalesced", "allgather_into_tensor_coalesced", 'allgather_into_tensor_coalesced'),
    Op("gather", "gather", 'gather'),
    Op("scatter", "scatter", 'scatter'),
    Op("reduce_scatter_tensor_coalesced", "reduce_scatter_tensor_coalesced", 'reduce_scatter_tensor_coalesced'),
    Op("alltoall_base", "alltoall_base", 'alltoall_base'),
    Op("alltoall", "alltoall", 'alltoall'),
    Op("send", "send", 'point_to_point'),
    Op("recv", "recv", 'point_to_point'),
    Op("recvAnysource", "recv_anysource", 'recv_anysource'),
)
DECLARATION = Declaration(
    backend="occl",
    dtypes=('float32', 'float64', 'float16', 'bfloat16', 'int8', 'uint8', 'int16', 'int32', 'int64', 'bool', 'complex64', 'complex128'),
    reduce_dtypes=('float32', 'float64', 'float16', 'bfloat16', 'int8', 'uint8', 'int16', 'int32', 'int64', 'bool'),
    reduce_ops=(('SUM', ('float32', 'float64', 'float16', 'bfloat16', 'int8', 'uint8', 'int16', 'int32', 'int64', 'bool'), None), ('AVG', ('float32', 'float64', 'float16', 'bfloat16', 'int8', 'uint8', 'int16', 'int32', 'int64'), 'AVG needs a numeric dtype'), ('PRODUCT', ('float32', 'float64', 'float16', 'bfloat16', 'int8', 'uint8', 'int16', 'int32', 'int64', 'bool'), None), ('MIN', ('float32', 'float64', 'float16', 'bfloat16', 'int8', 'uint8', 'int16', 'int32', 'int64', 'bool'), None), ('MAX', ('float32', 'float64', 'float16', 'bfloat16', 'int8', 'uint8', 'int16', 'int32', 'int64', 'bool'), None), ('BAND', ('int8', 'uint8', 'int16', 'int32', 'int64', 'bool'), 'bitwise ops need an integer or bool dtype'), ('BOR', ('int8', 'uint8', 'int16', 'int32', 'int64', 'bool'), 'bitwise ops need an integer or bool dtype'), ('BXOR', ('int8', 'uint8', 'int16', 'int32', 'int64', 'bool'), 'bitwise ops need an integer or bool dtype'), ('PREMUL_SUM', ('float32', 'float64', 'float16', 'bfloat16'), 'PREMUL_SUM needs a floating dtype')),
    detects_mismatched=('op', 'dtype', 'count', 'root', 'reduce_op'),
    future_holds_outputs=True, keeps_inputs=True, keeps_non_root_tensors=True, refuses=(),
)
TARGET = target(DECLARATION, python_package='torch_occl')
MISMATCHES = ('op', 'dtype', 'count', 'root', 'reduce_op')


@pytest.mark.parametrize("case", cases_for(OPS, DECLARATION), ids=str)
def test_case(case, conformance):
    conformance.check(case)


@pytest.mark.parametrize("kind", MISMATCHES)
def test_mismatched_calls_raise(kind, conformance):
    conformance.check_mismatch(kind)


def test_a_collective_whose_peer_never_joins_raises_at_its_timeout(conformance):
    conformance.check_timeout()
