"""occl_codegen.loader: the fixture and the real spec load; each kind of broken spec fails exactly."""

from __future__ import annotations

from pathlib import Path

import pytest

from occl_codegen import model
from occl_codegen.errors import SpecError
from occl_codegen.loader import load_spec

REPO = Path(__file__).resolve().parents[2]
MINI = Path(__file__).parent / "fixtures" / "mini.yaml"


def test_real_spec_loads():
    spec = load_spec(REPO / "spec" / "collectives.yaml")
    assert spec.backend.name == "occl"
    assert spec.backend.runtime.namespace == "occl::runtime"
    assert spec.backend.runtime.python_extensions == "bind_extensions"
    assert [op.name for op in spec.ops][:3] == ["broadcast", "allreduce", "allgather"]
    # A `value` subject takes any expression; `on:` stays a key (YAML 1.1 would read it as True).
    root_rank_check = next(c for c in spec.ops[0].checks if c.check == "root_rank_in_range")
    assert root_rank_check.on == "opts.rootRank"


def test_mini_spec_loads_in_spec_order_with_lines():
    spec = load_spec(MINI)
    backend = spec.backend
    assert spec.path == str(MINI)
    assert (backend.name, backend.cpp_namespace, backend.cpp_class, backend.python_module) == (
        "acme", "acme::c10d", "ProcessGroupAcme", "acme_dist._C"
    )
    assert backend.devices == (
        model.Device("cpu", privateuse1=False, host_addressable=True, line=10),
        model.Device("cuda", privateuse1=False, host_addressable=False, line=10),
    )
    assert backend.capabilities == (("supportsCoalescing", True), ("supportsShrinking", True))
    assert backend.runtime == model.Runtime("acme::runtime", line=14, agreement=True)
    assert [(o.name, o.type, o.default, o.line) for o in backend.options] == [
        ("address", "string", "0.0.0.0", 18),
        ("port", "int", 29500, 23),
        ("verbose", "bool", False, 27),
    ]
    assert [c.name for c in spec.checks] == [
        "single_entry", "dense", "same_dtype", "one_per_rank", "rank_in_range"
    ]
    assert spec.check("same_dtype").params == ("reference",)
    assert spec.check("same_dtype").line == 42

    allgather, send, barrier, gather, recv = spec.ops
    assert allgather.line == 63
    assert allgather.args[2] == model.Arg("opts", "options", "AllgatherOptions", line=70)
    assert allgather.checks[3] == model.CheckUse(
        "same_dtype", "output_tensors", bindings=(("reference", "input_tensors[0]"),), when=None,
        line=75
    )
    assert (allgather.result, allgather.runtime) == ("output_tensors", "all_gather")
    assert send.args[1] == model.Arg(name="dstRank", kind="int", type=None, line=86)
    assert send.checks[1] == model.CheckUse("rank_in_range", "dstRank", bindings=(), when=None, line=93)
    assert (send.tier, send.op_type) == ("extended", "SEND")
    assert (barrier.result, barrier.checks) == (None, ())
    assert (send.dispatch, gather.dispatch, recv.dispatch) == ("queued", "queued", "posted")
    assert gather.checks[0].when == "rank == options.rootRank"
    assert gather.checks[1].when is None
    # `agree:` in AGREE_FIELDS order, whatever the spec's; none means only op and sequence agree
    assert gather.agree == (
        ("dtype", "inputs[0]"), ("count", "inputs[0].numel()"), ("root", "options.rootRank")
    )
    assert allgather.agree == ()


