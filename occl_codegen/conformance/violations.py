"""Bad-input tests: for every check an op uses, a call that breaks it, on every rank where the
check applies, must raise at the call with exactly the check's message; then the group must
still run the op correctly.

The spec says how to break each check (a check's `violation:`, an op's `violate:`). The expected
message is the check's, with its C++ expressions evaluated here in Python over the same
arguments, printed as C++ prints them (dtypes as `Float`, layouts as `Strided`).
"""

from __future__ import annotations

import ast
import dataclasses
import re

from ..model import (
    PLACEHOLDER,
    REDUCE_OPS,
    SCALAR_TYPES,
    reduce_dtypes_refusal,
    undefined_reduce_op_refusal,
)
from .cases import Case, Declaration, takes_async
from .semantics import SEMANTICS

# A check's C++ expressions, read as Python (conditions in `when`, params, `on`, messages).
_CPP_OPERATORS = ((re.compile(r"&&"), " and "), (re.compile(r"\|\|"), " or "),
                  (re.compile(r"!(?!=)"), " not "))
_ASSIGNABLE = re.compile(r"^([A-Za-z_]\w*)(?:\.([A-Za-z_]\w*))?$")
# The runtime contract's functions and constants that check messages may call, as the suite
# computes them (the contract pins their output).
SUITE_NAMES = ("reduce_op_name", "reduce_op_unsupported_reason", "slice_bytes", "kSupportedDevices")
# The other names a check's expressions see: the subject kinds' and the walk's.
SCOPE_NAMES = ("tensor", "tensors", "list", "value", "i0", "i1", "rank", "world_size")


def as_python(expression: str) -> str:
    """A check's C++ expression as Python (`&&`, `||` and `!` spelled out)."""
    for pattern, python in _CPP_OPERATORS:
        expression = pattern.sub(python, expression)
    return expression


def uses_param(message: str, param: str) -> bool:
    """Whether a message's placeholders evaluate `param` (not only print its text)."""
    return any(re.search(rf"\b{param}\b", placeholder) and not placeholder.endswith("!text")
               for placeholder in PLACEHOLDER.findall(message))


def unknown_names(expression: str, known: set[str]) -> list[str]:
    """The names `expression` uses that are not in `known`: those the suite cannot evaluate
    (raises SyntaxError if it does not read as Python at all)."""
    tree = ast.parse(as_python(expression).strip(), mode="eval")
    return sorted({node.id for node in ast.walk(tree) if isinstance(node, ast.Name)} - known)


@dataclasses.dataclass(frozen=True)
class BadInput:
    """One check of one op, and how the spec says to break it."""

    op: str  # the c10d::Backend method
    label: str  # "<backend>.<op>", every message's prefix
    method: str  # its name on the Python backend object
    semantics: str
    args: tuple[tuple[str, str], ...]  # (name, kind) in c10d order
    index: int  # the use's position among the op's checks
    check: str
    subject: str  # the check's subject kind
    on: str
    message: str  # the check's (or its violation's) message template
    bindings: tuple[tuple[str, str], ...] = ()  # (param, C++ expression)
    when: str | None = None
    change: str | None = None  # None: the use's `violate` alone breaks the check
    value: str | None = None
    violate: tuple[tuple[str, str], ...] = ()

    def __str__(self) -> str:
        return f"{self.op}-{self.index}-{self.check}-{re.sub(r'[^A-Za-z0-9_]+', '_', self.on)}"


def base_case(bad: BadInput, declaration: Declaration, world_size: int | None = None) -> Case:
    """The good call a bad input is made from: two ranks (or `world_size`: a launcher's), the
    backend object, contiguous."""
    semantics = SEMANTICS[bad.semantics]
    dtypes = [d for d in semantics.case_dtypes(
        declaration.dtypes, declaration.reduce_dtypes, declaration.reduce_op_dtypes) if d]
    reduce_op = None
    if semantics.reduces:
        names = [name for name, _, _ in declaration.reduce_ops]
        reduce_op = "SUM" if "SUM" in names else names[0]
        dtypes = [d for d in dtypes if d in declaration.reduce_op_dtypes(reduce_op)]
    return Case(
        ops=(bad.op,), method=bad.method, semantics=bad.semantics,
        world_size=world_size or max(2, semantics.min_world_size), api="backend",
        async_op=not takes_async(semantics), layout="contiguous",
        dtype=("float32" if "float32" in dtypes else dtypes[0]) if dtypes else None,
        reduce_op=reduce_op, root=0 if semantics.rooted else None,
        splits="equal" if semantics.splits else None,
    )


