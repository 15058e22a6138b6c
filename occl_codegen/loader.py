"""Reads the spec into the `occl_codegen.model` dataclasses, validating it on the way.

Loading stops at the first problem and raises a `SpecError` naming the spec line and the entry:

    spec/collectives.yaml:120: ops.allgather: unknown key 'foo' (expected one of: args, ...)

Entries are named by dotted path (`backend.options[1]`, `checks.dense`, `ops.allgather.checks[2]`);
a problem with the value of one key is named by that key (`ops.allgather.runtime`).
"""

from __future__ import annotations

import keyword
import re
from pathlib import Path
from typing import Any, Callable, Iterable

import yaml

from occl_codegen import model
from occl_codegen.conformance.semantics import SEMANTICS
from occl_codegen.conformance.violations import SCOPE_NAMES, SUITE_NAMES, unknown_names, uses_param
from occl_codegen.errors import SpecError

_IDENTIFIER_PATTERN = r"[A-Za-z_][A-Za-z0-9_]*"
_IDENTIFIER = re.compile(_IDENTIFIER_PATTERN)
# (pattern, what a value must be) for `_Entry.matching`.
_CPP_NAMESPACE = (
    re.compile(rf"{_IDENTIFIER_PATTERN}(::{_IDENTIFIER_PATTERN})*"),
    "a C++ namespace (identifiers joined by '::')",
)
_PYTHON_MODULE = (
    re.compile(rf"{_IDENTIFIER_PATTERN}(\.{_IDENTIFIER_PATTERN})*"),
    "a Python module (identifiers joined by '.')",
)
# A placeholder of a check's message: `{param!text}`, else a C++ expression (`{label}` included).
# `{word!word}` is no C++ expression, so a placeholder of this form is a misspelt `!text`.
_CONVERSION = re.compile(r"(\w+)!(\w+)")

# The keys of a check use besides params, and the names a check's condition and message already
# have in scope: a param named like one of these would be ambiguous.
_RESERVED_PARAMS = (
    "check", "label", "list", "on", "rank", "tensor", "tensors", "value", "violate", "when",
    "world_size",
)
# The fields c10d::Backend::Options (and the runtime's Config) already have.
_RESERVED_OPTIONS = ("backend", "global_ranks_in_group", "group_name", "timeout")
_OPTION_DEFAULT_TYPES = {"string": str, "int": int, "bool": bool}


def load_spec(path: str | Path) -> model.Spec:
    """Reads and validates the spec at `path`; errors name the file as `path` spells it."""
    spec_path = str(path)
    top = _load_mapping(Path(path).read_text(encoding="utf-8"), spec_path)
    top.expect_keys(required=("backend", "checks", "ops", "support"), optional=("omits",))
    backend = _parse_backend(top.entry("backend"))
    checks = tuple(_parse_check(entry) for entry in top.named_entries("checks"))
    ops = tuple(_parse_op(entry, checks) for entry in top.named_entries("ops"))
    support = parse_support(top.entry("support"))
    _check_semantics_unique(top.entry("ops"), ops)
    _check_violations_readable(top.entry("ops"), ops, checks)
    omits = _parse_omits(top, ops)
    return model.Spec(
        path=spec_path, backend=backend, checks=checks, ops=ops, support=support, omits=omits
    )


def _check_violations_readable(
    entry: _Entry, ops: tuple[model.Op, ...], checks: tuple[model.Check, ...]
) -> None:
    """The bad-input tests evaluate, in Python, the expressions of every check use they break:
    each must read as Python and name only what the suite knows."""
    for op in ops:
        for index, use in enumerate(op.checks):
            check = next(c for c in checks if c.name == use.check)
            if check.violation is None and not use.violate:
                continue
            known = {a.name for a in op.args} | set(check.params) | set(SCOPE_NAMES) | set(SUITE_NAMES)
            message = (check.violation.message if check.violation else None) or check.message
            expressions = [use.on] if check.subject == "value" else []
            expressions += [use.when] if use.when else []
            expressions += [e for param, e in use.bindings if uses_param(message, param)]
            expressions += [
                placeholder for placeholder in model.PLACEHOLDER.findall(message)
                if placeholder != "label" and not placeholder.endswith("!text")
            ]
            for expression in expressions:
                try:
                    unknown = unknown_names(expression, known)
                except SyntaxError:
                    problem = f"`{expression}` does not read as Python, as the bad-input tests evaluate it"
                else:
                    if not unknown:
                        continue
                    problem = (
                        f"`{expression}` uses {', '.join(unknown)}, which the bad-input tests cannot"
                        f" evaluate (they know the op's arguments, the check's names and"
                        f" {', '.join(SUITE_NAMES)}): give check {use.check}'s violation a"
                        " `message:` that does not need it"
                    )
                raise SpecError(entry.spec_path, use.line, f"ops.{op.name}.checks[{index}]", problem)