# (old text of mini.yaml, its replacement, the exact error). Line numbers are those of mini.yaml.
BROKEN_SPECS = {
    "agree on a posted op": (
        "checks: [{check: rank_in_range, on: srcRank}], result: received, runtime: recv}",
        "checks: [{check: rank_in_range, on: srcRank}], result: received, runtime: recv,\n"
        "     agree: {count: \"received[0].numel()\"}}",
        "spec.yaml:120: ops.recv.agree: only queued ops agree across ranks (this one is posted)",
    ),
    "unknown agree field": (
        'agree: {dtype: "inputs[0]",',
        'agree: {layout: "inputs[0]", dtype: "inputs[0]",',
        "spec.yaml:115: ops.gather.agree: unknown field 'layout' (fields: dtype, count, root,"
        " reduction, tensor_numels, shape, bytes_to, bytes_from)",
    ),
    "the runtime header the contract replaced": (
        "    agreement: true\n",
        "    agreement: true\n    header: acme/runtime.hpp\n",
        "spec.yaml:16: backend.runtime: unknown key 'header' (expected one of: agreement, namespace,"
        " python_extensions)",
    ),
    "unknown dispatch": (
        "dispatch: posted",
        "dispatch: later",
        "spec.yaml:117: ops.recv.dispatch: unknown dispatch 'later' (expected one of: queued, posted)",
    ),
    "when that is not a string": (
        'when: "rank == options.rootRank"',
        "when: 7",
        "spec.yaml:112: ops.gather.checks[0].when: expected a string, got an int",
    ),
    "invalid YAML": (
        "  name: acme\n",
        "  name: [acme\n",
        "spec.yaml:5: invalid YAML: expected ',' or ']', but got ':'",
    ),
    "unknown top-level key": (
        "ops:\n",
        "op:\n",
        "spec.yaml:62: unknown key 'op' (expected one of: backend, checks, omits, ops, support)",
    ),
    "unknown key in backend": (
        "  name: acme\n",
        "  name: acme\n  colour: red\n",
        "spec.yaml:5: backend: unknown key 'colour' (expected one of: capabilities, cpp_class, "
        "cpp_namespace, devices, name, options, python_hooks, python_module, python_package, runtime)",
    ),
    "semantics of another method": (
        "    runtime: all_gather\n",
        "    runtime: all_gather\n    semantics: broadcast\n",
        "spec.yaml:78: ops.allgather.semantics: semantics 'broadcast' is of a method taking"
        " (tensor_list, options), but the op's args are (tensor_list_list, tensor_list, options)",
    ),
    "unknown semantics": (
        "    runtime: all_gather\n",
        "    runtime: all_gather\n    semantics: gossip\n",
        "spec.yaml:78: ops.allgather.semantics: unknown semantics 'gossip' (expected one of: "
        "broadcast, allreduce, allreduce_sparse, allgather, allgather_base, reduce_scatter, "
        "reduce_scatter_base, barrier, allreduce_coalesced, reduce, allgather_coalesced, "
        "allgather_into_tensor_coalesced, gather, scatter, reduce_scatter_tensor_coalesced, "
        "alltoall_base, alltoall, point_to_point, recv_anysource)",
    ),
    "unknown dtype": (
        "  dtypes: [float32, int64, bool]\n",
        "  dtypes: [float32, int65]\n",
        "spec.yaml:122: support.dtypes: dtype 'int65' is not one of: float32, float64, float16,"
        " bfloat16, int8, uint8, int16, int32, int64, bool, complex64, complex128",
    ),
    "reduce op rule without dtypes": (
        'BAND: {dtypes: [integer], rule: "bitwise ops need an integer dtype"}',
        'BAND: {rule: "bitwise ops need an integer dtype"}',
        "spec.yaml:124: support.reduce_ops.BAND: 'dtypes' and 'rule' go together: a reduce op"
        " limited to some dtypes says why",
    ),
    "reduce op on a dtype reductions do not accept": (
        "BAND: {dtypes: [integer]",
        "BAND: {dtypes: [bool]",
        "spec.yaml:124: support.reduce_ops.BAND.dtypes: dtype or dtype class 'bool' is not one of:"
        " float32, int64, floating, integer, bool, complex",
    ),
    "unknown reduce op": (
        "{SUM: {},",
        "{SUM: {}, MEDIAN: {},",
        "spec.yaml:124: support.reduce_ops: unknown reduce op 'MEDIAN' (expected one of: SUM, AVG,"
        " PRODUCT, MIN, MAX, BAND, BOR, BXOR, PREMUL_SUM)",
    ),
    "a reduce op on none of the reduce dtypes": (
        "BAND: {dtypes: [integer]",
        "BAND: {dtypes: [complex]",
        "spec.yaml:124: support.reduce_ops.BAND.dtypes: names none of support.reduce_dtypes",
    ),
    "complex reductions": (
        "  reduce_dtypes: [float32, int64]\n",
        "  reduce_dtypes: [float32, complex64]\n",
        "spec.yaml:123: support.reduce_dtypes: dtype 'complex64' is not one of: float32, float64,"
        " float16, bfloat16, int8, uint8, int16, int32, int64, bool",
    ),
    "two ops of one semantics": (
        "    runtime: all_gather\n",
        "    runtime: all_gather\n    semantics: gather\n",
        "spec.yaml:109: ops.gather.semantics: semantics 'gather' is already the semantics of"
        " ops.allgather (line 63)",
    ),
    "unknown key in op": (
        "    runtime: all_gather\n",
        "    runtime: all_gather\n    foo: 1\n",
        "spec.yaml:78: ops.allgather: unknown key 'foo' (expected one of: agree, args, checks, "
        "description, dispatch, examples, op_type, result, runtime, semantics, tier)",
    ),
    "duplicate key": (
        "    tier: extended\n",
        "    tier: extended\n    tier: minimal\n",
        "spec.yaml:81: ops.send: duplicate key 'tier'",
    ),
    "duplicate key in a listed entry": (
        "{check: dense, on: output_tensors}",
        "{check: dense, on: output_tensors, on: input_tensors}",
        "spec.yaml:73: ops.allgather.checks[1]: duplicate key 'on'",
    ),
    "duplicate op name": (
        "  barrier:\n",
        "  send:\n",
        "spec.yaml:98: ops: duplicate key 'send'",
    ),
    "op name not an identifier": (
        "  send:\n",
        "  send-it:\n",
        "spec.yaml:79: ops: name 'send-it' is not a valid C/Python identifier",
    ),
    "check name not an identifier": (
        "  dense:\n",
        "  dense check:\n",
        "spec.yaml:36: checks: name 'dense check' is not a valid C/Python identifier",
    ),
    "bad C++ namespace": (
        "  cpp_namespace: acme::c10d\n",
        "  cpp_namespace: acme.c10d\n",
        "spec.yaml:5: backend.cpp_namespace: 'acme.c10d' is not a C++ namespace (identifiers joined by '::')",
    ),
    "wrong type": (
        "  devices: [cpu, {type: cuda, host_addressable: false}]\n",
        "  devices: cpu\n",
        "spec.yaml:10: backend.devices: expected a list, got a string",
    ),
    "device without host_addressable": (
        "  devices: [cpu, {type: cuda, host_addressable: false}]\n",
        "  devices: [cpu, cuda]\n",
        "spec.yaml:10: backend.devices[1]: missing key 'host_addressable' (whether the runtime may"
        " use cuda tensors' data pointers)",
    ),
    "cpu not host-addressable": (
        "  devices: [cpu, {type: cuda, host_addressable: false}]\n",
        "  devices: [{type: cpu, host_addressable: false}]\n",
        "spec.yaml:10: backend.devices[0].host_addressable: cpu memory is host memory: must be true",
    ),
    "unknown device type": (
        "  devices: [cpu, {type: cuda, host_addressable: false}]\n",
        "  devices: [cpu, {type: openreg, host_addressable: true}]\n",
        "spec.yaml:10: backend.devices[1].type: 'openreg' is not a device type torch has built in"
        " (cpu, cuda, xpu, mps, hpu, mtia, xla, ipu, ve, lazy); a device registered through"
        " PrivateUse1 says privateuse1: true",
    ),
    "built-in device as privateuse1": (
        "  devices: [cpu, {type: cuda, host_addressable: false}]\n",
        "  devices: [{type: cuda, privateuse1: true, host_addressable: false}]\n",
        "spec.yaml:10: backend.devices[0].type: 'cuda' is a device type torch has built in, not a"
        " privateuse1 device",
    ),
    "two privateuse1 devices": (
        "  devices: [cpu, {type: cuda, host_addressable: false}]\n",
        "  devices: [{type: a, privateuse1: true, host_addressable: true},"
        " {type: b, privateuse1: true, host_addressable: true}]\n",
        "spec.yaml:10: backend.devices: names more than one privateuse1 device (torch has one"
        " PrivateUse1 slot per process)",
    ),
    "duplicate device": (
        "  devices: [cpu, {type: cuda, host_addressable: false}]\n",
        "  devices: [cpu, {type: cpu}]\n",
        "spec.yaml:10: backend.devices: duplicate entry 'cpu'",
    ),
    "unknown device key": (
        "  devices: [cpu, {type: cuda, host_addressable: false}]\n",
        "  devices: [{type: cpu, colour: red}]\n",
        "spec.yaml:10: backend.devices[0]: unknown key 'colour' (expected one of: host_addressable,"
        " privateuse1, type)",
    ),
    "unknown capability": (
        "    supportsShrinking: true\n",
        "    supportsMagic: false\n",
        "spec.yaml:13: backend.capabilities: unknown key 'supportsMagic' (expected one of: supportsCoalescing, "
        "supportsShrinking, supportsSplitting, supportsTensorAlloc, supportsTimeEstimation)",
    ),
    "capability not a bool": (
        "    supportsCoalescing: true\n",
        "    supportsCoalescing: sometimes\n",
        "spec.yaml:12: backend.capabilities.supportsCoalescing: expected a bool, got a string",
    ),
    "option default of the wrong type": (
        "      default: 29500\n",
        '      default: "29500"\n',
        "spec.yaml:25: backend.options[1].default: expected an int, got a string",
    ),
    "option shadowing a c10d option": (
        "    - name: port\n",
        "    - name: timeout\n",
        "spec.yaml:23: backend.options[1].name: 'timeout' is already a field of c10d::Backend::Options",
    ),
    "missing key in check": (
        '    condition: "list.size() == 1"\n',
        "",
        "spec.yaml:30: checks.single_entry: missing key 'condition'",
    ),
    "unknown subject": (
        "    subject: tensor_list\n",
        "    subject: tensors\n",
        "spec.yaml:51: checks.one_per_rank.subject: unknown subject 'tensors' (expected one of: tensor, "
        "tensor_list, list, value)",
    ),
    "reserved param": (
        "    params: [reference]\n",
        "    params: [reference, label]\n",
        "spec.yaml:45: checks.same_dtype.params: 'label' is reserved (reserved: check, label, list, on, "
        "rank, tensor, tensors, value, violate, when, world_size)",
    ),
    "text placeholder for an undeclared param": (
        "(the dtype of {reference!text})",
        "(the dtype of {ref!text})",
        "spec.yaml:47: checks.same_dtype.message: placeholder {ref!text} names 'ref', which is not a param "
        "of the check (params: reference)",
    ),
    "text placeholder in a check without params": (
        'expected a strided tensor"',
        'expected a strided tensor ({tensor!text})"',
        "spec.yaml:40: checks.dense.message: placeholder {tensor!text} names 'tensor', which is not a param "
        "of the check (params: none)",
    ),
    "unknown placeholder conversion": (
        "{reference!text}",
        "{reference!txt}",
        "spec.yaml:47: checks.same_dtype.message: placeholder {reference!txt} has unknown conversion '!txt' "
        "(the only one is '!text')",
    ),
    "unmatched brace in message": (
        "{list.size()} entries",
        "{list.size() entries",
        "spec.yaml:34: checks.single_entry.message: unmatched '{' (placeholders are {...} and do not nest)",
    ),
    "unknown check": (
        "{check: dense, on: output_tensors}",
        "{check: sparse, on: output_tensors}",
        "spec.yaml:73: ops.allgather.checks[1].check: unknown check 'sparse' (expected one of: single_entry, "
        "dense, same_dtype, one_per_rank, rank_in_range)",
    ),
    "check applied on a missing argument": (
        "{check: dense, on: output_tensors}",
        "{check: dense, on: outputs}",
        "spec.yaml:73: ops.allgather.checks[1].on: 'outputs' is not an argument of the op (arguments: "
        "output_tensors, input_tensors, opts)",
    ),
    "check applied on an argument of the wrong kind": (
        "{check: dense, on: output_tensors}",
        "{check: dense, on: opts}",
        "spec.yaml:73: ops.allgather.checks[1].on: check 'dense' has subject tensor, which cannot be applied "
        "to 'opts' of kind options (accepted kinds: tensor, tensor_list, tensor_list_list)",
    ),
    "check use without on": (
        "{check: dense, on: output_tensors}",
        "{check: dense}",
        "spec.yaml:73: ops.allgather.checks[1]: missing key 'on'",
    ),
    "missing param binding": (
        ', reference: "input_tensors[0]"}',
        "}",
        "spec.yaml:75: ops.allgather.checks[3]: missing binding for param 'reference' of check 'same_dtype'",
    ),
    "unknown param binding": (
        'reference: "input_tensors[0]"}',
        'reference: "input_tensors[0]", expected: "1"}',
        "spec.yaml:75: ops.allgather.checks[3]: check 'same_dtype' has no param 'expected' (params: reference)",
    ),
    "param binding for a check without params": (
        "        on: tensors\n",
        "        on: tensors\n        reference: tensors\n",
        "spec.yaml:93: ops.send.checks[0]: check 'single_entry' has no param 'reference' (params: none)",
    ),
    "python extensions that are no identifier": (
        "    namespace: acme::runtime\n",
        "    namespace: acme::runtime\n    python_extensions: bind-extensions\n",
        "spec.yaml:17: backend.runtime.python_extensions: 'bind-extensions' is not a valid C/Python "
        "identifier",
    ),
    "op without runtime": (
        "    runtime: send\n",
        "",
        "spec.yaml:79: ops.send: missing key 'runtime'",
    ),
    "op with an empty runtime": (
        "    runtime: send\n",
        '    runtime: ""\n',
        "spec.yaml:96: ops.send.runtime: must not be empty",
    ),
    "unknown tier": (
        "    tier: extended\n",
        "    tier: maximal\n",
        "spec.yaml:80: ops.send.tier: unknown tier 'maximal' (expected one of: minimal, extended)",
    ),
    "bad arg kind": (
        "        kind: int\n      - name: tag\n",
        "        kind: integer\n      - name: tag\n",
        "spec.yaml:87: ops.send.args[1].kind: unknown argument kind 'integer' (expected one of: tensor, "
        "tensor_list, tensor_list_list, int, int_list, options)",
    ),
    "duplicate arg name": (
        "      - name: tag\n",
        "      - name: dstRank\n",
        "spec.yaml:88: ops.send.args[2].name: duplicate name 'dstRank'",
    ),
    "options arg without type": (
        "{name: opts, kind: options, type: BarrierOptions}",
        "{name: opts, kind: options}",
        "spec.yaml:103: ops.barrier.args[0]: missing key 'type' (the c10d options struct of an argument of "
        "kind options)",
    ),
    "type on an arg that is not options": (
        "{name: input_tensors, kind: tensor_list}",
        "{name: input_tensors, kind: tensor_list, type: Foo}",
        "spec.yaml:69: ops.allgather.args[1]: key 'type' is only for arguments of kind options, not tensor_list",
    ),
    "result naming a missing argument": (
        "    result: output_tensors\n",
        "    result: outputs\n",
        "spec.yaml:76: ops.allgather.result: 'outputs' is neither 'none' nor an argument of the op "
        "(arguments: output_tensors, input_tensors, opts)",
    ),
    "result naming an argument without tensors": (
        "    result: tensors\n",
        "    result: tag\n",
        "spec.yaml:95: ops.send.result: argument 'tag' is of kind int, which holds no tensors",
    ),
    "a minimal-tier op missing": (
        "  allreduce: the fixture shows the generator, not a usable backend\n",
        "",
        "spec.yaml:62: ops: the minimal tier needs allreduce: declare them under ops:, or list each"
        " under omits: with the reason the backend lacks it",
    ),
    "omitting an op that is not minimal": (
        "omits:\n",
        "omits:\n  gather: no root\n",
        "spec.yaml:127: omits: 'gather' is not in the minimal tier (broadcast, allreduce, allgather,"
        " _allgather_base, reduce_scatter, _reduce_scatter_base, barrier)",
    ),
    "omitting an op that is declared": (
        "omits:\n",
        "omits:\n  barrier: no\n",
        "spec.yaml:127: omits: 'barrier' is declared under ops:, so it is not omitted",
    ),
    "an extended op marked minimal": (
        "    tier: extended\n    op_type: SEND\n",
        "    tier: minimal\n    op_type: SEND\n",
        "spec.yaml:80: ops.send.tier: is 'minimal', expected 'extended' (the minimal tier is"
        " broadcast, allreduce, allgather, _allgather_base, reduce_scatter, _reduce_scatter_base,"
        " barrier)",
    ),
    "an option's python expression not a string": (
        "      description: Port to listen on.\n",
        "      description: Port to listen on.\n      python: 3\n",
        "spec.yaml:27: backend.options[1].python: expected a string, got an int",
    ),
    "an unknown violation change": (
        "    violation: {change: to_sparse}\n",
        "    violation: {change: shred}\n",
        "spec.yaml:41: checks.dense.violation.change: unknown change 'shred' (expected one of:"
        " add_entry, clear, to_dense, to_sparse, to_sparse_csr, expand, other_dtype, extra_element,"
        " to_meta, to_other_device, set, unsupported_reduce_op)",
    ),
    "a set violation without its value": (
        "    violation: {change: set, value: world_size}\n",
        "    violation: {change: set}\n",
        "spec.yaml:60: checks.rank_in_range.violation: change 'set' needs a 'value' (the Python"
        " expression to set)",
    ),
    "a value for a change that sets nothing": (
        "    violation: {change: to_sparse}\n",
        "    violation: {change: to_sparse, value: \"1\"}\n",
        "spec.yaml:41: checks.dense.violation: 'value' is only for change 'set', not 'to_sparse'",
    ),
    "a reduce-op violation of a check without one": (
        "    violation: {change: to_sparse}\n",
        "    violation: {change: unsupported_reduce_op}\n",
        "spec.yaml:41: checks.dense.violation.change: 'unsupported_reduce_op' needs the check to"
        " have a param 'reduce_op'",
    ),
    "violate naming no argument": (
        "      - {check: dense, on: output_tensors}\n",
        "      - {check: dense, on: output_tensors, violate: {outputs: \"[]\"}}\n",
        "spec.yaml:73: ops.allgather.checks[1].violate: 'outputs' is not an argument of the op"
        " (arguments: output_tensors, input_tensors, opts)",
    ),
    "a change its subject does not take": (
        "    violation: {change: to_sparse}\n",
        "    violation: {change: add_entry}\n",
        "spec.yaml:41: checks.dense.violation.change: change 'add_entry' does not apply to a tensor"
        " subject (it takes: to_dense, to_sparse, to_sparse_csr, expand, other_dtype, extra_element,"
        " to_meta, to_other_device, unsupported_reduce_op)",
    ),
    "an option's python without a python_package": (
        "  python_package: acme_dist\n  python_hooks: acme_dist.hooks\n",
        "",
        "spec.yaml:16: backend.options[0].python: only the generated registration assigns it, and"
        " there is none without backend.python_package",
    ),
    "an option calling hooks without python_hooks": (
        "  python_hooks: acme_dist.hooks\n",
        "",
        "spec.yaml:17: backend.options[0].python: 'hooks.address(backend_options.store)' calls"
        " hooks, but backend.python_hooks names no module",
    ),
    "a check expression the suite cannot evaluate": (
        '    message: "{label} has {tensors.size()} tensors, expected {world_size}"\n',
        '    message: "{label} has {tensors.size()} tensors, expected {expected_count(world_size)}"\n',
        "spec.yaml:74: ops.allgather.checks[2]: `expected_count(world_size)` uses expected_count,"
        " which the bad-input tests cannot evaluate (they know the op's arguments, the check's names"
        " and reduce_op_name, reduce_op_unsupported_reason, slice_bytes, kSupportedDevices): give"
        " check one_per_rank's violation a `message:` that does not need it",
    ),
    "an example for no argument": (
        "    runtime: all_gather\n",
        "    runtime: all_gather\n    examples: {outputs: \"[]\"}\n",
        "spec.yaml:78: ops.allgather.examples: 'outputs' is not an argument of the op (arguments:"
        " output_tensors, input_tensors, opts)",
    ),
}


@pytest.mark.parametrize("old, new, error", BROKEN_SPECS.values(), ids=BROKEN_SPECS.keys())
def test_broken_spec_fails_with_exact_error(old, new, error, tmp_path, monkeypatch):
    text = MINI.read_text(encoding="utf-8")
    assert text.count(old) == 1, f"{old!r} must occur exactly once in {MINI.name}"
    monkeypatch.chdir(tmp_path)
    Path("spec.yaml").write_text(text.replace(old, new), encoding="utf-8")
    with pytest.raises(SpecError) as raised:
        load_spec("spec.yaml")
    assert str(raised.value) == error


def test_empty_spec_fails(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    Path("spec.yaml").write_text("# nothing yet\n", encoding="utf-8")
    with pytest.raises(SpecError, match=r"^spec\.yaml:1: expected a mapping, got null$"):
        load_spec("spec.yaml")
