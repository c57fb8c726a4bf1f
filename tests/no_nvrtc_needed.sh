#!/usr/bin/env bash
# NVRTC is found at run time (src/core/nvrtc_library.cpp), never by the loader: no binary may
# name libnvrtc among its NEEDED libraries, or the loader's NVRTC would win over that search.
set -euo pipefail
status=0
for binary in "$@"; do
  dynamic=$(readelf -d "$binary")
  grep -q '(NEEDED)' <<<"$dynamic" || { echo "no_nvrtc_needed: readelf shows no NEEDED entry in $binary" >&2; exit 1; }
  if grep -E '\(NEEDED\).*libnvrtc' <<<"$dynamic" >&2; then
    echo "no_nvrtc_needed: $binary links NVRTC at load time (drop CUDA::nvrtc from its link line)" >&2
    status=1
  fi
done
[ "$status" = 0 ] && echo "no_nvrtc_needed: none of $# binaries needs libnvrtc"
exit "$status"
