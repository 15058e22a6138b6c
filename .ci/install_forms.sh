#!/usr/bin/env bash
# The three ways to install torch_occl, each checked from outside the checkout by
# .ci/check_installed.py: editable (what scripts/build.sh leaves), a regular install, and a wheel
# installed into a second fresh environment. Usage: install_forms.sh SCRATCH_FOLDER, with the
# environment scripts/build.sh installed into active.
set -euo pipefail
cd "$(dirname "$0")/.."
checkout=$PWD
scratch=$1
check="$checkout/.ci/check_installed.py"
site_packages() { "$1" -c 'import sysconfig; print(sysconfig.get_paths()["platlib"])'; }

echo "-- editable: pip install --no-build-isolation -e . (as scripts/build.sh left it)"
(cd "$scratch" && python "$check" "$checkout")

echo "-- installed: pip install --no-build-isolation ."
python -m pip install --quiet --disable-pip-version-check --no-build-isolation .
(cd "$scratch" && python "$check" "$(site_packages python)")

echo "-- wheel: pip wheel --no-build-isolation ., installed into a fresh environment"
python -m pip wheel --quiet --disable-pip-version-check --no-build-isolation --no-deps \
  --wheel-dir "$scratch/wheels" .
python -m venv "$scratch/wheel-venv"
"$scratch/wheel-venv/bin/python" -m pip install --quiet --disable-pip-version-check \
  "$scratch"/wheels/torch_occl-*.whl
wheel_python="$scratch/wheel-venv/bin/python"
(cd "$scratch" && "$wheel_python" "$check" "$(site_packages "$wheel_python")")

# Leave the environment as README's commands do: the checkout installed editable.
python -m pip install --quiet --disable-pip-version-check --no-build-isolation --no-deps -e .
