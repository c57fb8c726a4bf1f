#!/usr/bin/env bash
# Installs what the build needs (Debian/Ubuntu) and builds nvfp4-jit (Release) into ./build.
# The CUDA toolkit (NVRTC, 12.8 or newer) must already be installed, e.g. in /usr/local/cuda.
set -euo pipefail
cd "$(dirname "$0")/.."

packages=(cmake g++ make ccache libfmt-dev libxxhash-dev nlohmann-json3-dev libcli11-dev doctest-dev util-linux python3-dev python3-venv)
missing=()
for p in "${packages[@]}"; do dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p"); done
if ((${#missing[@]})); then
  echo "setup: installing ${missing[*]}"
  sudo=""; [ "$(id -u)" -eq 0 ] || sudo="sudo"
  export DEBIAN_FRONTEND=noninteractive
  $sudo apt-get update -qq
  $sudo apt-get install -y -qq "${missing[@]}" >/dev/null
fi
if [ -z "${CUDAToolkit_ROOT:-}" ] && ! command -v nvcc >/dev/null && [ -x /usr/local/cuda/bin/nvcc ]; then
  export PATH=/usr/local/cuda/bin:$PATH
fi
command -v nvcc >/dev/null || { echo "setup: the CUDA toolkit (12.8+, with NVRTC) is not installed" >&2; exit 1; }
# nvdisasm lets the sm_120a SASS test read what NVRTC built (CUDA toolkits without it skip that test).
if ! command -v nvdisasm >/dev/null && [ ! -x /usr/local/cuda/bin/nvdisasm ]; then
  python3 -m pip install --quiet nvidia-cuda-nvdisasm 2>/dev/null ||
    echo "setup: nvdisasm not installed (the sm_120a SASS test will skip)"
fi

# Through ccache: python/check-wheel.sh rebuilds the library for the wheel from the same objects.
launcher=()
command -v ccache >/dev/null && launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release "${launcher[@]}" >/dev/null
cmake --build build -j "$(nproc)"
