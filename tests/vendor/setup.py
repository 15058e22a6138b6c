"""Builds tin_dist._C: the backend generated from spec/tin.yaml plus the hand-written runtime.

A vendor's tree, the fixture for the "vendor tree" test:

    spec/tin.yaml        the spec
    runtime/             tin_runtime.hpp (the runtime contract) and its implementation
    generated/           what `python -m occl_codegen --spec spec/tin.yaml --out generated` writes
    tin_dist/            the Python package: __init__.py, and the generated _registration.py
    setup.py             this file: `python setup.py build_ext --inplace`
"""

from pathlib import Path

from setuptools import setup
from torch.utils.cpp_extension import BuildExtension, CppExtension

ROOT = Path(__file__).parent.resolve()
SOURCES = sorted(
    str(path.relative_to(ROOT))
    for folder in ("generated/csrc", "runtime")
    for path in (ROOT / folder).glob("*.cpp")
)

setup(
    name="tin_dist",
    ext_modules=[
        CppExtension(
            name="tin_dist._C",
            sources=SOURCES,
            # The generated code includes "runtime/tin_runtime.hpp" (spec: backend.runtime.header)
            # and its own headers by bare name.
            include_dirs=[str(ROOT), str(ROOT / "generated/csrc")],
            # A fixture: built fast, without debug information; -Wno-attributes silences
            # pybind11's "declared with greater visibility" warnings about the bound classes.
            extra_compile_args=["-O1", "-g0", "-Wno-attributes"],
        )
    ],
    cmdclass={"build_ext": BuildExtension.with_options(use_ninja=True)},
)
