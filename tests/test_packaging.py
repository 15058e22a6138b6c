"""How occl installs and loads: torch's autoload entry point, the quiet build, a lean extension.

The autoload tests run `import torch` in fresh interpreters. Each lays out, in a temporary folder
put first on PYTHONPATH, the distribution metadata an installation writes, with the entry points
read from pyproject.toml: the same hook pip registers, whether or not this environment has
torch_occl installed. CI also checks the real installs (`.ci/install_forms.sh`).
"""

from __future__ import annotations

import importlib.machinery
import importlib.util
import os
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
PYPROJECT = tomllib.loads((REPO / "pyproject.toml").read_text())
WARNING_START = "torch_occl: the 'occl' backend is not registered"

# Prints whether "occl" is registered and torch_occl imported after `import torch` alone.
PROBE = (
    "import sys, torch, torch.distributed as dist; "
    "print('occl' in dist.Backend.backend_list, 'torch_occl' in sys.modules)"
)


def _entry_points() -> dict[str, dict[str, str]]:
    return PYPROJECT["project"]["entry-points"]


def _install_metadata(site: Path) -> None:
    """The dist-info folder pip writes for this project (name, version, entry points)."""
    project = PYPROJECT["project"]
    info = site / f"{project['name']}-{project['version']}.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(
        f"Metadata-Version: 2.1\nName: {project['name']}\nVersion: {project['version']}\n")
    (info / "entry_points.txt").write_text("".join(
        f"[{group}]\n" + "".join(f"{name} = {target}\n" for name, target in points.items())
        for group, points in _entry_points().items()))


def _install_broken_copy(site: Path) -> None:
    """torch_occl installed in `site` with an extension that cannot load."""
    _install_metadata(site)
    package = site / "torch_occl"
    package.mkdir()
    for source in (REPO / "torch_occl").glob("*.py"):
        shutil.copy(source, package)
    suffix = importlib.machinery.EXTENSION_SUFFIXES[0]
    (package / f"_C{suffix}").write_bytes(b"not a shared object")


def _run(site: Path, code: str, **env_changes: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "TORCH_DEVICE_BACKEND_AUTOLOAD"}
    env.update(env_changes)
    env["PYTHONPATH"] = os.pathsep.join([str(site), str(REPO)])
    return subprocess.run([sys.executable, "-c", code], env=env, cwd=site, capture_output=True,
                          text=True, timeout=120)


def test_pyproject_declares_the_autoload_hook():
    assert _entry_points()["torch.backends"] == {"occl": "_torch_occl_autoload:autoload"}
    module, _, function = _entry_points()["torch.backends"]["occl"].partition(":")
    spec = importlib.util.find_spec(module)
    assert spec is not None and Path(spec.origin).parent == REPO
    assert module in PYPROJECT["tool"]["setuptools"]["py-modules"]
    assert callable(getattr(importlib.import_module(module), function))


def test_import_torch_alone_registers_occl(tmp_path):
    _install_metadata(tmp_path)
    result = _run(tmp_path, PROBE)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["True", "True"], result.stdout + result.stderr
    assert WARNING_START not in result.stderr


def test_autoload_off_leaves_occl_unregistered(tmp_path):
    _install_metadata(tmp_path)
    result = _run(tmp_path, PROBE, TORCH_DEVICE_BACKEND_AUTOLOAD="0")
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["False", "False"], result.stdout + result.stderr


def test_a_broken_extension_warns_once_and_import_torch_works(tmp_path):
    """As if the extension were built against another torch: the hook must not fail the import
    of torch, and says once what went wrong and how to fix it."""
    _install_broken_copy(tmp_path)
    result = _run(tmp_path, PROBE + "; import _torch_occl_autoload as hook; hook.autoload(); "
                  "print(torch.ones(2).add(1).tolist())")
    assert result.returncode == 0, result.stderr
    assert result.stdout.split("\n")[:2] == ["False False", "[2.0, 2.0]"], result.stdout
    assert result.stderr.count(WARNING_START) == 1, result.stderr
    warning = result.stderr[result.stderr.index(WARNING_START):]
    assert "ImportError" in warning and "_C" in warning, warning  # the cause
    assert "pip install --no-build-isolation --force-reinstall" in warning, warning  # the fix
    assert "TORCH_DEVICE_BACKEND_AUTOLOAD=0" in warning, warning


def test_a_broken_extension_does_not_break_import_torch_when_warnings_are_errors(tmp_path):
    _install_broken_copy(tmp_path)
    result = _run(tmp_path, PROBE, PYTHONWARNINGS="error::RuntimeWarning")
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["False", "False"], result.stdout
    assert result.stderr.count(WARNING_START) == 1, result.stderr


def _setup_module():
    spec = importlib.util.spec_from_file_location("occl_setup", REPO / "setup.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)  # setup() itself runs only as __main__
    return module


def test_quiet_build_shows_each_source_and_passes_diagnostics():
    progress_line = _setup_module().progress_line
    root = Path("/src/occl")
    command = (
        "[3/20] c++ -MMD -MF /src/occl/build/objects/torch_occl/csrc/transport/shm.o.d "
        "-DNDEBUG -g -fwrapv -O3 -fPIC -I/src/occl -c -c /src/occl/torch_occl/csrc/transport/"
        "shm.cpp -o /src/occl/build/objects/torch_occl/csrc/transport/shm.o -O3 -g0 -std=c++17")
    assert progress_line(command, root) == "[3/20] torch_occl/csrc/transport/shm.cpp"
    for passed in (
        "/src/occl/torch_occl/csrc/transport/shm.cpp:12:5: warning: unused variable 'x'",
        "FAILED: /src/occl/build/objects/torch_occl/csrc/transport/shm.o",
        "ninja: build stopped: subcommand failed.",
        "ninja: no work to do.",
    ):
        assert progress_line(passed, root) == passed


def test_extension_has_no_debug_sections():
    if os.environ.get("OCCL_BUILD_DEBUG") == "1":
        pytest.skip("OCCL_BUILD_DEBUG=1 keeps debug information on purpose")
    built = sorted((REPO / "torch_occl").glob("_C*.so"))
    assert built, "torch_occl._C is not built (bash scripts/build.sh)"
    sections = subprocess.run(["readelf", "-S", "-W", str(built[0])], capture_output=True,
                              text=True, check=True).stdout
    assert ".text" in sections
    assert ".debug_" not in sections, sections
