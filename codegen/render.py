"""Renders the templates, one per output file, from the view model."""

from __future__ import annotations

from pathlib import Path

import jinja2

from .model import Spec
from .view import build_view

TEMPLATES = Path(__file__).parent / "templates"


def _environment() -> jinja2.Environment:
    return jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(TEMPLATES)),
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
        autoescape=False,
    )


def render_all(spec: Spec, spec_path: str = "spec/collectives.yaml") -> dict[str, str]:
    """Every generated file: its path relative to the output folder -> its text."""
    view = build_view(spec, spec_path)
    env = _environment()
    return {
        path: env.get_template(template).render(view=view)
        for template, path in sorted(view.files.items(), key=lambda item: item[1])
    }
