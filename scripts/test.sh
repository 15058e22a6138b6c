#!/usr/bin/env bash
# Builds everything, checks generated/ against the spec, then runs the whole test suite.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/build.sh
python -m codegen --check
python -m pytest "$@"
