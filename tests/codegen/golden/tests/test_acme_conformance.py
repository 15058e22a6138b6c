# generated — do not edit. Source: tests/codegen/fixtures/mini.yaml; regenerate with `python -m codegen`.
#
# The conformance suite of the acme backend: every op the spec declares, on 1 to 4
# ranks, checked against its semantics (codegen/conformance/reference.py), which every rank
# evaluates in Python. Cases cover every supported dtype and reduce op, every root, the backend
# object and the torch.distributed calls, sync and async, non-contiguous and zero-element
# tensors, uneven splits and tagged point-to-point messages: pairwise (codegen/conformance/cases.py).
# Which backend runs, and how its ranks start: codegen/conformance/suite.py.
import pytest

from codegen.conformance.cases import Declaration, Op
from codegen.conformance.suite import cases, conformance, target  # noqa: F401 (a fixture)

OPS = (
    Op("allgather", "allgather", None),
    Op("send", "send", None),
    Op("barrier", "barrier", None),
    Op("gather", "gather", None),
    Op("recv", "recv", None),
)
DECLARATION = Declaration(
    backend="acme",
    dtypes=('float32', 'int64', 'bool'),
    reduce_dtypes=('float32', 'int64'),
    reduce_ops=(('SUM', ('float32', 'int64'), None), ('BAND', ('int64',), 'bitwise ops need an integer dtype')),
    detects_mismatched=(),
)
TARGET = target(DECLARATION, python_package=None)
NOT_COVERED = [op.name for op in OPS if op.semantics is None]
MISMATCHES = ('op', 'dtype', 'count', 'root', 'reduce_op')


@pytest.mark.parametrize("case", cases(OPS, DECLARATION), ids=str)
def test_case(case, conformance):
    conformance.check(case)


@pytest.mark.parametrize("op", NOT_COVERED or [None])
def test_op_without_semantics(op):
    if op is None:
        return
    pytest.skip(f"the spec declares no semantics for {op}: the suite cannot check it")


@pytest.mark.parametrize("kind", MISMATCHES)
def test_mismatched_calls_raise(kind, conformance):
    conformance.check_mismatch(kind)


def test_a_collective_whose_peer_never_joins_raises_at_its_timeout(conformance):
    conformance.check_timeout()