def _parse_omits(top: _Entry, ops: tuple[model.Op, ...]) -> tuple[tuple[str, str], ...]:
    """The minimal-tier methods the spec lacks on purpose; any other one missing is an error."""
    declared = {op.name for op in ops}
    omits: dict[str, str] = {}
    if "omits" in top.mapping:
        entry = top.entry("omits")
        for name in entry.mapping:
            if name not in model.MINIMAL_TIER:
                problem = f"{name!r} is not in the minimal tier ({', '.join(model.MINIMAL_TIER)})"
                raise entry.error(problem, name)
            if name in declared:
                raise entry.error(f"{name!r} is declared under ops:, so it is not omitted", name)
            omits[name] = entry.string(name)
    missing = [name for name in model.MINIMAL_TIER if name not in declared and name not in omits]
    if missing:
        problem = (
            f"the minimal tier needs {_list(missing)}: declare them under ops:, or list each"
            " under omits: with the reason the backend lacks it"
        )
        raise SpecError(top.spec_path, top.mapping.key_lines["ops"], "ops", problem)
    return tuple(omits.items())


def _check_semantics_unique(entry: _Entry, ops: tuple[model.Op, ...]) -> None:
    """Only a shared semantics (send and recv) may be named by two ops: the suite runs one
    semantics' cases once."""
    for index, op in enumerate(ops):
        if op.semantics is None or SEMANTICS[op.semantics].shared:
            continue
        first = next(o for o in ops[:index + 1] if o.semantics == op.semantics)
        if first is not op:
            location = f"ops.{op.name}.semantics"
            problem = f"semantics {op.semantics!r} is already the semantics of ops.{first.name} (line {first.line})"
            raise SpecError(entry.spec_path, op.line, location, problem)


def load_capabilities(path: str | Path) -> tuple[str, model.Support, dict[str, str]]:
    """Another backend's capability table: (its name, what it supports, {op: why it has not})."""
    table_path = str(path)
    top = _load_mapping(Path(path).read_text(encoding="utf-8"), table_path)
    top.expect_keys(required=("backend", "support"), optional=("unsupported_ops",))
    unsupported = {}
    if "unsupported_ops" in top.mapping:
        reasons = top.entry("unsupported_ops")
        unsupported = {name: reasons.string(name) for name in reasons.mapping}
    return top.string("backend"), parse_support(top.entry("support")), unsupported


def _load_mapping(text: str, path: str) -> _Entry:
    loader = _SpecLoader(text, path)
    try:
        document = loader.get_single_data()
    except yaml.MarkedYAMLError as error:
        problem = f"invalid YAML: {error.problem}"
        raise SpecError(path, _line(error.problem_mark), "", problem) from None
    finally:
        loader.dispose()
    if type(document) is not _Mapping:
        raise SpecError(path, 1, "", f"expected a mapping, got {_type_name(type(document))}")
    return _Entry(path, document, location="", line=document.line)


