"""Renders the templates, one per output file, from the view model."""

from __future__ import annotations

from pathlib import Path

import jinja2

from .layout import Layout
from .model import Spec
from .view import build_view

TEMPLATES = Path(__file__).parent / "templates"


def _environment(layout: Layout) -> jinja2.Environment:
    # A vendor's template of the same name takes precedence over the built-in one.
    folders = [str(TEMPLATES)]
    if layout.templates is not None:
        folders.insert(0, str(layout.root / layout.templates))
    return jinja2.Environment(
        loader=jinja2.FileSystemLoader(folders),
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
        autoescape=False,
    )


def render_all(spec: Spec, layout: Layout) -> dict[str, str]:
    """Every generated file: its path relative to the project root -> its text."""
    view = build_view(spec, layout)
    env = _environment(layout)
    return {
        path: env.get_template(template).render(view=view)
        for template, path in sorted(view.files.items(), key=lambda item: item[1])
    }
