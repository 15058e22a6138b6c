"""PyTorch's own distributed conformance suite, run against occl as a plugin backend.

`torch.testing._internal.distributed.distributed_test.DistributedTest._DistTestBase` is the
suite torch runs for gloo/nccl/ucc (test/distributed/test_distributed_spawn.py). Here it runs
with BACKEND=occl, WORLD_SIZE=2: each test spawns 2 fresh processes that re-import this module,
join an occl process group (file:// rendezvous) and run the test body. About 285 tests; about 65
of them run for a CPU plugin backend (the rest skip themselves: GPU-only, nccl/gloo-only, ...);
10-15 minutes on 2 cores.

    python -m pytest tests/test_torch_suite.py              # all of it
    python -m pytest -m "not torch_suite"                   # everything else
    python -m pytest tests/test_torch_suite.py -k test_all_reduce_sum

Its skip decorators read BACKEND, WORLD_SIZE and DistTestCases.backend_feature when
distributed_test is imported, so everything below happens at module top level, before that
import, in the pytest process and again in every spawned rank (which imports this module to find
the test class). The environment variables are set only while the suite runs (setUpClass /
tearDownClass) so they do not leak into the other test modules' worker pools.

EXPECTED_SKIPS lists the tests that cannot pass for any plugin backend (not occl bugs), each with
the reason; they are skipped before any process is spawned.
"""

from __future__ import annotations

import multiprocessing
import os
import sys
import tempfile
import unittest

import pytest

pytestmark = pytest.mark.torch_suite

_REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_BACKEND_UNDER_TEST = os.environ.get("OCCL_TEST_BACKEND", "occl")

# What distributed_test reads. TEMP_DIR/INIT_METHOD are replaced per test by TestDistBackend.setUp
# (initialize_temp_directories) before the ranks are spawned; the ranks inherit them.
SUITE_ENV = {
    "BACKEND": "occl",
    "WORLD_SIZE": "2",
    "OMP_NUM_THREADS": "1",  # 2 ranks on 2 cores
}

# test name -> why it cannot pass for a plugin backend (whatever the backend does).
EXPECTED_SKIPS = {
    "test_ddp_logging_data_cpu":
        "asserts DDP logging data backend_name == dist.get_backend(group), but DDP's logger "
        "records the ProcessGroup's C++ backend type, which is 'custom' for every plugin "
        "backend (fails with \"String comparison failed: 'custom' != 'occl'\")",
}

# True in a rank spawned by the suite (it re-imports this module); False in the pytest process.
_IN_SPAWNED_RANK = multiprocessing.parent_process() is not None

if _BACKEND_UNDER_TEST == "occl":
    _saved_env = {k: os.environ.get(k) for k in (*SUITE_ENV, "TEMP_DIR", "INIT_METHOD")}
    os.environ.update(SUITE_ENV)
    # Not read at import except INIT_METHOD's scheme (some tests need file://). A spawned rank
    # inherits the per-test TEMP_DIR that TestDistBackend.setUp created; setdefault keeps it.
    os.environ.setdefault("TEMP_DIR", os.path.join(tempfile.gettempdir(), "occl_torch_suite"))
    os.environ.setdefault("INIT_METHOD", "file://" + os.path.join(os.environ["TEMP_DIR"], "init"))

    if _REPO_ROOT not in sys.path:
        sys.path.append(_REPO_ROOT)
    import torch  # noqa: E402
    import torch.distributed as dist  # noqa: E402,F401

    import torch_occl  # noqa: E402,F401  (registers "occl")
    from torch.testing._internal.common_distributed import DistTestCases  # noqa: E402

    for _feature in ("plugin", "ddp", "subgroup"):
        DistTestCases.backend_feature[_feature].add("occl")

    from torch.testing._internal.distributed.distributed_test import (  # noqa: E402
        DistributedTest,
        TestDistBackend,
    )

    class TestDistBackendWithOCCL(TestDistBackend, DistributedTest._DistTestBase):
        @classmethod
        def setUpClass(cls):
            cls._env_before = {k: os.environ.get(k) for k in (*SUITE_ENV, "TEMP_DIR",
                                                               "INIT_METHOD")}
            os.environ.update(SUITE_ENV)
            super().setUpClass()

        @classmethod
        def tearDownClass(cls):
            super().tearDownClass()
            _restore(cls._env_before)

        def setUp(self):
            super().setUp()
            self._spawn_processes()

    # OCCL_TORCH_SUITE_RUN_EXPECTED_SKIPS=1 runs them anyway (to recheck the reasons).
    _run_expected_skips = os.environ.get("OCCL_TORCH_SUITE_RUN_EXPECTED_SKIPS") == "1"
    for _name, _reason in ({} if _run_expected_skips else EXPECTED_SKIPS).items():
        if hasattr(DistributedTest._DistTestBase, _name):
            setattr(TestDistBackendWithOCCL, _name,
                    unittest.skip(f"cannot pass for a plugin backend: {_reason}")(
                        getattr(DistributedTest._DistTestBase, _name)))


def _restore(saved):
    for k, v in saved.items():
        if v is None:
            os.environ.pop(k, None)
        else:
            os.environ[k] = v


if _BACKEND_UNDER_TEST == "occl" and not _IN_SPAWNED_RANK:
    # In the pytest process: do not leave the suite's variables set for other test modules
    # (setUpClass sets them again while the suite runs). Spawned ranks keep theirs.
    _restore(_saved_env)
elif _BACKEND_UNDER_TEST != "occl":
    def test_torch_suite_needs_occl():
        pytest.skip(f"the torch suite runs against occl only (OCCL_TEST_BACKEND="
                    f"{_BACKEND_UNDER_TEST!r})")
