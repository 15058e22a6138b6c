"""The view model: every decision about the generated code, made once, in Python.

Templates only loop over and substitute what `build_view` returns; they contain no logic about
the spec. C++ spelled here (types, loops, macro arguments) is spelled nowhere else.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from .conformance.semantics import SEMANTICS
from .layout import Layout
from .model import (
    AGREE_FIELDS,
    BUILTIN_DEVICES,
    KIT_NAMES,
    MISMATCHES,
    PLACEHOLDER,
    SCALAR_TYPES,
    TENSOR_KINDS,
    Arg,
    Check,
    CheckUse,
    Device,
    Op,
    Option,
    Spec,
    Support,
    reduce_dtypes_refusal,
    undefined_reduce_op_refusal,
)

GENERATED_MARKER = "generated — do not edit"

_CPP_PARAM_TYPES = {
    "tensor": "at::Tensor&",
    "tensor_list": "std::vector<at::Tensor>&",
    "tensor_list_list": "std::vector<std::vector<at::Tensor>>&",
    "int": "int",
    "int_list": "std::vector<int64_t>&",
}
_KIT = "::occl::kit"
_CPP_OPTION_TYPES = {"string": "std::string", "int": "int64_t", "bool": "bool"}
# The C++ name each subject kind has inside a check's condition and message.
_SUBJECT_NAMES = {"tensor": "tensor", "tensor_list": "tensors", "list": "list", "value": "value"}
# How many list levels a subject kind walks into, by the kind of argument it is applied on.
_LOOP_DEPTH = {
    ("tensor", "tensor"): 0,
    ("tensor", "tensor_list"): 1,
    ("tensor", "tensor_list_list"): 2,
    ("tensor_list", "tensor_list"): 0,
    ("tensor_list", "tensor_list_list"): 1,
}
# Capabilities that are not a `bool supportsX() const` of their own: generated apart.
_CAPABILITIES_WITH_METHODS = ("supportsTensorAlloc",)
# The Python property torch binds for each c10d::Backend capability.
_PYTHON_CAPABILITIES = {
    "supportsCoalescing": "supports_coalescing",
    "supportsSplitting": "supports_splitting",
    "supportsTimeEstimation": "supports_time_estimate",
    "supportsShrinking": "supports_shrinking",
}


@dataclass(frozen=True)
class MacroView:
    """One validation macro in the checks header."""

    name: str
    check: str
    description: str
    params: tuple[str, ...]  # macro parameters after (op, label)
    condition: str
    message_args: tuple[str, ...]  # TORCH_CHECK message pieces after `op, ": "`


@dataclass(frozen=True)
class CheckCallView:
    """One check in an op's method: the blocks it sits in (`when`, list walks), then the call."""

    opens: tuple[str, ...]  # indented lines that open a block, outermost first
    call: str  # the indented macro call
    closes: tuple[str, ...]  # indented closing braces, innermost first


@dataclass(frozen=True)
class OpView:
    name: str
    python_name: str
    description: str
    tier: str
    label: str  # "occl.allreduce": error prefix
    profiling_title: str  # "occl:allreduce"
    op_type: str
    params: str  # the C++ parameter list
    check_calls: tuple[CheckCallView, ...]
    # The statement's lines that hand the op to the kit's engine: `engine_->queue(...)` for
    # queued ops (with their Signature), `engine_->post(...)` for posted ones.
    submit: tuple[str, ...]
    runtime: str  # the contract's member function
    contract_params: str  # its parameters after the OpContext
    python_args: str  # arguments for the generated world-size-1 smoke test
    alone_skip_reason: str | None  # why the op cannot run in a group of one, if it cannot
    result_index: int | None  # position of the argument whose tensors the future holds


