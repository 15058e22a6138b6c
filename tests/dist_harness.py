"""The project's multi-process tests run on the conformance suite's pool (occl_codegen/conformance/pool.py).

This adds what only occl's own tests need: which backend they run against (`OCCL_TEST_BACKEND`,
default occl; `gloo` develops the tests against gloo), that occl's workers import torch_occl, and
a mark for tests that only make sense on occl.
"""

from __future__ import annotations

import os
import sys

_REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if _REPO_ROOT not in sys.path:  # an installed torch_occl wins; else the in-tree build
    sys.path.append(_REPO_ROOT)

from occl_codegen.conformance import pool as _pool  # noqa: E402

# Backend the suite runs against; `OCCL_TEST_BACKEND=gloo` develops the suite against gloo.
BACKEND = os.environ.get("OCCL_TEST_BACKEND", "occl")
DEFAULT_GROUP_TIMEOUT = _pool.DEFAULT_GROUP_TIMEOUT
WORKER_ENV = _pool.WORKER_ENV


def occl_only(reason: str):
    """A pytest mark (for `pytestmark` or a test) that skips unless the backend is occl."""
    import pytest  # not at the top: worker processes import this module too

    return pytest.mark.skipif(BACKEND != "occl", reason=reason)


class DistPool(_pool.DistPool):
    """A pool of `backend` ranks; occl's import torch_occl, which registers the backend."""

    def __init__(self, world_size: int, backend: str = BACKEND, **kwargs):
        packages = ("torch_occl",) if backend == "occl" else ()
        super().__init__(world_size, backend, packages, **kwargs)