def parse_support(entry: _Entry) -> model.Support:
    """`support:`: the dtypes ops accept, the reduce ops and their rules, what is detected."""
    entry.expect_keys(
        required=("dtypes", "reduce_dtypes", "reduce_ops"),
        optional=(
            "detects_mismatched", "future_holds_outputs", "keeps_inputs", "keeps_non_root_tensors",
            "refuses",
        ),
    )
    dtypes = _dtype_list(entry, "dtypes", model.DTYPES)
    # The references reduce in float64 or int64: complex reductions have none.
    reduce_dtypes = _dtype_list(entry, "reduce_dtypes", model.REDUCIBLE_DTYPES)
    rules = entry.entry("reduce_ops")
    reduce_ops = []
    for name in rules.mapping:
        if name not in model.REDUCE_OPS:
            problem = f"unknown reduce op {name!r} (expected one of: {', '.join(model.REDUCE_OPS)})"
            raise rules.error(problem, name)
        reduce_ops.append(_parse_reduce_op(rules.entry(name), reduce_dtypes))
    detects = ()
    if "detects_mismatched" in entry.mapping:
        detects = entry.identifiers("detects_mismatched")
        for kind in detects:
            if kind not in model.MISMATCHES:
                problem = f"unknown mismatch {kind!r} (expected one of: {', '.join(model.MISMATCHES)})"
                raise entry.value_error("detects_mismatched", problem)
    refuses = []
    if "refuses" in entry.mapping:
        for refusal in entry.listed_entries("refuses"):
            refusal.expect_keys(required=("cases", "reason"))
            pattern = refusal.string("cases")
            try:
                re.compile(pattern)
            except re.error as error:
                raise refusal.value_error("cases", f"{pattern!r} is not a regex: {error}") from None
            refuses.append((pattern, refusal.string("reason")))
    return model.Support(
        dtypes=dtypes, reduce_dtypes=reduce_dtypes, reduce_ops=tuple(reduce_ops),
        detects_mismatched=detects, line=entry.line,
        future_holds_outputs=_flag(entry, "future_holds_outputs"),
        keeps_inputs=_flag(entry, "keeps_inputs"),
        keeps_non_root_tensors=_flag(entry, "keeps_non_root_tensors"),
        refuses=tuple(refuses),
    )


def _flag(entry: _Entry, key: str) -> bool:
    """A promise of `support:`: true unless the entry says false."""
    return entry.get(key, bool) if key in entry.mapping else True


def _dtype_list(entry: _Entry, key: str, allowed: Iterable[str], classes: bool = False) -> tuple:
    """A list of dtype names (and, if `classes`, dtype classes, expanded) from `allowed`."""
    names = entry.identifiers(key)
    expanded: list[str] = []
    for name in names:
        if name in allowed:
            expanded.append(name)
        elif classes and name in model.DTYPE_CLASSES and name not in model.DTYPES:
            expanded += [d for d in model.DTYPE_CLASSES[name] if d in allowed]
        else:
            what = "dtype or dtype class" if classes else "dtype"
            choices = (*allowed, *model.DTYPE_CLASSES) if classes else allowed
            problem = f"{what} {name!r} is not one of: {', '.join(choices)}"
            raise entry.value_error(key, problem)
    return tuple(dict.fromkeys(expanded))


def _parse_reduce_op(entry: _Entry, reduce_dtypes: tuple[str, ...]) -> model.ReduceOpRule:
    entry.expect_keys(required=(), optional=("dtypes", "rule"))
    if ("dtypes" in entry.mapping) != ("rule" in entry.mapping):
        raise entry.error(
            "'dtypes' and 'rule' go together: a reduce op limited to some dtypes says why"
        )
    if "dtypes" not in entry.mapping:
        return model.ReduceOpRule(entry.name, reduce_dtypes, None, entry.line)
    dtypes = _dtype_list(entry, "dtypes", reduce_dtypes, classes=True)
    if not dtypes and entry.mapping["dtypes"]:
        raise entry.value_error("dtypes", "names none of support.reduce_dtypes")
    return model.ReduceOpRule(entry.name, dtypes, entry.string("rule"), entry.line)


class _Mapping(dict):
    """A YAML mapping that remembers its own line and the line of each key."""

    def __init__(self, line: int):
        super().__init__()
        self.line = line
        self.key_lines: dict[str, int] = {}


class _SpecLoader(yaml.SafeLoader):
    """A SafeLoader that builds `_Mapping`s and rejects duplicate keys.

    Keys are kept verbatim as strings, so YAML 1.1 does not turn the key `on` into True.
    """

    def __init__(self, text: str, spec_path: str):
        super().__init__(text)
        self.spec_path = spec_path

    def construct_document(self, node: yaml.Node) -> Any:
        self._reject_duplicate_keys(node, location="")
        return super().construct_document(node)

    def _reject_duplicate_keys(self, node: yaml.Node, location: str) -> None:
        if isinstance(node, yaml.SequenceNode):
            for index, item in enumerate(node.value):
                self._reject_duplicate_keys(item, f"{location}[{index}]")
        elif isinstance(node, yaml.MappingNode):
            seen = set()
            for key_node, value_node in node.value:
                key, line = key_node.value, _line(key_node.start_mark)
                if not isinstance(key_node, yaml.ScalarNode):
                    raise SpecError(self.spec_path, line, location, "keys must be strings")
                if key in seen:
                    raise SpecError(self.spec_path, line, location, f"duplicate key {key!r}")
                seen.add(key)
                self._reject_duplicate_keys(value_node, _join(location, key))

    def _construct_mapping(self, node: yaml.MappingNode):
        mapping = _Mapping(_line(node.start_mark))
        yield mapping
        for key_node, value_node in node.value:
            mapping[key_node.value] = self.construct_object(value_node)
            mapping.key_lines[key_node.value] = _line(key_node.start_mark)


