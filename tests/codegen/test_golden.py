"""The rendered fixture spec matches the reviewed goldens under tests/codegen/golden/.

After an intended change to the templates, rewrite the goldens and review their diff:

    OCCL_UPDATE_GOLDEN=1 python -m pytest tests/codegen/test_golden.py
"""

from __future__ import annotations

import os
from pathlib import Path

from occl_codegen.__main__ import main

REPO = Path(__file__).resolve().parents[2]
# Generated files name these paths relative to the project root they share, tests/codegen/.
ARGS = [
    "--spec", "tests/codegen/fixtures/mini.yaml", "--out", "tests/codegen/golden",
    "--python-out", "tests/codegen/golden/python",
]


def test_rendered_mini_spec_matches_goldens(monkeypatch, capsys):
    monkeypatch.chdir(REPO)
    if os.environ.get("OCCL_UPDATE_GOLDEN") == "1":
        assert main(ARGS) == 0
    up_to_date = main([*ARGS, "--check"]) == 0
    assert up_to_date, (
        "the rendered output differs from tests/codegen/golden/; if the change is intended, rerun"
        f" with OCCL_UPDATE_GOLDEN=1 and review the goldens' diff:\n{capsys.readouterr().out}"
    )
