"""Checks an installed torch_occl from outside the checkout: `python check_installed.py WHERE`.

WHERE is the folder torch_occl must be imported from (site-packages for an install, the checkout
for an editable one). Checks that `import torch` alone registered "occl" (the autoload entry
point), that the extension has no debug sections, that the generator (occl_codegen, with its
templates) runs from there under both its names and claims no generic top-level name, that the
backend kit's headers and library are inside the package (where torch_occl.kit says, and what
torch_occl._C loads), and that a 2-process all_reduce is right.
"""

import importlib.util
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import torch
import torch.distributed as dist
import torch.multiprocessing as mp


def _all_reduce(rank: int, world_size: int, init_file: str) -> None:
    dist.init_process_group("occl", init_method=f"file://{init_file}", rank=rank,
                            world_size=world_size)
    tensor = torch.full((1000,), float(rank + 1))
    dist.all_reduce(tensor)
    assert torch.all(tensor == 3.0), f"rank {rank}: all_reduce gave {tensor[0].item()}, not 3"
    dist.destroy_process_group()


def check_installation(where: Path) -> Path:
    """The package folder torch_occl came from, after the checks that need no processes."""
    assert "occl" in dist.Backend.backend_list, "import torch did not autoload occl"
    assert "torch_occl" in sys.modules, "occl registered, but not by torch_occl's hook"
    import torch_occl

    package = Path(torch_occl.__file__).resolve().parent
    assert package.parent == where, f"torch_occl imported from {package}, expected under {where}"
    sections = subprocess.run(["readelf", "-S", "-W", torch_occl._C.__file__], check=True,
                              capture_output=True, text=True).stdout
    assert ".debug_" not in sections, f"{torch_occl._C.__file__} carries debug sections"
    return package


def check_kit(package: Path) -> None:
    """The kit a vendor builds against: inside the installed package, the library _C links."""
    import torch_occl
    from torch_occl import kit

    args = kit.extension_args(include_dirs=["mine"])
    assert args["include_dirs"] == ["mine", kit.include_dir()], args
    assert Path(kit.include_dir()).resolve().is_relative_to(package), kit.include_dir()
    for header in ("engine.hpp", "work.hpp", "signature.hpp", "completion.hpp", "staging.hpp",
                   "request.hpp", "library.hpp", "rendezvous.hpp", "reduce.hpp", "host_tensors.hpp"):
        assert (Path(kit.include_dir()) / "occl_kit" / header).is_file(), header
    library = (Path(kit.library_dir()) / f"lib{kit.LIBRARY}.so").resolve()
    assert library.is_relative_to(package), library
    linked = subprocess.run(["ldd", torch_occl._C.__file__], check=True, capture_output=True,
                            text=True).stdout
    assert str(library) in linked, f"torch_occl._C does not load {library}:\n{linked}"


def check_generator(where: Path, folder: Path) -> None:
    """Generates occl's own spec (a copy, in `folder`) with the installed generator."""
    import occl_codegen

    assert Path(occl_codegen.__file__).resolve().parent.parent == where, occl_codegen.__file__
    assert importlib.util.find_spec("codegen") is None, "a top-level 'codegen' is installed"
    (folder / "spec").mkdir()
    shutil.copy(Path(__file__).resolve().parents[1] / "spec" / "collectives.yaml", folder / "spec")
    script = Path(sys.executable).parent / "occl-codegen"
    for command in ([sys.executable, "-m", "occl_codegen"], [str(script)]):
        subprocess.run([*command, "--out", "generated"], cwd=folder, check=True,
                       capture_output=True)
        subprocess.run([*command, "--out", "generated", "--check"], cwd=folder, check=True,
                       capture_output=True)
    assert (folder / "generated" / "tests" / "test_occl_conformance.py").is_file()
    assert (folder / "torch_occl" / "_registration.py").is_file()


def check_bench(where: Path) -> None:
    """The installed benchmark runs a row, and its guard answers."""
    bench = subprocess.run([sys.executable, "-m", "torch_occl.bench", "--ops", "all_reduce",
                            "--sizes", "8", "--peers", "gloo", "--rounds", "1", "--iters", "2"],
                           check=True, capture_output=True, text=True, timeout=300).stdout
    assert any(line.split()[:2] == ["all_reduce", "8"] for line in bench.splitlines()), bench
    subprocess.run([sys.executable, "-m", "torch_occl.bench.guard", "--help"], check=True,
                   capture_output=True, timeout=60)
    import torch_occl.bench

    assert Path(torch_occl.bench.__file__).resolve().parents[2] == where, torch_occl.bench.__file__


if __name__ == "__main__":
    package = check_installation(Path(sys.argv[1]).resolve())
    import torch_occl
    check_kit(package)
    with tempfile.TemporaryDirectory() as folder:
        check_generator(Path(sys.argv[1]).resolve(), Path(folder))
    with tempfile.TemporaryDirectory() as folder:
        mp.spawn(_all_reduce, args=(2, os.path.join(folder, "init")), nprocs=2)
    check_bench(Path(sys.argv[1]).resolve())
    size = os.path.getsize(torch_occl._C.__file__) / 2**20
    print(f"ok: torch_occl from {package}, autoloaded, {size:.1f} MiB without debug sections, "
          "kit inside it, generator runs, 2-process all_reduce right, bench runs")