_SpecLoader.add_constructor("tag:yaml.org,2002:map", _SpecLoader._construct_mapping)


class _Entry:
    """A mapping of the spec under validation: typed access to its keys, errors at its location."""

    def __init__(
        self, spec_path: str, mapping: _Mapping, location: str, line: int, name: str = ""
    ):
        self.spec_path = spec_path
        self.mapping = mapping
        self.location = location
        self.line = line
        self.name = name  # the key the entry is stored under, for entries of a mapping

    def error(self, problem: str, key: str | None = None) -> SpecError:
        """An error about the entry, reported at `key`'s line if given."""
        line = self.mapping.key_lines[key] if key else self.line
        return SpecError(self.spec_path, line, self.location, problem)

    def value_error(self, key: str, problem: str) -> SpecError:
        """An error about the value of `key`."""
        location = _join(self.location, key)
        return SpecError(self.spec_path, self.mapping.key_lines[key], location, problem)

    def expect_keys(self, required: tuple[str, ...], optional: tuple[str, ...] = ()) -> None:
        expected = required + optional
        for key in self.mapping:
            if key not in expected:
                problem = f"unknown key {key!r} (expected one of: {', '.join(sorted(expected))})"
                raise self.error(problem, key)
        for key in required:
            if key not in self.mapping:
                raise self.error(f"missing key {key!r}")

    def get(self, key: str, expected_type: type) -> Any:
        value = self.mapping[key]
        if type(value) is not expected_type:
            problem = f"expected {_type_name(expected_type)}, got {_type_name(type(value))}"
            raise self.value_error(key, problem)
        return value

    def string(self, key: str) -> str:
        value = self.get(key, str)
        if not value.strip():
            raise self.value_error(key, "must not be empty")
        return value

    def matching(self, key: str, pattern: re.Pattern, what: str) -> str:
        """A string that `pattern` matches; `what` says in words what it must be."""
        value = self.string(key)
        if not pattern.fullmatch(value):
            raise self.value_error(key, f"{value!r} is not {what}")
        return value

    def identifier(self, key: str) -> str:
        value = self.string(key)
        if not _is_identifier(value):
            raise self.value_error(key, f"{value!r} is not a valid C/Python identifier")
        return value

    def one_of(self, key: str, choices: Iterable[str], what: str) -> str:
        value, choices = self.string(key), tuple(choices)
        if value not in choices:
            problem = f"unknown {what} {value!r} (expected one of: {', '.join(choices)})"
            raise self.value_error(key, problem)
        return value

    def identifiers(self, key: str) -> tuple[str, ...]:
        """A list of distinct identifiers."""
        values = self.get(key, list)
        for index, value in enumerate(values):
            if type(value) is not str or not _is_identifier(value):
                raise self.value_error(key, f"{value!r} is not a valid C/Python identifier")
            if value in values[:index]:
                raise self.value_error(key, f"duplicate entry {value!r}")
        return tuple(values)

    def entry(self, key: str) -> _Entry:
        """The mapping stored under `key`."""
        mapping, location = self.get(key, _Mapping), _join(self.location, key)
        return _Entry(self.spec_path, mapping, location, self.mapping.key_lines[key], name=key)

    def named_entries(self, key: str) -> list[_Entry]:
        """The mappings stored under `key`, each under its name (`checks`, `ops`)."""
        container = self.entry(key)
        for name in container.mapping:
            if not _is_identifier(name):
                raise container.error(f"name {name!r} is not a valid C/Python identifier", name)
        return [container.entry(name) for name in container.mapping]

    def listed_entries(self, key: str) -> list[_Entry]:
        """The mappings listed under `key`."""
        entries = []
        for index, item in enumerate(self.get(key, list)):
            location = f"{_join(self.location, key)}[{index}]"
            if type(item) is not _Mapping:
                problem = f"expected a mapping, got {_type_name(type(item))}"
                raise SpecError(self.spec_path, self.mapping.key_lines[key], location, problem)
            entries.append(_Entry(self.spec_path, item, location, item.line))
        return entries


