"""Builds the backend kit, torch_occl/kit/lib/libocclkit.so (torch_occl/kit), and torch_occl._C from
the generated backend (generated/csrc) and occl's runtime (torch_occl/csrc), which links the kit.

The project's metadata, dependencies and entry points are in pyproject.toml; this file only
describes the extension. Every form builds without isolation (an isolated build would make pip
fetch its own multi-GB torch), incrementally with ninja in build/:

    python setup.py build_ext --inplace          # what scripts/build.sh runs
    pip install --no-build-isolation -e .        # editable
    pip install --no-build-isolation .           # installed copy
    pip wheel --no-build-isolation .             # a wheel for another environment

The build prints one line per compiled file (`[3/20] torch_occl/csrc/transport/shm.cpp`) and
every warning and error; `VERBOSE=1` prints the full compiler command lines instead. The
extension carries no debug information unless `OCCL_BUILD_DEBUG=1`.
"""

from __future__ import annotations

import os
import re
import sys
import threading
from pathlib import Path

from torch.utils.cpp_extension import BuildExtension, CppExtension

ROOT = Path(__file__).parent.resolve()


def sources(*folders: str) -> list[str]:
    return sorted(str(path.relative_to(ROOT)) for folder in folders
                  for path in (ROOT / folder).rglob("*.cpp"))


SOURCES = sources("generated/csrc", "torch_occl/csrc")
KIT_SOURCES = sources("torch_occl/kit/src")
KIT_INCLUDE = ROOT / "torch_occl/kit/include"
# The kit is a plain shared library, built as an "extension" so that every install form (in place,
# editable, installed, wheel) puts it inside the package: torch_occl/kit/lib/libocclkit.so.
KIT_EXTENSION = "torch_occl.kit.lib.occlkit"
# The interpreter's own CFLAGS carry `-g`; a later `-g0` wins, so the default build has no debug
# sections (the extension shrinks from 26 MB to its code). OCCL_BUILD_DEBUG=1 keeps them.
DEBUG_FLAGS = ["-g"] if os.environ.get("OCCL_BUILD_DEBUG") == "1" else ["-g0"]

_NINJA_STEP = re.compile(r"^(\[\d+/\d+\]) (.*)$")
# torch writes the compile rule as `... -c $in -o $out`; its cflags end with another -c.
_COMPILED_SOURCE = re.compile(r"\s(\S+)\s+-o\s")


def progress_line(line: str, root: Path = ROOT) -> str:
    """One line of `ninja -v` output as the quiet build shows it.

    A step's command line becomes its source file relative to the checkout; anything else
    (compiler warnings and errors, ninja's own messages) passes unchanged.
    """
    step = _NINJA_STEP.match(line)
    if step is None:
        return line
    source = _COMPILED_SOURCE.search(step[2])
    if source is None:
        return f"{step[1]} {step[2].split(maxsplit=1)[0]}"
    path = Path(source[1])
    if path.is_absolute() and path.is_relative_to(root):
        path = path.relative_to(root)
    return f"{step[1]} {path}"


class _ProgressFilter:
    """While active, everything written to file descriptor 1 (ninja runs as a child process that
    inherits it) passes through `progress_line`. torch's cpp_extension always runs `ninja -v`, so
    filtering its output is the only way to a quiet build."""

    def __enter__(self):
        sys.stdout.flush()
        self._terminal = os.dup(1)
        read_end, write_end = os.pipe()
        os.dup2(write_end, 1)
        os.close(write_end)
        self._reader = threading.Thread(target=self._pump, args=(read_end,), daemon=True)
        self._reader.start()
        return self

    def _pump(self, read_end: int) -> None:
        with open(read_end, encoding="utf-8", errors="replace") as lines, open(
            self._terminal, "w", encoding="utf-8", closefd=False
        ) as out:
            for line in lines:
                out.write(progress_line(line.rstrip("\n")) + "\n")
                out.flush()

    def __exit__(self, *exc_info):
        sys.stdout.flush()
        os.dup2(self._terminal, 1)  # closes the pipe's last write end: the reader sees its end
        self._reader.join()
        os.close(self._terminal)


class QuietBuildExtension(BuildExtension):
    def get_ext_filename(self, fullname: str) -> str:
        # Called with the last component of the name, and (copying an in-place build) the whole.
        if fullname in (KIT_EXTENSION, KIT_EXTENSION.rsplit(".", 1)[1]):
            *package, name = fullname.split(".")
            return os.path.join(*package, f"lib{name}.so")
        return super().get_ext_filename(fullname)

    def copy_extensions_to_source(self) -> None:
        (ROOT / "torch_occl/kit/lib").mkdir(exist_ok=True)  # holds nothing but the kit
        super().copy_extensions_to_source()

    def build_extension(self, ext) -> None:
        # The kit is built first; the extensions after it link it from where it was just put.
        if ext.name != KIT_EXTENSION:
            ext.library_dirs.append(os.path.dirname(self.get_ext_fullpath(KIT_EXTENSION)))
        super().build_extension(ext)

    def finalize_options(self) -> None:
        super().finalize_options()
        # One object folder for every form of the build (pip's editable build would pick a fresh
        # temporary one each time): ninja then recompiles only what changed.
        self.build_temp = str(ROOT / "build" / "objects")

    def build_extensions(self) -> None:
        if os.environ.get("VERBOSE") == "1":
            super().build_extensions()
            return
        with _ProgressFilter():
            super().build_extensions()


def warn_without_openssl_headers() -> None:
    """Names the package to install before the compiler stops at `openssl/hmac.h`."""
    folders = [*os.environ.get("CPATH", "").split(os.pathsep), "/usr/include", "/usr/local/include"]
    if not any(folder and (Path(folder) / "openssl" / "hmac.h").exists() for folder in folders):
        print("torch_occl: OpenSSL's headers (openssl/hmac.h) are not in "
              f"{', '.join(f for f in folders if f)}; install them (Debian, Ubuntu: apt-get "
              "install libssl-dev; Fedora: dnf install openssl-devel)", file=sys.stderr)


if __name__ == "__main__":  # also how pip's build backend runs this file
    from setuptools import setup

    warn_without_openssl_headers()

    setup(
        ext_modules=[
            CppExtension(
                name=KIT_EXTENSION,
                sources=KIT_SOURCES,
                include_dirs=[str(KIT_INCLUDE)],
                extra_compile_args=["-O3", *DEBUG_FLAGS],
            ),
            CppExtension(
                name="torch_occl._C",
                sources=SOURCES,
                include_dirs=[str(ROOT), str(ROOT / "generated/csrc"), str(KIT_INCLUDE)],
                extra_compile_args=["-O3", "-Wno-attributes", *DEBUG_FLAGS],
                # OpenSSL's HMAC-SHA256 and random bytes for the bootstrap handshake's key
                # (transport/auth.hpp); Debian's libssl-dev.
                libraries=["crypto", "occlkit"],
                extra_link_args=["-Wl,-rpath,$ORIGIN/kit/lib"],
            ),
        ],
        cmdclass={"build_ext": QuietBuildExtension.with_options(use_ninja=True)},
    )
