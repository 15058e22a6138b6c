"""Builds torch_occl._C from the generated backend (generated/csrc) and the runtime (torch_occl/csrc).

Build in place, incrementally (ninja): python setup.py build_ext --inplace
Install:                               pip install --no-build-isolation .
`--no-build-isolation` matters: an isolated build would make pip fetch its own torch.
"""

from pathlib import Path

from setuptools import find_packages, setup
from torch.utils.cpp_extension import BuildExtension, CppExtension

ROOT = Path(__file__).parent.resolve()
SOURCES = sorted(
    str(path.relative_to(ROOT))
    for folder in ("generated/csrc", "torch_occl/csrc")
    for path in (ROOT / folder).rglob("*.cpp")
)

setup(
    name="torch_occl",
    version="0.1.0",
    description="occl: a collective-communication backend for torch.distributed on CPUs",
    packages=find_packages(include=["torch_occl", "torch_occl.*"]),
    python_requires=">=3.10",
    install_requires=["torch==2.13.0"],
    ext_modules=[
        CppExtension(
            name="torch_occl._C",
            sources=SOURCES,
            include_dirs=[str(ROOT), str(ROOT / "generated/csrc")],
            extra_compile_args=["-O3", "-Wno-attributes"],
        )
    ],
    cmdclass={"build_ext": BuildExtension.with_options(use_ninja=True)},
)
