#!/usr/bin/env bash
# Builds everything, then two processes train a small model with DDP over occl.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/build.sh
python -m torch_occl.demo "$@"
