#!/usr/bin/env bash
# The Python package's tests, run by scripts/run-tests.sh after the C++ build (scripts/setup.sh
# installs python3-dev and python3-venv with the rest):
# pip installs the package from this checkout into a virtual environment (<build>/python-venv),
# reusing the library <build> already holds (installed to <build>/python-prefix, so pip compiles
# only the module), then runs pytest. Torch-layer and GPU tests skip, saying why, where torch or
# a GPU is missing. (A plain `pip install ./python` builds the library itself.) Then
# check-wheel.sh builds the distributable wheel and checks it.
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
py=${PYTHON:-python3}

prefix="$PWD/$build/python-prefix"
venv="$PWD/$build/python-venv"
cmake --install "$build" --prefix "$prefix" >/dev/null
[ -x "$venv/bin/python" ] || "$py" -m venv "$venv"
"$venv/bin/python" -m pip install -q --disable-pip-version-check pytest numpy
"$venv/bin/python" -m pip install -q --disable-pip-version-check ./python \
  --config-settings=cmake.define.nvfp4_jit_DIR="$prefix/lib/cmake/nvfp4_jit" \
  --config-settings=cmake.define.NVFP4_JIT_PORTABLE=OFF \
  --config-settings=build-dir="$PWD/$build/python-build"
bash python/check-wheel.sh "$build"
cd python/tests
"$venv/bin/python" -m pytest -q -rs