def call_bad_input(rank: int, world_size: int, bad: BadInput,
                   declaration: Declaration) -> tuple[str, str, str]:
    """Makes the bad call on this rank: ("raised", message, expected), ("accepted", what the
    call returned, expected), or ("not called", why, "") where the check does not apply."""
    import torch
    import torch.distributed as dist

    from .reference import REFERENCES

    case = base_case(bad, declaration, world_size)
    backend = dist.distributed_c10d._get_default_group()._get_backend(torch.device("cpu"))
    args = dict(zip((name for name, _ in bad.args),
                    REFERENCES[bad.semantics].call_args(case, rank, bad.method)))
    python = _python_scope(rank, world_size)
    for name, expression in bad.violate:
        args[name] = eval(expression, {**python, **args})  # noqa: S307 (the spec's own text)
    where = _break(bad, args, python, declaration)
    if where is None:
        return "not called", f"rank {rank} passes nothing for {bad.on}", ""
    cpp = _CppScope(args, rank, world_size, bad.label.split(".")[0], declaration)
    if bad.when is not None and not cpp.eval(bad.when):  # as C++ does: on the arguments passed
        return "not called", f"`{bad.when}` is false on rank {rank}", ""
    expected = f"{bad.label}: " + cpp.message(bad, where)
    try:
        returned = getattr(backend, bad.method)(*(args[name] for name, _ in bad.args))
    except Exception as error:  # noqa: BLE001  (compared with the expected message)
        return "raised", str(error).split("\n")[0], expected
    if hasattr(returned, "wait"):
        try:
            returned.wait()
        except Exception as error:  # noqa: BLE001
            return "accepted", f"a Work whose wait() raised {type(error).__name__}: {error}", expected
    return "accepted", f"a {type(returned).__name__}", expected


@dataclasses.dataclass
class _Where:
    """The element a change was applied to: its label in messages and the walk's indices."""

    label: str
    subject: object
    indices: tuple[int, ...] = ()


def _break(bad: BadInput, args: dict, python: dict, declaration: Declaration) -> _Where | None:
    """Applies the check's change (if any) to the last element its subject walks; where."""
    kind = dict(bad.args).get(bad.on)
    if bad.change == "set":
        _assign(args, bad.on, eval(bad.value, {**python, **args}))  # noqa: S307
    if bad.subject == "value" or bad.change == "set":
        return _Where(bad.on, args.get(bad.on))
    value = args[bad.on]
    depth = {("tensor", "tensor_list"): 1, ("tensor", "tensor_list_list"): 2,
             ("tensor_list", "tensor_list_list"): 1}.get((bad.subject, kind), 0)
    # A changed reduce op fails on the first element walked; any other change is made to the
    # last, so that a reference to an earlier one (`input_tensors[0]`) stays as it was.
    position = 0 if bad.change == "unsupported_reduce_op" else -1
    container, indices = None, ()
    for _ in range(depth):
        if not value:
            return None
        container, indices = value, (*indices, range(len(value))[position])
        value = value[position]
    label = bad.on + "".join(f"[{i}]" for i in indices)
    if bad.change is None:
        return _Where(label, value, indices)
    if bad.change == "unsupported_reduce_op":
        binding = dict(bad.bindings)["reduce_op"]
        _assign(args, binding, _unsupported_reduce_op(value.dtype, declaration))
        return _Where(label, value, indices)
    changed = _changed(bad.change, value, kind, depth, args, declaration)
    if container is None:
        args[bad.on] = changed
    else:
        container[position] = changed
    return _Where(label, changed, indices)


