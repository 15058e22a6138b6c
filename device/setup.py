"""Builds occl_device._C, the native part of the occldev device (csrc/), against torch alone.

    python setup.py build_ext --inplace            # in this folder
    pip install --no-build-isolation -e .          # editable (what scripts/build.sh does)
"""

from __future__ import annotations

from pathlib import Path

from setuptools import setup
from torch.utils.cpp_extension import BuildExtension, CppExtension

ROOT = Path(__file__).parent.resolve()
SOURCES = sorted(str(path.relative_to(ROOT)) for path in (ROOT / "csrc").glob("*.cpp"))

class KeptObjectsBuildExtension(BuildExtension):
    def finalize_options(self) -> None:
        super().finalize_options()
        # One object folder for every form of the build (pip's editable build would pick a fresh
        # temporary one each time): ninja then recompiles only what changed.
        self.build_temp = str(ROOT / "build" / "objects")


setup(
    ext_modules=[
        CppExtension(
            name="occl_device._C",
            sources=SOURCES,
            extra_compile_args=["-O2", "-g0"],
        )
    ],
    cmdclass={"build_ext": KeptObjectsBuildExtension.with_options(use_ninja=True)},
)