def _parse_backend(entry: _Entry) -> model.Backend:
    entry.expect_keys(
        required=(
            "name", "cpp_namespace", "cpp_class", "python_module", "devices",
            "capabilities", "runtime", "options",
        ),
        optional=("python_package", "python_hooks"),
    )
    name = entry.identifier("name")
    cpp_namespace = entry.matching("cpp_namespace", *_CPP_NAMESPACE)
    cpp_class = entry.identifier("cpp_class")
    python_module = entry.matching("python_module", *_PYTHON_MODULE)
    devices = _parse_devices(entry)
    backend = model.Backend(
        name=name,
        cpp_namespace=cpp_namespace,
        cpp_class=cpp_class,
        python_module=python_module,
        devices=devices,
        capabilities=_parse_capabilities(entry.entry("capabilities")),
        runtime=_parse_runtime(entry.entry("runtime")),
        options=_parse_named_list(entry, "options", _parse_option),
        line=entry.line,
        python_package=(
            entry.matching("python_package", *_PYTHON_MODULE)
            if "python_package" in entry.mapping
            else None
        ),
        python_hooks=(
            entry.matching("python_hooks", *_PYTHON_MODULE)
            if "python_hooks" in entry.mapping
            else None
        ),
    )
    _check_python_options(entry, backend)
    return backend


def _parse_devices(backend: _Entry) -> tuple[model.Device, ...]:
    """backend.devices: device types, each a name (a built-in host device: cpu) or a mapping
    {type, privateuse1 (default false), host_addressable (required but for cpu)}."""
    items = backend.get("devices", list)
    if not items:
        raise backend.value_error("devices", "must list at least one device type")
    devices: list[model.Device] = []
    for index, item in enumerate(items):
        location = f"{backend.location}.devices[{index}]"
        if type(item) is str:
            name, item = item, _Mapping(backend.mapping.key_lines["devices"])
            item["type"], item.key_lines["type"] = name, item.line
        elif type(item) is not _Mapping:
            problem = f"expected a device type or a mapping, got {_type_name(type(item))}"
            raise SpecError(backend.spec_path, backend.mapping.key_lines["devices"], location, problem)
        devices.append(_parse_device(_Entry(backend.spec_path, item, location, item.line)))
        if devices[-1].type in [device.type for device in devices[:-1]]:
            raise backend.value_error("devices", f"duplicate entry {devices[-1].type!r}")
    if sum(device.privateuse1 for device in devices) > 1:
        raise backend.value_error("devices", "names more than one privateuse1 device (torch has one PrivateUse1 slot per process)")
    return tuple(devices)


def _parse_device(entry: _Entry) -> model.Device:
    entry.expect_keys(required=("type",), optional=("privateuse1", "host_addressable"))
    name = entry.identifier("type")
    privateuse1 = entry.get("privateuse1", bool) if "privateuse1" in entry.mapping else False
    if privateuse1 and name in model.BUILTIN_DEVICES:
        raise entry.value_error("type", f"{name!r} is a device type torch has built in, not a privateuse1 device")
    if not privateuse1 and name not in model.BUILTIN_DEVICES:
        problem = (f"{name!r} is not a device type torch has built in ({', '.join(model.BUILTIN_DEVICES)});"
                   " a device registered through PrivateUse1 says privateuse1: true")
        raise entry.value_error("type", problem)
    if "host_addressable" in entry.mapping:
        host_addressable = entry.get("host_addressable", bool)
        if name == "cpu" and not host_addressable:
            raise entry.value_error("host_addressable", "cpu memory is host memory: must be true")
    elif name == "cpu":
        host_addressable = True
    else:
        raise entry.error(f"missing key 'host_addressable' (whether the runtime may use {name} tensors' data pointers)")
    return model.Device(type=name, privateuse1=privateuse1, host_addressable=host_addressable,
                        line=entry.line)


def _check_python_options(entry: _Entry, backend: model.Backend) -> None:
    """An option's `python:` is assigned by the generated registration, which exists only with a
    python_package, and may call `hooks` only if python_hooks names them."""
    for index, option in enumerate(backend.options):
        if option.python is None:
            continue
        location = f"backend.options[{index}].python"
        if backend.python_package is None:
            problem = "only the generated registration assigns it, and there is none without backend.python_package"
            raise SpecError(entry.spec_path, option.line, location, problem)
        if re.search(r"\bhooks\b", option.python) and backend.python_hooks is None:
            problem = f"{option.python!r} calls hooks, but backend.python_hooks names no module"
            raise SpecError(entry.spec_path, option.line, location, problem)


