"""The parsed spec: frozen dataclasses, one per YAML mapping.

`occl_codegen.loader` builds these from a spec after validating it; nothing else reads the YAML. Every object remembers the spec line it came from (`line`) so later stages can name it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

# Argument kinds an op may declare, in the order c10d::Backend methods take them.
ARG_KINDS = ("tensor", "tensor_list", "tensor_list_list", "int", "int_list", "options")
# The kinds that hold tensors.
TENSOR_KINDS = ("tensor", "tensor_list", "tensor_list_list")
# What a check looks at; see the comment above `checks:` in the spec.
SUBJECT_KINDS = ("tensor", "tensor_list", "list", "value")
# Which argument kinds each subject kind may be applied `on`.
SUBJECT_ACCEPTS = {
    "tensor": TENSOR_KINDS,
    "tensor_list": ("tensor_list", "tensor_list_list"),
    "list": ("tensor_list", "tensor_list_list", "int_list"),
    "value": None,  # any C++ expression
}
TIERS = ("minimal", "extended")
# The c10d::Backend methods of the minimal tier: what torch.distributed's common paths (DDP,
# FSDP2, DTensor) call. A spec that lacks one must say so on purpose (top-level `omits:`).
MINIMAL_TIER = (
    "broadcast", "allreduce", "allgather", "_allgather_base", "reduce_scatter",
    "_reduce_scatter_base", "barrier",
)
# How an op runs: `queued` on the group's worker, in issue order (collectives); `posted` at once
# on the caller's thread, handing its completion to the runtime (point-to-point ops, which must
# not wait behind collectives or each other).
DISPATCHES = ("queued", "posted")
OPTION_TYPES = ("string", "int", "bool")
# The dtypes a spec may name, and the classes a reduce op's rule may name instead.
DTYPES = (
    "float32", "float64", "float16", "bfloat16", "int8", "uint8", "int16", "int32", "int64",
    "bool", "complex64", "complex128",
)
REDUCIBLE_DTYPES = DTYPES[:-2]  # every dtype but the complex ones
# The at::ScalarType enumerator of each dtype, which is also how C++ prints it (c10::toString).
SCALAR_TYPES = {
    "float32": "Float", "float64": "Double", "float16": "Half", "bfloat16": "BFloat16",
    "int8": "Char", "uint8": "Byte", "int16": "Short", "int32": "Int", "int64": "Long",
    "bool": "Bool", "complex64": "ComplexFloat", "complex128": "ComplexDouble",
}
# A placeholder in a check's message: `{expression}`, `{label}` or `{param!text}`.
PLACEHOLDER = re.compile(r"\{([^{}]*)\}")
DTYPE_CLASSES = {
    "floating": ("float32", "float64", "float16", "bfloat16"),
    "integer": ("int8", "uint8", "int16", "int32", "int64"),
    "bool": ("bool",),
    "complex": ("complex64", "complex128"),
}
# c10d::ReduceOp's enumerators, in c10d's order.
REDUCE_OPS = ("SUM", "AVG", "PRODUCT", "MIN", "MAX", "BAND", "BOR", "BXOR", "PREMUL_SUM")
# What ranks may call differently that a backend can declare it detects (support.detects_mismatched):
# the op itself, the dtype, the element count, the root rank, the reduce op.
MISMATCHES = ("op", "dtype", "count", "root", "reduce_op")
# The device types torch has built in (c10::DeviceType) that a backend may accept; any other
# device is one registered through PrivateUse1 under a name of its own.
# Each with its c10::DeviceType enumerator.
BUILTIN_DEVICES = {
    "cpu": "CPU", "cuda": "CUDA", "xpu": "XPU", "mps": "MPS", "hpu": "HPU", "mtia": "MTIA",
    "xla": "XLA", "ipu": "IPU", "ve": "VE", "lazy": "Lazy",
}
# What an op's `agree:` may name, in occl::kit::Signature's order, each with the kit function that
# turns the spec's expression into the field (None: the expression is the field's value).
AGREE_FIELDS = {
    "dtype": "dtype_label",
    "count": None,
    "root": None,
    "reduction": "reduction_label",
    "tensor_numels": "numels_of",
    "shape": "sparse_shape",
    "bytes_to": None,
    "bytes_from": None,
}
# The kit's functions that the spec's check conditions and `agree:` expressions call unqualified
# (occl_kit/check_helpers.hpp, occl_kit/signature.hpp).
KIT_NAMES = (
    "reduce_op_name", "has_overlapping_elements", "split_sizes_unfit_reason", "slice_bytes",
    "total_numel", "bytes_per_tensor", "bytes_per_slice",
)
CAPABILITIES = (
    "supportsCoalescing",
    "supportsSplitting",
    "supportsTimeEstimation",
    "supportsShrinking",
    "supportsTensorAlloc",
)


# How the generated bad-input tests break a check (a check's `violation: {change: ...}`), applied
# to the last element its subject walks (or to the list, or to the value):
#   add_entry / clear          one entry more (a copy of the last) / none, in the list
#   to_dense / to_sparse / to_sparse_csr   the tensor in another layout
#   expand                     a view of the tensor's shape whose elements share memory
#   other_dtype                float64 (float32 if it was float64)
#   extra_element              one element more
#   to_meta                    on the meta device
#   to_other_device            on another device the backend declares (skipped where the
#                              process knows none: a PrivateUse1 device until its package loads)
#   set                        the value (an argument or an options field) set to `value`
#   unsupported_reduce_op      the check's `reduce_op` set to one the tensor's dtype refuses
VIOLATION_CHANGES = (
    "add_entry", "clear", "to_dense", "to_sparse", "to_sparse_csr", "expand", "other_dtype",
    "extra_element", "to_meta", "to_other_device", "set", "unsupported_reduce_op",
)


@dataclass(frozen=True)
class Violation:
    """How the generated bad-input tests break a check; see VIOLATION_CHANGES."""

    change: str
    value: str | None  # `set`: a Python expression (names: the op's arguments, world_size, rank)
    # The message the broken call must raise, if the check's message calls a runtime function
    # whose text the suite cannot compute; the same placeholders as `message`.
    message: str | None
    line: int


# Which changes apply to each subject kind.
VIOLATION_SUBJECTS = {
    "list": ("add_entry", "clear", "set"),
    "tensor_list": ("add_entry", "clear"),
    "tensor": ("to_dense", "to_sparse", "to_sparse_csr", "expand", "other_dtype",
               "extra_element", "to_meta", "to_other_device", "unsupported_reduce_op"),
    "value": ("set",),
}


def reduce_dtypes_refusal(backend: str, reduce_dtypes: tuple[str, ...]) -> str:
    """Why a reduction refuses a dtype outside support.reduce_dtypes (the C++ and the suite's)."""
    return f"{backend} reduces {', '.join(reduce_dtypes)}"


def undefined_reduce_op_refusal(backend: str, reduce_ops: tuple[str, ...]) -> str:
    """Why a reduction refuses a reduce op support.reduce_ops does not define."""
    return f"{backend} defines the reduce ops {', '.join(reduce_ops)}"


@dataclass(frozen=True)
class Option:
    name: str
    type: str  # one of OPTION_TYPES
    default: str | int | bool
    description: str
    line: int
    # A Python expression the generated factory assigns to the option (None: the default stays);
    # `backend_options` (torch's) and `hooks` (backend.python_hooks) are in scope.
    python: str | None = None


@dataclass(frozen=True)
class Runtime:
    namespace: str
    line: int
    # A function of the runtime's that adds to the Python module: void f(pybind11::module_&).
    python_extensions: str | None = None
    # The kit checks before every queued op that all ranks agree on it (the ops' `agree:`).
    agreement: bool = False


@dataclass(frozen=True)
class Device:
    """A device type whose tensors the backend accepts (an entry of backend.devices)."""

    type: str  # torch's name for it: "cpu", or the name a PrivateUse1 device registered
    privateuse1: bool  # registered through PrivateUse1 (c10::DeviceType::PrivateUse1)
    # The runtime may read and write its tensors through their data pointers. If not, the
    # generated backend hands the runtime CPU copies and copies results back.
    host_addressable: bool
    line: int


@dataclass(frozen=True)
class Backend:
    name: str
    cpp_namespace: str
    cpp_class: str
    python_module: str
    devices: tuple[Device, ...]
    capabilities: tuple[tuple[str, bool], ...]  # (name, value), in spec order
    runtime: Runtime
    options: tuple[Option, ...]
    line: int
    # The Python module whose import registers the backend with torch.distributed (None: the
    # backend is registered otherwise, e.g. by an entry point).
    python_package: str | None = None
    # The hand-written module of backend-specific Python the generated registration calls.
    python_hooks: str | None = None


@dataclass(frozen=True)
class ReduceOpRule:
    """A reduce op the backend defines, and on which of its reduce dtypes."""

    name: str  # one of REDUCE_OPS
    dtypes: tuple[str, ...]  # the dtypes it is defined on: all of Support.reduce_dtypes if no rule
    rule: str | None  # why it is not defined on the others (None: it is defined on all)
    line: int


@dataclass(frozen=True)
class Support:
    """What a backend's ops accept (the spec's `support:`, or another backend's capability table)."""

    dtypes: tuple[str, ...]  # what the ops that move data without reducing accept
    reduce_dtypes: tuple[str, ...]  # what reductions accept
    reduce_ops: tuple[ReduceOpRule, ...]  # in spec order
    detects_mismatched: tuple[str, ...]  # from MISMATCHES
    line: int
    future_holds_outputs: bool = True  # a Work's future completes with the op's output tensors
    keeps_inputs: bool = True  # tensors an op only reads stay as they were
    keeps_non_root_tensors: bool = True  # reduce leaves the non-root ranks' tensors alone
    # (regex over case ids, why): cases a capability table says the backend refuses
    refuses: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True)
