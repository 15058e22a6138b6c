"""The parsed spec: frozen dataclasses, one per YAML mapping.

`codegen.loader` builds these from spec/collectives.yaml after validating it; nothing else reads
the YAML. Every object remembers the spec line it came from (`line`) so later stages can name it.
"""

from __future__ import annotations

from dataclasses import dataclass

# Argument kinds an op may declare, in the order c10d::Backend methods take them.
ARG_KINDS = ("tensor", "tensor_list", "tensor_list_list", "int", "int_list", "options")
# What a check looks at; see the comment above `checks:` in the spec.
SUBJECT_KINDS = ("tensor", "tensor_list", "list", "value")
# Which argument kinds each subject kind may be applied `on`.
SUBJECT_ACCEPTS = {
    "tensor": ("tensor", "tensor_list", "tensor_list_list"),
    "tensor_list": ("tensor_list", "tensor_list_list"),
    "list": ("tensor_list", "tensor_list_list", "int_list"),
    "value": None,  # any C++ expression
}
TIERS = ("minimal", "extended")
# How an op runs: `queued` on the group's worker, in issue order (collectives); `posted` at once
# on the caller's thread, handing its completion to the runtime (point-to-point ops, which must
# not wait behind collectives or each other).
DISPATCHES = ("queued", "posted")
OPTION_TYPES = ("string", "int", "bool")
CAPABILITIES = (
    "supportsCoalescing",
    "supportsSplitting",
    "supportsTimeEstimation",
    "supportsShrinking",
)


@dataclass(frozen=True)
class Option:
    name: str
    type: str  # one of OPTION_TYPES
    default: str | int | bool
    description: str
    line: int


@dataclass(frozen=True)
class Runtime:
    header: str
    namespace: str
    line: int
    # A function of the runtime's that adds to the Python module: void f(pybind11::module_&).
    python_extensions: str | None = None


@dataclass(frozen=True)
class Backend:
    name: str
    cpp_namespace: str
    cpp_class: str
    work_class: str
    python_module: str
    devices: tuple[str, ...]
    capabilities: tuple[tuple[str, bool], ...]  # (name, value), in spec order
    runtime: Runtime
    options: tuple[Option, ...]
    line: int


@dataclass(frozen=True)
class Check:
    name: str
    description: str
    subject: str  # one of SUBJECT_KINDS
    params: tuple[str, ...]
    condition: str
    message: str
    line: int


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
    line: int


@dataclass(frozen=True)
class Spec:
    path: str
    backend: Backend
    checks: tuple[Check, ...]  # in spec order
    ops: tuple[Op, ...]  # in spec order

    def check(self, name: str) -> Check:
        return next(c for c in self.checks if c.name == name)
