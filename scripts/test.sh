#!/usr/bin/env bash
# Builds everything, checks generated/ against the spec (occl's and occl_mpi's), then runs the
# whole test suite (occl_mpi's generated suite under mpirun among it): once on
# the default transport (shared memory between the test's ranks), and the generated conformance
# suite with the other multi-process collective tests once more over TCP only. With arguments: one pytest run with them.
# tests/test_stopped_ranks.py is not in the TCP pass: over TCP, whether a timed-out rank names the
# stopped rank depends on when the others' reports arrive (5 of 8 runs had a failure, at 109c0e8
# and at dde7e3e alike).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/build.sh
python -m occl_codegen --check
(cd backends/occl_mpi && python -m occl_codegen --spec spec/occl_mpi.yaml --out generated --check)
if [ $# -gt 0 ]; then
  exec python -m pytest "$@"
fi
python -m pytest --durations=15
OCCL_TRANSPORT=tcp python -m pytest -m "not torch_suite" generated/tests/test_occl_conformance.py \
  tests/test_async_and_timeout.py tests/test_groups.py tests/test_stacks.py tests/test_ddp.py \
  tests/test_sparse.py tests/test_average.py tests/test_faults.py tests/test_soak.py