@dataclass(frozen=True)
class ReduceRuleView:
    """One reduce op the backend defines: its case in reduce_op_unsupported_reason, its doc row."""

    name: str  # the c10d::ReduceOp enumerator
    verdict: str  # C++: nullptr where it is defined on `dtype`, else the rule's text
    dtypes: str  # the dtypes it is defined on, in words
    rule: str  # why not on the others ("–" if it is defined on every reduce dtype)


@dataclass(frozen=True)
class SupportView:
    reduce_dtype_enums: tuple[str, ...]  # at::ScalarType enumerators reductions accept
    reduce_dtypes_refusal: str  # C++ string literal: what an unlisted dtype is told
    reduce_ops: tuple[ReduceRuleView, ...]
    undefined_reduce_op: str  # C++ string literal: what an unlisted reduce op is told
    # Python literals for the conformance suite's Declaration.
    dtypes: str
    reduce_dtypes: str
    reduce_op_rules: str
    detects_mismatched: str
    promises: str  # the keyword arguments of its promises beyond the outputs, and refusals
    mismatches: str  # every kind of mismatch the suite knows (model.MISMATCHES)
    dtypes_text: str
    reduce_dtypes_text: str
    detects_text: str


@dataclass(frozen=True)
class ConformanceOpView:
    name: str
    method: str  # the backend object's Python method
    semantics: str  # Python literal: the semantics' name, or None
    semantics_name: str  # for the docs
    public_calls: str  # for the docs: the torch.distributed calls that reach it
    dtypes: str  # for the docs: what it accepts
    reduce_ops: str  # for the docs: the reduce ops it takes, "–" if none
    agrees_on: str  # for the docs: what the kit checks every rank calls alike, "–" if nothing


@dataclass(frozen=True)
class OptionView:
    name: str
    cpp_type: str
    cpp_default: str
    python_default: str
    description: str


@dataclass(frozen=True)
class RegistrationView:
    """The generated Python module that registers the backend (backend.python_package)."""

    extension_import: str  # "from torch_occl import _C"
    hooks_import: str | None  # "from torch_occl import _hooks as hooks"
    assignments: tuple[tuple[str, str], ...]  # (option, Python expression) set by the factory
    # A device of backend.devices is registered through PrivateUse1: torch knows its name only
    # once its package is imported, maybe after the backend registered.
    privateuse1_device: bool


@dataclass(frozen=True)
class View:
    header: str  # the "generated — do not edit" line, without comment syntax
    spec_path: str  # relative to the project root
    conformance_suite: str  # the generated suite's path, relative to the project root
    backend_name: str
    namespace: str
    cpp_class: str
    python_module: str
    extension_name: str  # last component of python_module: the PYBIND11_MODULE name
    devices: tuple[str, ...]  # names, as torch knows them
    # C++ conditions over `const c10::Device& device`: one per device the backend accepts, and
    # one per device whose tensors reach the runtime as CPU copies (not host-addressable).
    device_matches: tuple[str, ...]
    staged_device_matches: tuple[str, ...]
    capabilities: tuple[tuple[str, str], ...]  # (C++ method, "true"/"false")
    coalescing: bool  # generate startCoalescing/endCoalescing (capability supportsCoalescing)
    splitting: bool  # generate split() and the runtime's split (capability supportsSplitting)
    # generate shrink(): the survivors connect afresh through the group's store (supportsShrinking)
    shrinking: bool
    # generate supportsTensorAlloc(DeviceIndex) and allocateTensor over the runtime's
    # allocate_tensor (supportsTensorAlloc)
    tensor_alloc: bool
    python_capabilities: tuple[tuple[str, bool], ...]  # (Python property, value)
    runtime_namespace: str
    agreement: str  # C++ bool: backend.runtime.agreement
    kit_names: tuple[str, ...]  # the kit functions the spec's expressions call unqualified
    # Config's fields after torch's: (C++ type, name, description), one per option
    config_fields: tuple[tuple[str, str, str], ...]
    # "::occl::runtime::bind_extensions" when the spec names one (backend.runtime.python_extensions)
    python_extension_calls: tuple[str, ...]
    python_extension_names: tuple[str, ...]  # the same functions, as the contract declares them
    options: tuple[OptionView, ...]
    macros: tuple[MacroView, ...]
    ops: tuple[OpView, ...]
    support: SupportView
    conformance_ops: tuple[ConformanceOpView, ...]
    not_covered: tuple[ConformanceOpView, ...]  # ops that name no semantics: the suite says so
    bad_inputs: tuple[tuple[str, ...], ...]  # each BadInput's keyword arguments, one per line
    bad_inputs_not_covered: tuple[tuple[str, str], ...]  # (test name, why): uses nobody can break
    omits: tuple[tuple[str, str], ...]  # (minimal-tier method the backend lacks, why)
    python_package: str  # Python literal: the module whose import registers the backend, or None
    registration: RegistrationView | None  # None without backend.python_package
    files: dict  # template name -> output path, relative to the project root
    header_file: str  # the backend header's file name, as the sources include it
    checks_file: str
    contract_file: str