def _parse_capabilities(entry: _Entry) -> tuple[tuple[str, bool], ...]:
    entry.expect_keys(required=(), optional=model.CAPABILITIES)
    return tuple((name, entry.get(name, bool)) for name in entry.mapping)


def _parse_runtime(entry: _Entry) -> model.Runtime:
    entry.expect_keys(required=("namespace",), optional=("python_extensions", "agreement"))
    return model.Runtime(
        namespace=entry.matching("namespace", *_CPP_NAMESPACE),
        line=entry.line,
        python_extensions=(
            entry.identifier("python_extensions") if "python_extensions" in entry.mapping else None
        ),
        agreement=entry.get("agreement", bool) if "agreement" in entry.mapping else False,
    )


def _parse_option(entry: _Entry) -> model.Option:
    entry.expect_keys(required=("name", "type", "default", "description"), optional=("python",))
    name = entry.identifier("name")
    if name in _RESERVED_OPTIONS:
        raise entry.value_error("name", f"{name!r} is already a field of c10d::Backend::Options")
    option_type = entry.one_of("type", model.OPTION_TYPES, "option type")
    return model.Option(
        name=name,
        type=option_type,
        default=entry.get("default", _OPTION_DEFAULT_TYPES[option_type]),
        description=entry.string("description"),
        line=entry.line,
        python=entry.string("python") if "python" in entry.mapping else None,
    )


def _parse_check(entry: _Entry) -> model.Check:
    entry.expect_keys(
        required=("description", "subject", "condition", "message"),
        optional=("params", "violation"),
    )
    description = entry.string("description")
    subject = entry.one_of("subject", model.SUBJECT_KINDS, "subject")
    params = entry.identifiers("params") if "params" in entry.mapping else ()
    for param in params:
        if param in _RESERVED_PARAMS:
            problem = f"{param!r} is reserved (reserved: {', '.join(_RESERVED_PARAMS)})"
            raise entry.value_error("params", problem)
    return model.Check(
        name=entry.name,
        description=description,
        subject=subject,
        params=params,
        condition=entry.string("condition"),
        message=_parse_message(entry, params),
        line=entry.line,
        violation=(
            _parse_violation(entry.entry("violation"), subject, params)
            if "violation" in entry.mapping
            else None
        ),
    )


def _parse_violation(entry: _Entry, subject: str, params: tuple[str, ...]) -> model.Violation:
    entry.expect_keys(required=("change",), optional=("value", "message"))
    change = entry.one_of("change", model.VIOLATION_CHANGES, "change")
    if change not in model.VIOLATION_SUBJECTS[subject]:
        problem = (
            f"change {change!r} does not apply to a {subject} subject (it takes:"
            f" {', '.join(model.VIOLATION_SUBJECTS[subject])})"
        )
        raise entry.value_error("change", problem)
    if change == "set" and "value" not in entry.mapping:
        raise entry.error("change 'set' needs a 'value' (the Python expression to set)")
    if change != "set" and "value" in entry.mapping:
        raise entry.error(f"'value' is only for change 'set', not {change!r}", "value")
    if change == "unsupported_reduce_op" and "reduce_op" not in params:
        raise entry.value_error("change", "'unsupported_reduce_op' needs the check to have a param 'reduce_op'")
    return model.Violation(
        change=change,
        value=entry.string("value") if "value" in entry.mapping else None,
        message=_parse_message(entry, params) if "message" in entry.mapping else None,
        line=entry.line,
    )


def _parse_message(entry: _Entry, params: tuple[str, ...]) -> str:
    """A check's message, whose placeholders pair up and whose `{param!text}`s name params."""
    message = entry.string("message")
    unpaired = re.search(r"[{}]", model.PLACEHOLDER.sub("", message))
    if unpaired:
        problem = f"unmatched {unpaired[0]!r} (placeholders are {{...}} and do not nest)"
        raise entry.value_error("message", problem)
    for placeholder in model.PLACEHOLDER.findall(message):
        if not placeholder.strip():
            raise entry.value_error("message", "empty placeholder {}")
        param = placeholder.removesuffix("!text")
        if param != placeholder and param not in params:
            problem = (
                f"placeholder {{{placeholder}}} names {param!r}, which is not a param of the check"
                f" (params: {_list(params)})"
            )
            raise entry.value_error("message", problem)
        conversion = _CONVERSION.fullmatch(placeholder)
        if conversion and conversion[2] != "text":
            problem = (
                f"placeholder {{{placeholder}}} has unknown conversion '!{conversion[2]}'"
                " (the only one is '!text')"
            )
            raise entry.value_error("message", problem)
    return message


