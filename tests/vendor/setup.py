"""Builds tin_dist._C: the backend generated from spec/tin.yaml plus the hand-written runtime, on
occl's backend kit (torch_occl.kit: its headers and libocclkit.so, from the installed torch_occl).

A vendor's tree, the fixture for the "vendor tree" test:

    spec/tin.yaml        the spec
    runtime/             tin_runtime.hpp (the contract's implementation) and tin_runtime.cpp
    generated/           what `python -m occl_codegen --spec spec/tin.yaml --out generated` writes
    tin_dist/            the Python package: __init__.py, and the generated _registration.py
    setup.py             this file: `python setup.py build_ext --inplace`
"""

from pathlib import Path

from setuptools import setup
from torch.utils.cpp_extension import BuildExtension, CppExtension
from torch_occl import kit

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
            # A fixture: built fast, without debug information; -Wno-attributes silences
            # pybind11's "declared with greater visibility" warnings about the bound classes.
            extra_compile_args=["-O1", "-g0", "-Wno-attributes"],
            # The generated code includes its own headers by bare name; the runtime includes
            # "runtime/tin_runtime.hpp"; the kit adds its headers and library.
            **kit.extension_args(include_dirs=[ROOT, ROOT / "generated/csrc"]),
        )
    ],
    cmdclass={"build_ext": BuildExtension.with_options(use_ninja=True)},
)
