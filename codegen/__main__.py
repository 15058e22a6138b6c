"""Generates the backend's C++ glue, bindings and tests from the spec.

    python -m codegen [--spec PATH] [--out DIR] [--check]

Without --check, writes every generated file under DIR and deletes the files there that the spec
no longer produces, as long as they carry GENERATED_MARKER (anything else is left alone, with a
warning). With --check, writes nothing and exits 1 if DIR is not exactly what the spec produces.
"""

from __future__ import annotations

import argparse
import difflib
import itertools
import sys
import tempfile
from pathlib import Path

from codegen.errors import SpecError
from codegen.loader import load_spec
from codegen.view import GENERATED_MARKER

REPO = Path(__file__).resolve().parent.parent
# Every generated file carries GENERATED_MARKER within its first MARKER_LINES lines.
MARKER_LINES = 5


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m codegen", description=__doc__.split("\n")[0])
    parser.add_argument(
        "--spec",
        default=str(_as_seen_from_cwd(REPO / "spec" / "collectives.yaml")),
        help="the spec to generate from (default: %(default)s)",
    )
    parser.add_argument(
        "--out",
        type=Path,
        default=_as_seen_from_cwd(REPO / "generated"),
        help="the directory of generated files (default: %(default)s)",
    )
    parser.add_argument(
        "--check", action="store_true", help="write nothing; exit 1 if --out is not up to date"
    )
    args = parser.parse_args(argv)
    if not Path(args.spec).is_file():
        parser.error(f"no spec at {args.spec}")

    # Imported here rather than at the top so that tests can stand in a fake `codegen.render`.
    from codegen.render import render_all

    try:
        files = render_all(load_spec(args.spec), _spec_label(Path(args.spec)))
    except SpecError as error:
        print(error, file=sys.stderr)
        return 1
    if args.check:
        return check_output(files, args.out)
    write_output(files, args.out)
    return 0


def write_output(files: dict[str, str], out: Path) -> None:
    """Writes `files` (relative path -> text) under `out` and deletes generated files left over.

    Files whose text is unchanged are not touched, so an incremental C++ build stays incremental.
    """
    changed = {
        relpath: text
        for relpath, text in files.items()
        if not (out / relpath).is_file() or (out / relpath).read_text(encoding="utf-8") != text
    }
    _write_files(changed, out)
    for relpath in changed:
        print(f"wrote {out / relpath}")
    for path in _not_produced(files, out):
        if _is_generated(path):
            path.unlink()
            print(f"deleted {path}")
        else:
            print(
                f"warning: left {path} alone: the spec does not produce it and it has no"
                f" '{GENERATED_MARKER}' marker",
                file=sys.stderr,
            )


def check_output(files: dict[str, str], out: Path) -> int:
    """Prints how `out` differs from `files`; returns 0 if it does not, else 1."""
    up_to_date = True
    with tempfile.TemporaryDirectory() as rendered:
        _write_files(files, Path(rendered))
        for relpath in sorted(files):
            path = out / relpath
            actual = path.read_bytes() if path.is_file() else None
            expected = Path(rendered, relpath).read_bytes()
            if actual is None:
                print(f"missing: {path}")
                up_to_date = False
            elif actual != expected:
                print(f"stale: {path}")
                _print_diff(actual, expected, path)
                up_to_date = False
    for path in _not_produced(files, out):
        if _is_generated(path):
            print(f"orphaned: {path} (the spec no longer produces it)")
            up_to_date = False
    if up_to_date:
        print(f"{out}/ is up to date")
        return 0
    print(f"{out}/ is out of date; run `python -m codegen` to regenerate it", file=sys.stderr)
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


def _not_produced(files: dict[str, str], out: Path) -> list[Path]:
    """The files under `out` that `files` does not contain (Python's bytecode caches aside)."""
    if not out.is_dir():
        return []
    produced = {out / relpath for relpath in files}
    return sorted(
        path
        for path in out.rglob("*")
        if path.is_file() and path not in produced and "__pycache__" not in path.parts
    )


def _is_generated(path: Path) -> bool:
    with path.open(encoding="utf-8", errors="replace") as file:
        return any(GENERATED_MARKER in line for line in itertools.islice(file, MARKER_LINES))


def _spec_label(spec: Path) -> str:
    """How generated headers name the spec: relative to the repo, so output is the same anywhere."""
    try:
        return spec.resolve().relative_to(REPO).as_posix()
    except ValueError:
        return spec.name


def _as_seen_from_cwd(path: Path) -> Path:
    """`path` relative to the current directory if it lies below it, so messages stay short."""
    try:
        return path.relative_to(Path.cwd())
    except ValueError:
        return path


if __name__ == "__main__":
    sys.exit(main())
