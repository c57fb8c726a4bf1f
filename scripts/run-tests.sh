#!/usr/bin/env bash
# Sets up, builds and runs every test, C++ then Python. GPU tests report "Skipped" on a machine without a GPU.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
ctest --test-dir build --output-on-failure -j "$(nproc)"
bash python/run-tests.sh build