def _parse_op(entry: _Entry, checks: tuple[model.Check, ...]) -> model.Op:
    entry.expect_keys(
        required=("tier", "op_type", "description", "args", "checks", "result", "runtime"),
        optional=("dispatch", "examples", "semantics", "agree"),
    )
    tier = entry.one_of("tier", model.TIERS, "tier")
    if (tier == "minimal") != (entry.name in model.MINIMAL_TIER):
        expected = "minimal" if entry.name in model.MINIMAL_TIER else "extended"
        raise entry.value_error(
            "tier", f"is {tier!r}, expected {expected!r} (the minimal tier is {_list(model.MINIMAL_TIER)})"
        )
    op_type = entry.identifier("op_type")
    description = entry.string("description")
    args = _parse_named_list(entry, "args", _parse_arg)
    dispatch = (
        entry.one_of("dispatch", model.DISPATCHES, "dispatch") if "dispatch" in entry.mapping else "queued"
    )
    return model.Op(
        name=entry.name,
        tier=tier,
        op_type=op_type,
        description=description,
        args=args,
        checks=tuple(_parse_check_use(use, checks, args) for use in entry.listed_entries("checks")),
        result=_parse_result(entry, args),
        runtime=entry.identifier("runtime"),
        dispatch=dispatch,
        examples=_parse_examples(entry, args) if "examples" in entry.mapping else (),
        agree=_parse_agree(entry, dispatch) if "agree" in entry.mapping else (),
        semantics=_parse_semantics(entry, args) if "semantics" in entry.mapping else None,
        line=entry.line,
    )


def _parse_agree(entry: _Entry, dispatch: str) -> tuple[tuple[str, str], ...]:
    """`agree: {FIELD: C++ EXPR}`: what every rank's call must have alike (queued ops only)."""
    if dispatch != "queued":
        raise entry.value_error("agree", "only queued ops agree across ranks (this one is posted)")
    agree = entry.entry("agree")
    for field in agree.mapping:
        if field not in model.AGREE_FIELDS:
            problem = f"unknown field {field!r} (fields: {_list(model.AGREE_FIELDS)})"
            raise agree.error(problem, field)
    return tuple((field, agree.string(field)) for field in model.AGREE_FIELDS if field in agree.mapping)


def _parse_semantics(entry: _Entry, args: tuple[model.Arg, ...]) -> str:
    """A name from occl_codegen.conformance.semantics whose method takes the op's argument kinds."""
    name = entry.one_of("semantics", SEMANTICS, "semantics")
    expected = SEMANTICS[name].arg_kinds
    kinds = tuple(arg.kind for arg in args)
    if kinds != expected:
        problem = (
            f"semantics {name!r} is of a method taking ({', '.join(expected)}), but the op's args"
            f" are ({', '.join(kinds)})"
        )
        raise entry.value_error("semantics", problem)
    return name


def _parse_examples(entry: _Entry, args: tuple[model.Arg, ...]) -> tuple[tuple[str, str], ...]:
    """`examples: {ARG: PYTHON_EXPR}`: inputs the generated tests pass instead of the defaults."""
    return _parse_arg_expressions(entry.entry("examples"), args)


def _parse_arg_expressions(
    mapping: _Entry, args: tuple[model.Arg, ...]
) -> tuple[tuple[str, str], ...]:
    """`{ARG: PYTHON_EXPR, ...}`, each key an argument of the op."""
    for name in mapping.mapping:
        if _find_arg(args, name) is None:
            problem = f"{name!r} is not an argument of the op (arguments: {_list(a.name for a in args)})"
            raise mapping.error(problem, name)
    return tuple((name, mapping.string(name)) for name in mapping.mapping)


def _parse_arg(entry: _Entry) -> model.Arg:
    entry.expect_keys(required=("name", "kind"), optional=("type",))
    name = entry.identifier("name")
    kind = entry.one_of("kind", model.ARG_KINDS, "argument kind")
    if kind == "options" and "type" not in entry.mapping:
        problem = "missing key 'type' (the c10d options struct of an argument of kind options)"
        raise entry.error(problem)
    if kind != "options" and "type" in entry.mapping:
        raise entry.error(f"key 'type' is only for arguments of kind options, not {kind}", "type")
    arg_type = entry.identifier("type") if kind == "options" else None
    return model.Arg(name=name, kind=kind, type=arg_type, line=entry.line)


