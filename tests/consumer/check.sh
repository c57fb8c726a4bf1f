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
[ -x "$work/build/app" ]   # the README's example links (it runs on a GPU machine)
"$work/prefix/bin/nvfp4-jit" info >/dev/null
# The exported target asks consumers for C++17 (the public headers' language).
grep -q 'INTERFACE_COMPILE_FEATURES "cxx_std_17"' "$work"/prefix/lib*/cmake/nvfp4_jit/nvfp4_jitTargets.cmake ||
  { echo "consumer: the exported target does not require cxx_std_17" >&2; exit 1; }
# The library exports its public API and nothing else (no internals, no bundled fmt).
lib=$(ls "$work"/prefix/lib*/libnvfp4_jit.so)
exported=$(nm -D --defined-only -C "$lib" | awk '{ $1 = ""; $2 = ""; print substr($0, 3) }')
stray=$(grep -Ev '^(nvfp4_|nvfp4::jit::|typeinfo (name )?for nvfp4::jit::Error$|vtable for nvfp4::jit::Error$)' <<<"$exported" |
        cat; grep -E 'nvfp4::jit::detail::' <<<"$exported" || true)
if [ -n "$stray" ]; then
  echo "consumer: libnvfp4_jit.so exports symbols outside the public API:" >&2
  head -20 <<<"$stray" >&2
  exit 1
fi
echo "consumer: find_package(nvfp4_jit) + C++17 + C API + installed CLI OK; $(wc -l <<<"$exported") exported symbols, all public"