def _changed(change: str, value, kind: str, depth: int, args: dict, declaration: Declaration):
    import torch

    if change == "add_entry":
        return [*value, _entry_like(value, kind == "tensor_list_list" and depth == 0, args)]
    if change == "clear":
        return []
    if change == "to_dense":
        return value.to_dense()
    if change == "to_sparse":
        return value.to_sparse()
    if change == "to_sparse_csr":
        return value.reshape(-1, value.shape[-1] if value.dim() > 1 else value.numel()).to_sparse_csr()
    if change == "expand":
        return value.reshape(-1)[:1].expand(value.shape)
    if change == "other_dtype":
        return value.to(torch.float32 if value.dtype == torch.float64 else torch.float64)
    if change == "extra_element":
        return value.new_zeros(value.numel() + 1)
    if change == "to_meta":
        return torch.empty_like(value, device="meta")
    if change == "to_other_device":
        others = other_devices(declaration, value.device.type)
        assert others, f"{declaration.backend} has no device here but {value.device.type}"
        return value.to(others[0])
    raise AssertionError(f"change {change!r} does not apply to a tensor or list")


def other_devices(declaration: Declaration, device_type: str) -> list[str]:
    """The devices the backend declares, other than `device_type`, that torch knows in this
    process (a PrivateUse1 device only once its package is imported)."""
    import torch

    known = []
    for device in declaration.devices:
        try:
            torch.device(device)
        except RuntimeError:
            continue
        if device != device_type:
            known.append(device)
    return known


def devices_besides_cpu(rank: int, world_size: int, declaration: Declaration) -> list[str]:
    """On a rank: the devices it knows, besides cpu, that a to_other_device change may use."""
    return other_devices(declaration, "cpu")


def _entry_like(entries: list, of_lists: bool, args: dict):
    """One more entry for a list: a copy of its last, or (for an empty list) a tensor like the
    op's first one, in a list of one if the list holds lists."""
    if entries:
        last = entries[-1]
        return [t.clone() for t in last] if isinstance(last, list) else last.clone()
    tensor = next(_tensors(list(args.values()))).clone()
    return [tensor] if of_lists else tensor


def _tensors(values):
    import torch

    for value in values:
        if isinstance(value, torch.Tensor):
            yield value
        elif isinstance(value, list):
            yield from _tensors(value)


def _assign(args: dict, path: str, value) -> None:
    """Sets an argument (`dst_rank`) or a field of one (`opts.rootRank`)."""
    match = _ASSIGNABLE.match(path)
    if match is None or match[1] not in args:
        raise AssertionError(f"cannot set {path!r}: the spec must say how (`violate:`)")
    if match[2] is None:
        args[match[1]] = value
    else:
        setattr(args[match[1]], match[2], value)


def _unsupported_reduce_op(dtype, declaration: Declaration):
    """A c10d reduce op this dtype refuses: one whose rule excludes it, else one not declared."""
    import torch._C._distributed_c10d as c10d

    name = str(dtype).removeprefix("torch.")
    declared = [op for op, _, _ in declaration.reduce_ops]
    refused = [op for op in declared if name not in declaration.reduce_op_dtypes(op)]
    refused += [op for op in REDUCE_OPS if op not in declared and op != "PREMUL_SUM"]
    if not refused:
        raise AssertionError(f"every c10d reduce op takes {name}: nothing to refuse")
    return getattr(c10d.ReduceOp, refused[0])


def reduce_op_unsupported_reason(backend: str, op_name: str, dtype: str,
                                 declaration: Declaration) -> str | None:
    """The generated C++ function's answer (both follow `support:`, through occl_codegen.model)."""
    if dtype not in declaration.reduce_dtypes:
        return reduce_dtypes_refusal(backend, declaration.reduce_dtypes)
    rules = {op: rule for op, _, rule in declaration.reduce_ops}
    if op_name not in rules:
        return undefined_reduce_op_refusal(backend, tuple(rules))
    return None if dtype in declaration.reduce_op_dtypes(op_name) else rules[op_name]