def _snake(name: str) -> str:
    return re.sub(r"(?<=[a-z0-9])([A-Z])", r"_\1", name).lower()


def _cpp_string(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _macro_name(spec: Spec, check: Check) -> str:
    return f"{spec.backend.name.upper()}_CHECK_{check.name.upper()}"


def _message_args(check: Check) -> tuple[str, ...]:
    """Splits a check message into TORCH_CHECK pieces: literals, `label`, expressions."""
    pieces: list[str] = []
    position = 0
    for match in PLACEHOLDER.finditer(check.message):
        if match.start() > position:
            pieces.append(_cpp_string(check.message[position : match.start()]))
        expression = match.group(1)
        if expression == "label":
            pieces.append("label")
        elif expression.endswith("!text"):
            pieces.append(expression[: -len("!text")] + "_text")
        else:
            pieces.append(f"({expression})")
        position = match.end()
    if position < len(check.message):
        pieces.append(_cpp_string(check.message[position:]))
    return tuple(pieces)


def _text_params(check: Check) -> tuple[str, ...]:
    used = {
        m.group(1)[: -len("!text")]
        for m in PLACEHOLDER.finditer(check.message)
        if m.group(1).endswith("!text")
    }
    return tuple(p for p in check.params if p in used)


def _macro(spec: Spec, check: Check) -> MacroView:
    params = (_SUBJECT_NAMES[check.subject], *check.params)
    params += tuple(f"{p}_text" for p in _text_params(check))
    return MacroView(
        name=_macro_name(spec, check),
        check=check.name,
        description=check.description,
        params=params,
        condition=check.condition,
        message_args=_message_args(check),
    )


def _check_call(spec: Spec, op: Op, use: CheckUse) -> CheckCallView:
    check = spec.check(use.check)
    opens: list[str] = []
    if use.when:
        opens.append(f"if ({use.when}) {{")
    if check.subject == "value":
        subject, label = use.on, _cpp_string(use.on)
    else:
        arg = next(a for a in op.args if a.name == use.on)
        depth = 0 if check.subject == "list" else _LOOP_DEPTH[(check.subject, arg.kind)]
        subject, indices = arg.name, []
        for var in (f"i{level}" for level in range(depth)):
            opens.append(f"for (size_t {var} = 0; {var} < {subject}.size(); ++{var}) {{")
            subject = f"{subject}[{var}]"
            indices.append(var)
        label = (
            f"{_KIT}::CheckLabel({_cpp_string(arg.name)}, {', '.join(indices)})"
            if indices
            else _cpp_string(arg.name)
        )
    bound = dict(use.bindings)
    args = ["kOp.label", label, f"({subject})"]
    args += [f"({bound[p]})" for p in check.params]
    args += [_cpp_string(bound[p]) for p in _text_params(check)]
    indent = ["  " * (level + 1) for level in range(len(opens) + 1)]
    return CheckCallView(
        opens=tuple(indent[level] + line for level, line in enumerate(opens)),
        call=f"{indent[len(opens)]}{_macro_name(spec, check)}({', '.join(args)});",
        closes=tuple(indent[level] + "}" for level in reversed(range(len(opens)))),
    )


def _param(arg: Arg) -> str:
    if arg.kind == "options":
        return f"const c10d::{arg.type}& {arg.name}"
    return f"{_CPP_PARAM_TYPES[arg.kind]} {arg.name}"


def _tensors(op: Op, name: str | None) -> str:
    """The tensors of argument `name` as one std::vector<at::Tensor> (none for None)."""
    if name is None:
        return "std::vector<at::Tensor>{}"
    kind = next(a.kind for a in op.args if a.name == name)
    return {
        "tensor": f"std::vector<at::Tensor>{{{name}}}",
        "tensor_list": name,
        "tensor_list_list": f"{_KIT}::flatten({name})",
    }[kind]


def _inputs(op: Op) -> str:
    """What the op reads, for the profiler and the trace log, made only when they ask: its tensor
    argument other than the result, or the result itself for ops that work in place (allreduce,
    broadcast, send, recv)."""
    others = [a.name for a in op.args if a.kind in TENSOR_KINDS and a.name != op.result]
    return f"[&] {{ return {_tensors(op, others[0] if others else op.result)}; }}"


def _python_arg(arg: Arg) -> str:
    """An argument for a world-size-1 call in the generated smoke test."""
    return {
        "tensor": "make_tensor()",
        "tensor_list": "[make_tensor()]",
        "tensor_list_list": "[[make_tensor()]]",
        "int": "0",
        "int_list": "[]",
        "options": f"c10d.{arg.type}()",
    }[arg.kind]


def _signature(op: Op) -> str:
    """The op's occl::kit::Signature, from its `agree:` (the engine adds the op and sequence)."""
    fields = []
    for field, expression in op.agree:
        wrapper = AGREE_FIELDS[field]
        fields.append(f".{field} = {_KIT}::{wrapper}({expression})" if wrapper else f".{field} = {expression}")
    return f"{_KIT}::Signature{{{', '.join(fields)}}}"


def _submit(op: Op) -> tuple[str, ...]:
    """The statements that hand the op to the engine: its tensors as the runtime gets them
    (kit::HostTensors: on the host, staged where the device is not host-addressable), and the
    call of the runtime's function, run by the engine."""
    options = [a for a in op.args if a.kind == "options"]
    timeout = f"{options[0].name}.timeout" if options else "c10d::kUnsetTimeout"
    has_tensors = any(a.kind in TENSOR_KINDS for a in op.args)
    captures = ["runtime = runtime_.get()"] + [
        f"{a.name} = host.{'written' if a.name == op.result else 'read'}({a.name})"
        if a.kind in TENSOR_KINDS else a.name
        for a in op.args
    ]
    call_args = "".join(f", {a.name}" for a in op.args)
    run = (f"auto run = [{', '.join(captures)}]({_KIT}::OpContext& ctx) {{"
           f" runtime->{op.runtime}(ctx{call_args}); }};")
    copy_back = ", host.copy_back()" if has_tensors else ""
    tensors = f"{_inputs(op)}, {_tensors(op, op.result)}"
    if op.dispatch == "posted":
        submit = (f"return engine_->post(kOp, {timeout}, {tensors}, std::move(run){copy_back});",)
    else:
        # torch.distributed sets asyncOp = async_op, and waits at once when it is false.
        async_op = f"{options[0].name}.asyncOp" if options else "true"
        submit = (
            f"return engine_->queue(kOp, {timeout}, {async_op}, {tensors},",
            f"    {_signature(op)},",
            f"    std::move(run){copy_back});",
        )
    host = (f"{_KIT}::HostTensors host(kOp.label, is_staged_device);",) if has_tensors else ()
    return host + (run,) + submit


def _contract_param(arg: Arg) -> str:
    """How the runtime contract takes an argument: what the c10d method takes by reference, as
    a const reference; the rest by value."""
    param = _param(arg)
    return param if param.startswith("const ") or "&" not in param else f"const {param}"


def _op(spec: Spec, op: Op) -> OpView:
    return OpView(
        name=op.name,
        python_name=_snake(op.name),
        description=op.description,
        tier=op.tier,
        label=_label(spec, op),
        profiling_title=f"{spec.backend.name}:{op.name}",
        op_type=op.op_type,
        params=", ".join(_param(a) for a in op.args),
        check_calls=tuple(_check_call(spec, op, use) for use in op.checks),
        submit=_submit(op),
        runtime=op.runtime,
        contract_params=", ".join(_contract_param(a) for a in op.args),
        python_args=", ".join(dict(op.examples).get(a.name, _python_arg(a)) for a in op.args),
        alone_skip_reason=(
            "a point-to-point op needs a peer" if op.dispatch == "posted" else None
        ),
        result_index=next((i for i, a in enumerate(op.args) if a.name == op.result), None),
    )


def _option(option: Option) -> OptionView:
    if option.type == "string":
        cpp_default, python_default = _cpp_string(option.default), repr(option.default)
    elif option.type == "bool":
        cpp_default = "true" if option.default else "false"
        python_default = repr(bool(option.default))
    else:
        cpp_default = python_default = str(option.default)
    return OptionView(
        name=option.name,
        cpp_type=_CPP_OPTION_TYPES[option.type],
        cpp_default=cpp_default,
        python_default=python_default,
        description=option.description,
    )


def _support(spec: Spec) -> SupportView:
    support, name = spec.support, spec.backend.name
    rules = []
    for rule in support.reduce_ops:
        if rule.rule is None:
            verdict = "nullptr"
        else:
            allowed = " || ".join(f"dtype == at::ScalarType::{SCALAR_TYPES[d]}" for d in rule.dtypes)
            verdict = f"({allowed or 'false'}) ? nullptr : {_cpp_string(rule.rule)}"
        rules.append(ReduceRuleView(
            name=rule.name, verdict=verdict, dtypes=", ".join(rule.dtypes), rule=rule.rule or "–",
        ))
    return SupportView(
        reduce_dtype_enums=tuple(f"at::ScalarType::{SCALAR_TYPES[d]}" for d in support.reduce_dtypes),
        reduce_dtypes_refusal=_cpp_string(reduce_dtypes_refusal(name, support.reduce_dtypes)),
        reduce_ops=tuple(rules),
        undefined_reduce_op=_cpp_string(
            undefined_reduce_op_refusal(name, tuple(r.name for r in support.reduce_ops))
        ),
        dtypes=repr(support.dtypes),
        reduce_dtypes=repr(support.reduce_dtypes),
        reduce_op_rules=repr(tuple((r.name, r.dtypes, r.rule) for r in support.reduce_ops)),
        detects_mismatched=repr(support.detects_mismatched),
        promises=(
            f"future_holds_outputs={support.future_holds_outputs!r},"
            f" keeps_inputs={support.keeps_inputs!r},"
            f" keeps_non_root_tensors={support.keeps_non_root_tensors!r},"
            f" refuses={support.refuses!r}"
        ),
        mismatches=repr(MISMATCHES),
        dtypes_text=", ".join(support.dtypes),
        reduce_dtypes_text=", ".join(support.reduce_dtypes),
        detects_text=", ".join(support.detects_mismatched) or "nothing",
    )


def _agrees_on(spec: Spec, op: Op) -> str:
    if not spec.backend.runtime.agreement or op.dispatch != "queued":
        return "–"
    return ", ".join(["op", *(field for field, _ in op.agree)])


def _conformance_op(spec: Spec, op: Op) -> ConformanceOpView:
    support = spec.support
    semantics = SEMANTICS.get(op.semantics) if op.semantics else None
    reduces = semantics is not None and semantics.reduces
    if semantics is None:
        dtypes, reduce_ops = "(no semantics declared)", "–"
    else:
        reduce_op_dtypes = {r.name: r.dtypes for r in support.reduce_ops}.get
        case_dtypes = semantics.case_dtypes(
            support.dtypes, support.reduce_dtypes, lambda name: reduce_op_dtypes(name, ())
        )
        dtypes = ", ".join(d for d in case_dtypes if d) or "–"
        reduce_ops = semantics.fixed_reduce_op or "–"
        if reduces:
            reduce_ops = ", ".join(r.name for r in support.reduce_ops)
    return ConformanceOpView(
        name=op.name,
        method=_snake(op.name),
        semantics=repr(op.semantics),
        semantics_name=op.semantics or "–",
        public_calls=semantics.public_calls if semantics else "–",
        dtypes=dtypes,
        reduce_ops=reduce_ops,
        agrees_on=_agrees_on(spec, op),
    )


def _label(spec: Spec, op: Op) -> str:
    """How errors name the op: `occl.allgather`."""
    return f"{spec.backend.name}.{op.name}"


def _bad_inputs(spec: Spec) -> tuple[tuple[str, ...], tuple[tuple[str, str], ...]]:
    """The generated BadInput(...) of every check use that can be broken, each as lines of Python
    source; and (test name, why) of every use that cannot."""
    bad_inputs, not_covered = [], []
    for op in spec.ops:
        for index, use in enumerate(op.checks):
            check = spec.check(use.check)
            violation = check.violation
            test = f"{op.name.lstrip('_')}_{index}_{use.check}"
            if op.semantics is None:
                not_covered.append((test, f"{op.name} names no semantics, so the suite has no good call to break"))
                continue
            if violation is None and not use.violate:
                not_covered.append((test, f"neither check {use.check} (violation:) nor {op.name}'s use of it (violate:) says how to break it"))
                continue
            fields = {
                "op": op.name, "label": _label(spec, op), "method": _snake(op.name),
                "semantics": op.semantics, "args": tuple((a.name, a.kind) for a in op.args),
                "index": index, "check": use.check, "subject": check.subject, "on": use.on,
                "message": violation.message if violation and violation.message else check.message,
                "bindings": use.bindings, "when": use.when,
                "change": violation.change if violation else None,
                "value": violation.value if violation else None, "violate": use.violate,
            }
            lines = [f"{key}={value!r}," for key, value in fields.items() if value not in (None, ())]
            bad_inputs.append(tuple(lines))
    return tuple(bad_inputs), tuple(not_covered)


def _import(module: str, alias: str) -> str:
    package, _, name = module.rpartition(".")
    if not package:
        return f"import {name} as {alias}"
    return f"from {package} import {name}" + ("" if name == alias else f" as {alias}")


def _registration(spec: Spec) -> RegistrationView | None:
    backend = spec.backend
    if backend.python_package is None:
        return None
    return RegistrationView(
        extension_import=_import(backend.python_module, "_C"),
        hooks_import=None if backend.python_hooks is None else _import(backend.python_hooks, "hooks"),
        assignments=tuple((o.name, o.python) for o in backend.options if o.python is not None),
        privateuse1_device=any(device.privateuse1 for device in backend.devices),
    )


def _files(spec: Spec, layout: Layout) -> dict[str, str]:
    """Template name -> output path, relative to the project root."""
    name, cls = spec.backend.name, spec.backend.cpp_class
    files = {
        "backend.hpp.j2": f"csrc/{cls}.hpp",
        "backend.cpp.j2": f"csrc/{cls}.cpp",
        "checks.hpp.j2": f"csrc/{name}_checks.hpp",
        "contract.hpp.j2": f"csrc/{name}_contract.hpp",
        "bindings.cpp.j2": f"csrc/{name}_bindings.cpp",
        "test_backend.py.j2": f"tests/test_{name}_generated.py",
        "test_conformance.py.j2": f"tests/test_{name}_conformance.py",
        "operations.md.j2": f"docs/{name}_operations.md",
    }
    files = {template: layout.output_file(path) for template, path in files.items()}
    if spec.backend.python_package is not None:
        files["registration.py.j2"] = layout.python_file(spec.backend.python_package, "_registration.py")
    return files


def _device_match(device: Device) -> str:
    """A C++ condition: `device` is of this device type."""
    if device.privateuse1:
        return ("(device.type() == c10::DeviceType::PrivateUse1 &&"
                f' c10::get_privateuse1_backend() == "{device.type}")')
    return f"device.type() == c10::DeviceType::{BUILTIN_DEVICES[device.type]}"


def build_view(spec: Spec, layout: Layout) -> View:
    backend = spec.backend
    cls = backend.cpp_class
    bad_inputs, bad_inputs_not_covered = _bad_inputs(spec)
    files = _files(spec, layout)
    return View(
        header=(
            f"{GENERATED_MARKER}. Source: {layout.spec}; regenerate with `{layout.command()}`"
            f" {layout.where()}."
        ),
        spec_path=layout.spec,
        conformance_suite=files["test_conformance.py.j2"],
        backend_name=backend.name,
        namespace=backend.cpp_namespace,
        cpp_class=cls,
        python_module=backend.python_module,
        extension_name=backend.python_module.rsplit(".", 1)[-1],
        devices=tuple(device.type for device in backend.devices),
        device_matches=tuple(_device_match(device) for device in backend.devices),
        staged_device_matches=tuple(
            _device_match(device) for device in backend.devices if not device.host_addressable),
        capabilities=tuple((name, "true" if value else "false") for name, value in backend.capabilities
                           if name not in _CAPABILITIES_WITH_METHODS),
        coalescing=dict(backend.capabilities).get("supportsCoalescing", False),
        splitting=dict(backend.capabilities).get("supportsSplitting", False),
        shrinking=dict(backend.capabilities).get("supportsShrinking", False),
        tensor_alloc=dict(backend.capabilities).get("supportsTensorAlloc", False),
        python_capabilities=tuple(
            (_PYTHON_CAPABILITIES[name], value) for name, value in backend.capabilities
            if name not in _CAPABILITIES_WITH_METHODS
        ),
        runtime_namespace=backend.runtime.namespace,
        agreement="true" if backend.runtime.agreement else "false",
        kit_names=KIT_NAMES,
        config_fields=tuple(
            (_CPP_OPTION_TYPES[o.type], o.name, o.description) for o in backend.options
        ),
        python_extension_names=tuple(
            name for name in (backend.runtime.python_extensions,) if name
        ),
        python_extension_calls=tuple(
            f"::{backend.runtime.namespace}::{name}"
            for name in (backend.runtime.python_extensions,) if name
        ),
        options=tuple(_option(o) for o in backend.options),
        macros=tuple(_macro(spec, c) for c in spec.checks),
        ops=tuple(_op(spec, op) for op in spec.ops),
        support=_support(spec),
        conformance_ops=tuple(_conformance_op(spec, op) for op in spec.ops),
        not_covered=tuple(_conformance_op(spec, op) for op in spec.ops if op.semantics is None),
        bad_inputs=bad_inputs,
        bad_inputs_not_covered=bad_inputs_not_covered,
        omits=spec.omits,
        python_package=repr(backend.python_package),
        registration=_registration(spec),
        header_file=f"{cls}.hpp",
        checks_file=f"{backend.name}_checks.hpp",
        contract_file=f"{backend.name}_contract.hpp",
        files=files,
    )
