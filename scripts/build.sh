#!/usr/bin/env bash
# Installs the requirements and builds torch_occl._C in place (ninja; only what changed rebuilds).
set -euo pipefail
cd "$(dirname "$0")/.."
python -m pip install --quiet --disable-pip-version-check -r requirements.txt
MAX_JOBS="${MAX_JOBS:-$(nproc)}" python setup.py --quiet build_ext --inplace
