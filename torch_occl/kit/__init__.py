"""occl's backend kit: the C++ every generated backend builds on, installed with torch_occl.

Headers are in `include_dir()` (`#include "occl_kit/engine.hpp"`), the shared library
`libocclkit.so` in `library_dir()`. A vendor's extension compiles and links against them with

    from torch_occl import kit
    CppExtension(name, sources, **kit.extension_args(include_dirs=["generated/csrc"]))

which adds the include folder, the library and an rpath to it (to the lists given), so the
extension finds the kit wherever torch_occl is installed.
"""

from __future__ import annotations

from pathlib import Path

_HERE = Path(__file__).resolve().parent
LIBRARY = "occlkit"


def include_dir() -> str:
    """The folder holding occl_kit/*.hpp."""
    return str(_HERE / "include")


def library_dir() -> str:
    """The folder holding libocclkit.so."""
    return str(_HERE / "lib")


def extension_args(**given: list[str]) -> dict[str, list[str]]:
    """Keyword arguments for torch.utils.cpp_extension.CppExtension that build against the kit:
    each list given (include_dirs=[...], libraries=[...]) with the kit's entries after it."""
    if not (Path(library_dir()) / f"lib{LIBRARY}.so").exists():
        raise FileNotFoundError(
            f"torch_occl's kit library is not built: no lib{LIBRARY}.so in {library_dir()} "
            "(build torch_occl first: README, 'Install')")
    kit = {
        "include_dirs": [include_dir()],
        "library_dirs": [library_dir()],
        "libraries": [LIBRARY],
        "extra_link_args": [f"-Wl,-rpath,{library_dir()}"],
    }
    return {key: [*map(str, given.get(key, ())), *kit.get(key, ())] for key in {*given, *kit}}