def _python_scope(rank: int, world_size: int) -> dict:
    import torch
    import torch._C._distributed_c10d as c10d

    return {"torch": torch, "c10d": c10d, "rank": rank, "world_size": world_size}


class _CppTensor:
    """A tensor as the check's C++ expressions see it, printing as C++ prints."""

    def __init__(self, tensor):
        self._tensor = tensor

    def numel(self):
        return self._tensor.numel()

    def scalar_type(self):
        return SCALAR_TYPES[str(self._tensor.dtype).removeprefix("torch.")]

    def layout(self):
        import torch

        return {torch.strided: "Strided", torch.sparse_coo: "Sparse",
                torch.sparse_csr: "SparseCsr"}[self._tensor.layout]

    def device(self):
        return str(self._tensor.device)

    def is_sparse(self):
        return self._tensor.is_sparse

    @property
    def tensor(self):
        return self._tensor


class _CppList(list):
    def size(self):
        return len(self)

    def empty(self):
        return not self


def _cpp(value):
    import torch

    if isinstance(value, torch.Tensor):
        return _CppTensor(value)
    if isinstance(value, (list, tuple)):
        return _CppList(_cpp(v) for v in value)
    return value


class _CppScope:
    """Evaluates the spec's C++ expressions over the call's arguments."""

    def __init__(self, args: dict, rank: int, world_size: int, backend: str,
                 declaration: Declaration):
        self._backend, self._declaration = backend, declaration
        self._names = {
            **{name: _cpp(value) for name, value in args.items()},
            "rank": rank, "world_size": world_size,
            "kSupportedDevices": ", ".join(declaration.devices),
            "reduce_op_name": _reduce_op_name,
            "reduce_op_unsupported_reason": self._reduce_op_unsupported_reason,
            "slice_bytes": _slice_bytes,
        }

    def eval(self, expression: str, **extra):
        return eval(as_python(expression), {**self._names, **extra})  # noqa: S307 (the spec's own text)

    def message(self, bad: BadInput, where: _Where) -> str:
        indices = dict(zip(("i0", "i1"), where.indices))
        subject_name = {"tensor": "tensor", "tensor_list": "tensors", "list": "list",
                        "value": "value"}[bad.subject]
        subject = self.eval(bad.on) if bad.subject == "value" else _cpp(where.subject)
        names = {subject_name: subject, **indices}
        texts = dict(bad.bindings)
        for param, expression in bad.bindings:
            # As in C++, where the op binds them: over its arguments, not the check's names;
            # only those the message prints.
            if uses_param(bad.message, param):
                names[param] = self.eval(expression, **indices)

        def placeholder(match):
            expression = match[1]
            if expression == "label":
                return where.label
            if expression.endswith("!text"):
                return texts[expression.removesuffix("!text")]
            value = self.eval(expression, **names)
            return str(int(value)) if isinstance(value, bool) else str(value)

        return PLACEHOLDER.sub(placeholder, bad.message)

    def _reduce_op_unsupported_reason(self, op, scalar_type: str):
        dtype = next(name for name, cpp in SCALAR_TYPES.items() if cpp == scalar_type)
        return reduce_op_unsupported_reason(self._backend, _reduce_op_name(op), dtype,
                                            self._declaration)


def _reduce_op_name(op) -> str:
    import torch._C._distributed_c10d as c10d

    return next(name for name in REDUCE_OPS if op == getattr(c10d.ReduceOp, name))


def _slice_bytes(split_sizes, tensor: _CppTensor, index: int, world_size: int) -> int:
    """The contract's slice_bytes: the bytes of `tensor`'s rows that rank `index` sends or gets."""
    t = tensor.tensor
    rows = t.shape[0] if t.dim() else t.numel()
    row_bytes = (t.numel() // rows if rows else 0) * t.element_size()
    return (split_sizes[index] if split_sizes else rows // world_size) * row_bytes
