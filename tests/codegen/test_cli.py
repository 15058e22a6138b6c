"""`python -m codegen`: writing, pruning and --check, with a fake renderer for the templates."""

from __future__ import annotations

import sys
import types
from pathlib import Path

import pytest

from codegen.__main__ import GENERATED_MARKER, main

MINI = Path(__file__).parent / "fixtures" / "mini.yaml"


def fake_render_all(spec, spec_label):
    """One header naming the backend and one source per op, each carrying the marker."""
    files = {"backend.hpp": f"// {GENERATED_MARKER}\n// backend {spec.backend.name}\n"}
    for op in spec.ops:
        files[f"ops/{op.name}.cpp"] = f"// {GENERATED_MARKER}\nvoid {op.name}();\n"
    return files


@pytest.fixture(autouse=True)
def in_tmp_with_fake_renderer(tmp_path, monkeypatch):
    """Runs each test in tmp_path, where `python -m codegen` renders with `fake_render_all`."""
    fake_render = types.SimpleNamespace(render_all=fake_render_all)
    monkeypatch.setitem(sys.modules, "codegen.render", fake_render)
    monkeypatch.chdir(tmp_path)


def generate(*options: str) -> int:
    return main(["--spec", str(MINI), "--out", "generated", *options])


def test_write_creates_every_file(capsys):
    assert generate() == 0
    assert capsys.readouterr().out == (
        "wrote generated/backend.hpp\n"
        "wrote generated/ops/allgather.cpp\n"
        "wrote generated/ops/send.cpp\n"
        "wrote generated/ops/barrier.cpp\n"
        "wrote generated/ops/gather.cpp\n"
        "wrote generated/ops/recv.cpp\n"
    )
    written = Path("generated/ops/send.cpp").read_bytes()
    assert written == f"// {GENERATED_MARKER}\nvoid send();\n".encode()


def test_check_after_write_is_clean(capsys):
    generate()
    capsys.readouterr()
    assert generate("--check") == 0
    assert capsys.readouterr().out == "generated/ is up to date\n"


def test_check_reports_stale_file_with_diff(capsys):
    generate()
    edited = f"// {GENERATED_MARKER}\n// backend edited\n"
    Path("generated/backend.hpp").write_text(edited, encoding="utf-8")
    capsys.readouterr()
    assert generate("--check") == 1
    captured = capsys.readouterr()
    assert captured.out == (
        "stale: generated/backend.hpp\n"
        "--- generated/backend.hpp\n"
        "+++ generated/backend.hpp (from the spec)\n"
        "@@ -1,2 +1,2 @@\n"
        f" // {GENERATED_MARKER}\n"
        "-// backend edited\n"
        "+// backend acme\n"
    )
    assert captured.err == "generated/ is out of date; run `python -m codegen` to regenerate it\n"


def test_check_reports_missing_file(capsys):
    generate()
    Path("generated/ops/send.cpp").unlink()
    capsys.readouterr()
    assert generate("--check") == 1
    assert capsys.readouterr().out == "missing: generated/ops/send.cpp\n"


def test_check_reports_orphaned_generated_file_and_ignores_others(capsys):
    generate()
    Path("generated/ops/old.cpp").write_text(f"// {GENERATED_MARKER}\n", encoding="utf-8")
    Path("generated/README.txt").write_text("hand-written\n", encoding="utf-8")
    capsys.readouterr()
    assert generate("--check") == 1
    assert capsys.readouterr().out == (
        "orphaned: generated/ops/old.cpp (the spec no longer produces it)\n"
    )


def test_write_deletes_orphaned_generated_files_only(capsys):
    generate()
    Path("generated/ops/old.cpp").write_text(f"// {GENERATED_MARKER}\n", encoding="utf-8")
    Path("generated/README.txt").write_text("hand-written\n", encoding="utf-8")
    capsys.readouterr()
    assert generate() == 0
    captured = capsys.readouterr()
    assert "deleted generated/ops/old.cpp\n" in captured.out
    assert captured.err == (
        "warning: left generated/README.txt alone: the spec does not produce it and it has no"
        f" '{GENERATED_MARKER}' marker\n"
    )
    assert not Path("generated/ops/old.cpp").exists()
    assert Path("generated/README.txt").exists()


def test_broken_spec_exits_1_with_the_error(tmp_path, capsys):
    without_runtime = MINI.read_text(encoding="utf-8").replace("    runtime: send\n", "")
    (tmp_path / "spec.yaml").write_text(without_runtime, encoding="utf-8")
    assert main(["--spec", "spec.yaml", "--out", "generated"]) == 1
    assert capsys.readouterr().err == "spec.yaml:72: ops.send: missing key 'runtime'\n"
    assert not Path("generated").exists()
