"""`python -m occl_codegen`: writing, pruning and --check, with a fake renderer for the templates."""

from __future__ import annotations

import shutil
import sys
import types
from pathlib import Path

import pytest

from occl_codegen.__main__ import GENERATED_MARKER, main

MINI = Path(__file__).parent / "fixtures" / "mini.yaml"


def fake_render_all(spec, layout):
    """One header naming the backend and one source per op, each carrying the marker."""
    files = {"backend.hpp": f"// {GENERATED_MARKER}\n// backend {spec.backend.name}\n"}
    for op in spec.ops:
        files[f"ops/{op.name}.cpp"] = f"// {GENERATED_MARKER}\nvoid {op.name}();\n"
    return {layout.output_file(path): text for path, text in files.items()}


@pytest.fixture(autouse=True)
def in_tmp_with_fake_renderer(tmp_path, monkeypatch):
    """Runs each test in tmp_path, where `python -m occl_codegen` renders with `fake_render_all`."""
    fake_render = types.SimpleNamespace(render_all=fake_render_all)
    monkeypatch.setitem(sys.modules, "occl_codegen.render", fake_render)
    monkeypatch.chdir(tmp_path)
    Path("spec").mkdir()
    shutil.copy(MINI, "spec/mini.yaml")


def generate(*options: str) -> int:
    return main(["--spec", "spec/mini.yaml", "--out", "generated", *options])


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
    assert capsys.readouterr().out == "the generated files are up to date\n"


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
    assert captured.err == (
        "the generated files are out of date; regenerate them with `python -m occl_codegen --spec"
        " spec/mini.yaml --out generated` in .\n"
    )


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
    assert capsys.readouterr().err == "spec.yaml:79: ops.send: missing key 'runtime'\n"
    assert not Path("generated").exists()


def test_output_is_the_same_from_any_folder(tmp_path, monkeypatch):
    """The real renderer: the headers name the spec and the command relative to the project
    root, so running from elsewhere writes the same bytes (and --check agrees)."""
    monkeypatch.undo()  # the real renderer
    project = tmp_path / "project"
    (project / "spec").mkdir(parents=True)
    shutil.copy(MINI, project / "spec" / "mini.yaml")
    monkeypatch.chdir(project)
    assert main(["--spec", "spec/mini.yaml", "--out", "generated"]) == 0
    header = Path("generated/csrc/acme_checks.hpp").read_text(encoding="utf-8").splitlines()[0]
    assert header == (
        f"// {GENERATED_MARKER}. Source: spec/mini.yaml; regenerate with"
        " `python -m occl_codegen --spec spec/mini.yaml --out generated` in the folder holding"
        " spec/ and generated/."
    )
    registration = Path("acme_dist/_registration.py").read_text(encoding="utf-8")
    assert registration.startswith(f"# {GENERATED_MARKER}. Source: spec/mini.yaml;")
    monkeypatch.chdir(tmp_path)
    assert main(["--spec", "project/spec/mini.yaml", "--out", "project/generated", "--check"]) == 0


def test_vendor_templates_take_precedence(tmp_path, monkeypatch):
    monkeypatch.undo()  # the real renderer; tmp_path already holds spec/mini.yaml
    monkeypatch.chdir(tmp_path)
    Path("templates").mkdir()
    Path("templates/operations.md.j2").write_text(
        "<!-- {{ view.header }} -->\nOps of {{ view.backend_name }}.\n", encoding="utf-8"
    )
    args = ["--spec", "spec/mini.yaml", "--out", "out", "--python-out", "py", "--templates", "templates"]
    assert main(args) == 0
    command = (
        "python -m occl_codegen --spec spec/mini.yaml --out out --python-out py --templates templates"
    )
    assert Path("out/docs/acme_operations.md").read_text(encoding="utf-8") == (
        f"<!-- {GENERATED_MARKER}. Source: spec/mini.yaml; regenerate with `{command}` in the"
        " folder holding spec/, out/, py/ and templates/. -->\nOps of acme.\n"
    )
    # The other templates are the built-in ones; the registration module goes under --python-out.
    assert Path("out/csrc/ProcessGroupAcme.hpp").is_file()
    assert Path("py/acme_dist/_registration.py").is_file()


def test_templates_outside_the_project_are_an_error(tmp_path, capsys):
    """The project is spec/ here (the spec's folder and --out share it): templates beside it
    would put paths outside the project into every generated file."""
    Path("elsewhere").mkdir()
    with pytest.raises(SystemExit):
        main(["--spec", "spec/mini.yaml", "--out", "spec/generated", "--templates", "elsewhere"])
    assert f"--templates elsewhere lies outside the project, {tmp_path / 'spec'}" in capsys.readouterr().err


def test_missing_templates_folder_is_an_error(capsys):
    with pytest.raises(SystemExit):
        generate("--templates", "nowhere")
    assert "no templates folder at nowhere" in capsys.readouterr().err
