"""Fixtures for the multi-process collective tests (see dist_harness.py).

Backend under test: env OCCL_TEST_BACKEND (default "occl"; "gloo" develops/validates the suite
without the occl extension). Pools of worker processes are created lazily, cached for the whole
session and closed at its end; a pool discarded after a failure is replaced on next use.

    @pytest.mark.parametrize("occl_pool", [1, 2, 3, 4], indirect=True)
    def test_x(occl_pool): occl_pool.run(fn, ...)

    def test_y(dist_pool, gloo_pool, fresh_pool):
        dist_pool(2)              # shared pool of the backend under test, 2 ranks
        gloo_pool(2)              # shared gloo pool (reference runs)
        fresh_pool(2, group_timeout=3)   # private pool, closed when the test ends

This file deliberately imports neither torch nor torch_occl, so collecting other tests that
share the directory stays cheap.
"""

from __future__ import annotations

import os
import sys

import pytest

_TESTS_DIR = os.path.dirname(os.path.abspath(__file__))
if _TESTS_DIR not in sys.path:  # workers (spawned) inherit sys.path and import dist_harness
    sys.path.insert(0, _TESTS_DIR)

from dist_harness import BACKEND, DistPool  # noqa: E402


def pytest_configure(config):
    config.addinivalue_line(
        "markers", "torch_suite: PyTorch's own distributed_test suite run against occl "
        "(tests/test_torch_suite.py; deselect with -m 'not torch_suite')")


def pytest_report_header(config):
    return f"torch_occl multi-process tests: backend under test = {BACKEND!r} (OCCL_TEST_BACKEND)"


@pytest.fixture(scope="session")
def backend() -> str:
    """Name of the backend under test ("occl" unless OCCL_TEST_BACKEND says otherwise)."""
    return BACKEND


@pytest.fixture(scope="session")
def _pool_cache():
    cache: dict[tuple, DistPool] = {}
    yield cache
    for pool in cache.values():
        pool.close()
    cache.clear()


@pytest.fixture(scope="session")
def dist_pool(_pool_cache):
    """Factory: `dist_pool(n, backend=BACKEND, env=None)` -> the session's shared n-rank pool.

    `env` (extra worker environment, e.g. backend tuning variables) selects a separate pool.
    """

    def get(world_size: int, backend: str = BACKEND, env: dict | None = None) -> DistPool:
        key = (backend, world_size, tuple(sorted((env or {}).items())))
        pool = _pool_cache.get(key)
        if pool is None or not pool.alive:
            pool = DistPool(world_size, backend, env=env)
            _pool_cache[key] = pool
        return pool

    return get


@pytest.fixture
def occl_pool(request, dist_pool) -> DistPool:
    """The shared pool of the backend under test; world size from indirect parametrization."""
    return dist_pool(getattr(request, "param", 2))


@pytest.fixture(scope="session")
def gloo_pool(dist_pool):
    """Factory: `gloo_pool(n)` -> the session's shared n-rank gloo pool (reference runs)."""
    return lambda world_size: dist_pool(world_size, "gloo")


@pytest.fixture
def fresh_pool():
    """Factory for private pools (tests that break their group); closed after the test."""
    pools: list[DistPool] = []

    def make(world_size: int, backend: str = BACKEND, **kwargs) -> DistPool:
        pool = DistPool(world_size, backend, **kwargs)
        pools.append(pool)
        return pool

    yield make
    for pool in pools:
        pool.close(timeout=5)

