#!/usr/bin/env bash
# Installs the build into a temp prefix, then builds and runs the consumer project against it.
set -euo pipefail
build=$1 src=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cmake --install "$build" --prefix "$work/prefix" >/dev/null
cmake -S "$src" -B "$work/build" -DCMAKE_PREFIX_PATH="$work/prefix" -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$work/build" -j 2 >/dev/null
"$work/build/consumer"
"$work/build/consumer_c"
"$work/prefix/bin/nvfp4-jit" info >/dev/null
echo "consumer: find_package(nvfp4_jit) + C++ and C API + installed CLI OK"