class Check:
    name: str
    description: str
    subject: str  # one of SUBJECT_KINDS
    params: tuple[str, ...]
    condition: str
    message: str
    line: int
    violation: Violation | None = None  # None: each use says how to break it (`violate:`)


@dataclass(frozen=True)
class Arg:
    name: str
    kind: str  # one of ARG_KINDS
    type: str | None  # the c10d options struct, for kind == "options"
    line: int


@dataclass(frozen=True)
class CheckUse:
    """One check applied by an op: `{check: NAME, on: SUBJECT, PARAM: EXPR, ..., when: COND}`."""

    check: str
    on: str  # an argument name, or a C++ expression for `value` subjects
    bindings: tuple[tuple[str, str], ...]  # (param, C++ expression), in the check's param order
    when: str | None  # a C++ condition; the check applies only where it holds (e.g. on the root)
    line: int
    # (argument, Python expression): what the bad-input test passes instead, before the check's
    # violation (if any) is applied; for checks that cannot be broken one way for every op.
    violate: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True)
class Op:
    name: str  # the c10d::Backend method name
    tier: str
    op_type: str  # the c10d::OpType enumerator
    description: str
    args: tuple[Arg, ...]
    checks: tuple[CheckUse, ...]
    result: str | None  # an argument name, or None for `none`
    runtime: str
    dispatch: str  # one of DISPATCHES
    examples: tuple[tuple[str, str], ...]  # (argument, Python expression) for generated tests
    # (field of AGREE_FIELDS, C++ expression), in AGREE_FIELDS order: what ranks must call alike
    agree: tuple[tuple[str, str], ...]
    # The reference (codegen.conformance.reference) that says what every rank's outputs must be;
    # None: the conformance suite cannot check the op, and says so.
    semantics: str | None
    line: int


@dataclass(frozen=True)
class Spec:
    path: str
    backend: Backend
    checks: tuple[Check, ...]  # in spec order
    ops: tuple[Op, ...]  # in spec order
    support: Support
    omits: tuple[tuple[str, str], ...] = ()  # (minimal-tier method, why the backend lacks it)

    def check(self, name: str) -> Check:
        return next(c for c in self.checks if c.name == name)