def _parse_check_use(
    entry: _Entry, checks: tuple[model.Check, ...], args: tuple[model.Arg, ...]
) -> model.CheckUse:
    """`{check: NAME, on: SUBJECT, PARAM: EXPR, ..., when: COND}`: binds every param of the check."""
    for key in ("check", "on"):
        if key not in entry.mapping:
            raise entry.error(f"missing key {key!r}")
    name = entry.one_of("check", (check.name for check in checks), "check")
    check = next(check for check in checks if check.name == name)
    for key in entry.mapping:
        if key not in ("check", "on", "when", "violate", *check.params):
            problem = f"check {name!r} has no param {key!r} (params: {_list(check.params)})"
            raise entry.error(problem, key)
    for param in check.params:
        if param not in entry.mapping:
            raise entry.error(f"missing binding for param {param!r} of check {name!r}")
    return model.CheckUse(
        check=name,
        on=_parse_on(entry, check, args),
        bindings=tuple((param, entry.string(param)) for param in check.params),
        when=entry.string("when") if "when" in entry.mapping else None,
        line=entry.line,
        violate=_parse_violate(entry, args) if "violate" in entry.mapping else (),
    )


def _parse_violate(entry: _Entry, args: tuple[model.Arg, ...]) -> tuple[tuple[str, str], ...]:
    """`violate: {ARG: PYTHON_EXPR, ...}`: what the op's bad-input test passes instead."""
    return _parse_arg_expressions(entry.entry("violate"), args)


def _parse_on(entry: _Entry, check: model.Check, args: tuple[model.Arg, ...]) -> str:
    """What a check is applied on: an argument its subject accepts, or any expression (`value`)."""
    on = entry.string("on")
    accepted_kinds = model.SUBJECT_ACCEPTS[check.subject]
    if accepted_kinds is None:
        return on
    arg = _find_arg(args, on)
    if arg is None:
        problem = f"{on!r} is not an argument of the op (arguments: {_list(a.name for a in args)})"
        raise entry.value_error("on", problem)
    if arg.kind not in accepted_kinds:
        problem = (
            f"check {check.name!r} has subject {check.subject}, which cannot be applied to {on!r}"
            f" of kind {arg.kind} (accepted kinds: {', '.join(accepted_kinds)})"
        )
        raise entry.value_error("on", problem)
    return on


def _parse_result(entry: _Entry, args: tuple[model.Arg, ...]) -> str | None:
    result = entry.string("result")
    if result == "none":
        return None
    arg = _find_arg(args, result)
    if arg is None:
        problem = (
            f"{result!r} is neither 'none' nor an argument of the op"
            f" (arguments: {_list(a.name for a in args)})"
        )
        raise entry.value_error("result", problem)
    if arg.kind not in model.TENSOR_KINDS:
        problem = f"argument {result!r} is of kind {arg.kind}, which holds no tensors"
        raise entry.value_error("result", problem)
    return result


def _parse_named_list(entry: _Entry, key: str, parse: Callable[[_Entry], Any]) -> tuple:
    """Parses the mappings listed under `key` with `parse`; the results' names must be distinct."""
    items = []
    for item_entry in entry.listed_entries(key):
        item = parse(item_entry)
        if any(other.name == item.name for other in items):
            raise item_entry.value_error("name", f"duplicate name {item.name!r}")
        items.append(item)
    return tuple(items)


def _find_arg(args: tuple[model.Arg, ...], name: str) -> model.Arg | None:
    return next((arg for arg in args if arg.name == name), None)


def _is_identifier(name: str) -> bool:
    return bool(_IDENTIFIER.fullmatch(name)) and not keyword.iskeyword(name)


def _list(names: Iterable[str]) -> str:
    return ", ".join(names) or "none"


def _join(location: str, key: str) -> str:
    return f"{location}.{key}" if location else key


def _line(mark: yaml.Mark) -> int:
    return mark.line + 1


_TYPE_NAMES = {
    _Mapping: "a mapping", list: "a list", str: "a string", bool: "a bool", int: "an int",
    float: "a float", type(None): "null",
}


def _type_name(value_type: type) -> str:
    return _TYPE_NAMES.get(value_type, value_type.__name__)
