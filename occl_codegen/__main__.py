"""Generates a backend's C++ glue, bindings, registration module, tests and docs from its spec.

    python -m occl_codegen [--spec PATH] [--out DIR] [--python-out DIR] [--templates DIR] [--check]

Runs from any folder (installed with torch_occl; also as `occl-codegen`). Without --check, writes
every generated file (C++, tests and docs under --out; the registration module into the Python
package under --python-out) and deletes the files under --out that the spec no longer produces, as
long as they carry GENERATED_MARKER (anything else is left alone, with a warning). With --check,
writes nothing and exits 1 if the output is not exactly what the spec produces.
"""

from __future__ import annotations

import argparse
import difflib
import itertools
import sys
import tempfile
from pathlib import Path

from occl_codegen.errors import SpecError
from occl_codegen.layout import COMMAND, Layout
from occl_codegen.loader import load_spec
from occl_codegen.view import GENERATED_MARKER

# Every generated file carries GENERATED_MARKER within its first MARKER_LINES lines.
MARKER_LINES = 5


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog=COMMAND, description=__doc__.split("\n")[0])
    parser.add_argument(
        "--spec", type=Path, default=Path("spec/collectives.yaml"),
        help="the spec to generate from (default: %(default)s)",
    )
    parser.add_argument(
        "--out", type=Path, default=Path("generated"),
        help="the folder of generated C++, tests and docs (default: %(default)s)",
    )
    parser.add_argument(
        "--python-out", type=Path, default=None,
        help="the folder holding the Python package named by backend.python_package, where the"
        " registration module goes (default: the parent of --out)",
    )
    parser.add_argument(
        "--templates", type=Path, default=None,
        help="a folder of templates that take precedence over the built-in ones of the same name",
    )
    parser.add_argument(
        "--check", action="store_true", help="write nothing; exit 1 if the output is not up to date"
    )
    args = parser.parse_args(argv)
    if not args.spec.is_file():
        parser.error(f"no spec at {args.spec}")
    if args.templates is not None and not args.templates.is_dir():
        parser.error(f"no templates folder at {args.templates}")
    try:
        layout = Layout.of(args.spec, args.out, args.python_out, args.templates)
    except ValueError as error:
        parser.error(str(error))

    # Imported here rather than at the top so that tests can stand in a fake `occl_codegen.render`.
    from occl_codegen.render import render_all

    try:
        files = render_all(load_spec(args.spec), layout)
    except SpecError as error:
        print(error, file=sys.stderr)
        return 1
    if args.check:
        return check_output(files, layout)
    write_output(files, layout)
    return 0


def write_output(files: dict[str, str], layout: Layout) -> None:
    """Writes `files` (path relative to the project root -> text) and deletes generated files left
    over under --out.

    Files whose text is unchanged are not touched, so an incremental C++ build stays incremental.
    """
    root = layout.root
    changed = {
        relpath: text
        for relpath, text in files.items()
        if not (root / relpath).is_file() or (root / relpath).read_text(encoding="utf-8") != text
    }
    _write_files(changed, root)
    for relpath in changed:
        print(f"wrote {_as_seen_from_cwd(root / relpath)}")
    for path in _not_produced(files, layout):
        if _is_generated(path):
            path.unlink()
            print(f"deleted {_as_seen_from_cwd(path)}")
        else:
            print(
                f"warning: left {_as_seen_from_cwd(path)} alone: the spec does not produce it and it has no"
                f" '{GENERATED_MARKER}' marker",
                file=sys.stderr,
            )


def check_output(files: dict[str, str], layout: Layout) -> int:
    """Prints how the output differs from `files`; returns 0 if it does not, else 1."""
    up_to_date = True
    with tempfile.TemporaryDirectory() as rendered:
        _write_files(files, Path(rendered))
        for relpath in sorted(files):
            path = _as_seen_from_cwd(layout.root / relpath)
            actual = path.read_bytes() if path.is_file() else None
            expected = Path(rendered, relpath).read_bytes()
            if actual is None:
                print(f"missing: {path}")
                up_to_date = False
            elif actual != expected:
                print(f"stale: {path}")
                _print_diff(actual, expected, path)
                up_to_date = False
    for path in _not_produced(files, layout):
        if _is_generated(path):
            print(f"orphaned: {_as_seen_from_cwd(path)} (the spec no longer produces it)")
            up_to_date = False
    if up_to_date:
        print("the generated files are up to date")
        return 0
    print(
        f"the generated files are out of date; regenerate them with `{layout.command()}` in"
        f" {_as_seen_from_cwd(layout.root)}",
        file=sys.stderr,
    )
    return 1


def _write_files(files: dict[str, str], out: Path) -> None:
    for relpath, text in files.items():
        path = out / relpath
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8", newline="\n")


def _print_diff(actual: bytes, expected: bytes, path: Path) -> None:
    diff = difflib.unified_diff(
        actual.decode("utf-8", errors="replace").splitlines(keepends=True),
        expected.decode("utf-8", errors="replace").splitlines(keepends=True),
        fromfile=str(path),
        tofile=f"{path} (from the spec)",
    )
    for line in diff:
        sys.stdout.write(line if line.endswith("\n") else line + "\n")


def _not_produced(files: dict[str, str], layout: Layout) -> list[Path]:
    """The files under --out that `files` does not contain (Python's bytecode caches aside)."""
    out = layout.root / layout.out
    if not out.is_dir():
        return []
    produced = {layout.root / relpath for relpath in files}
    return sorted(
        path
        for path in out.rglob("*")
        if path.is_file() and path not in produced and "__pycache__" not in path.parts
    )


def _is_generated(path: Path) -> bool:
    with path.open(encoding="utf-8", errors="replace") as file:
        return any(GENERATED_MARKER in line for line in itertools.islice(file, MARKER_LINES))


def _as_seen_from_cwd(path: Path) -> Path:
    """`path` relative to the current directory if it lies below it, so messages stay short."""
    try:
        return path.relative_to(Path.cwd())
    except ValueError:
        return path


if __name__ == "__main__":
    sys.exit(main())
