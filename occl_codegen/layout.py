"""Where the generator reads and writes, and the command that regenerates its output.

Every path is kept relative to the project root: the deepest folder that holds the spec's folder
and --out (--python-out and --templates must lie in it too). Generated files name the spec and
the command by those relative paths, and the folder to run it in by what it holds, so the
output is the same whichever folder the generator runs from.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

COMMAND = "python -m occl_codegen"


@dataclass(frozen=True)
class Layout:
    root: Path
    spec: str  # relative to root, as every path below
    out: str  # generated C++, tests and docs
    python_out: str  # the folder holding the backend's Python package
    templates: str | None  # the vendor's templates, which take precedence over the built-in ones

    @staticmethod
    def of(spec: Path, out: Path, python_out: Path | None, templates: Path | None) -> Layout:
        python_out = out.resolve().parent if python_out is None else python_out.resolve()
        root = Path(os.path.commonpath([spec.resolve().parent, out.resolve()]))
        for option, path in (("--python-out", python_out), ("--templates", templates)):
            if path is not None and not path.resolve().is_relative_to(root):
                raise ValueError(
                    f"{option} {path} lies outside the project, {root} (the folder holding the"
                    " spec's folder and --out)"
                )
        return Layout(
            root=root,
            spec=_relative(spec, root),
            out=_relative(out, root),
            python_out=_relative(python_out, root),
            templates=None if templates is None else _relative(templates, root),
        )

    def command(self) -> str:
        """The exact command that regenerates the output, run in the project root."""
        parts = [COMMAND, "--spec", self.spec, "--out", self.out]
        if Path(self.python_out) != Path(self.out).parent:
            parts += ["--python-out", self.python_out]
        if self.templates is not None:
            parts += ["--templates", self.templates]
        return " ".join(parts)

    def where(self) -> str:
        """Where to run the command, by what the project root holds: "in the folder holding
        spec/ and generated/"."""
        spec = Path(self.spec).parts
        held = [spec[0] + ("/" if len(spec) > 1 else "")]
        for folder in (self.out, self.python_out, self.templates):
            if folder is not None and folder != "." and Path(folder).parts[0] + "/" not in held:
                held.append(Path(folder).parts[0] + "/")
        listed = held[0] if len(held) == 1 else ", ".join(held[:-1]) + " and " + held[-1]
        return f"in the folder holding {listed}"

    def python_file(self, package: str, name: str) -> str:
        """The path, relative to root, of module `name` of the Python package `package`."""
        return (Path(self.python_out) / Path(*package.split(".")) / name).as_posix()

    def output_file(self, relpath: str) -> str:
        return (Path(self.out) / relpath).as_posix()


def _relative(path: Path, root: Path) -> str:
    return Path(os.path.relpath(path.resolve(), root)).as_posix()
