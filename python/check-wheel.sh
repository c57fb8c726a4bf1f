#!/usr/bin/env bash
# Builds the wheel as the README does (`pip wheel ./python`), checks what it holds and that it is
# honestly manylinux_2_28, installs it into a fresh virtual environment and runs it there.
# Reuses the main build's work: the portable library is built in <build>-portable, a sibling of
# <build>, from the same sources with the same flags, so where <build> was compiled through
# ccache (scripts/setup.sh does so when ccache is installed) every object is a cache hit; pip
# then links only the module against that library (nvfp4_jit_DIR).
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
py=${PYTHON:-python3}
portable="$PWD/${build%/}-portable"   # the library's build; the wheel's work in $portable/wheel
work="$portable/wheel"
dist="$work/dist"
fail() { echo "check-wheel: $*" >&2; exit 1; }

launcher=()
command -v ccache >/dev/null && launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
cmake -S . -B "$portable" -DCMAKE_BUILD_TYPE=Release -DNVFP4_JIT_PORTABLE=ON -DNVFP4_JIT_BUILD_TESTS=OFF \
  -DNVFP4_JIT_BUILD_EXAMPLES=OFF "${launcher[@]}" >/dev/null
cmake --build "$portable" -j "$(nproc)" >/dev/null
cmake --install "$portable" --prefix "$work/prefix" >/dev/null
rm -rf "$dist"
"$py" -m pip wheel -q --disable-pip-version-check ./python -w "$dist" \
  --config-settings=cmake.define.nvfp4_jit_DIR="$work/prefix/lib/cmake/nvfp4_jit" \
  --config-settings=build-dir="$work/python-build"

# What the wheel holds.
wheels=("$dist"/*.whl)
[ ${#wheels[@]} -eq 1 ] || fail "expected one wheel in $dist, found: ${wheels[*]}"
wheel=${wheels[0]}
name=$(basename "$wheel")
[[ $name == nvfp4_jit-*-cp310-abi3-manylinux_2_28_x86_64.whl ]] ||
  fail "$name: expected the tag cp310-abi3-manylinux_2_28_x86_64"
unpacked="$work/unpacked"
rm -rf "$unpacked"
"$py" -m zipfile -e "$wheel" "$unpacked"
for f in nvfp4_jit/_C.abi3.so nvfp4_jit/libnvfp4_jit.so.0 nvfp4_jit/bin/nvfp4-jit nvfp4_jit_cli/__init__.py; do
  [ -f "$unpacked/$f" ] || fail "$name lacks $f"
done
"$py" - "$wheel" <<'PY' || fail "$name: nvfp4_jit/bin/nvfp4-jit is not executable"
import sys, zipfile
sys.exit(0 if zipfile.ZipFile(sys.argv[1]).getinfo("nvfp4_jit/bin/nvfp4-jit").external_attr >> 16 & 0o111 else 1)
PY
grep -qx 'nvfp4-jit = nvfp4_jit_cli:main' "$unpacked"/nvfp4_jit-*.dist-info/entry_points.txt ||
  fail "$name: entry_points.txt has no console script nvfp4-jit = nvfp4_jit_cli:main"

# Every ELF in it: no glibc symbol newer than 2.28, no libstdc++ (GLIBCXX, CXXABI), no NVRTC
# or driver library needed (both are loaded at run time).
elves=0
while IFS= read -r -d '' f; do
  head -c 4 "$f" | grep -q $'\x7fELF' || continue
  elves=$((elves + 1))
  rel=${f#"$unpacked"/}
  newest=$(objdump -T "$f" | grep -oE '\bGLIBC_[0-9.]+' | sed 's/GLIBC_//' | sort -V | tail -1)
  [ "$(printf '%s\n2.28\n' "$newest" | sort -V | tail -1)" = 2.28 ] || fail "$rel needs GLIBC_$newest (> 2.28)"
  cxx=$(objdump -T "$f" | { grep -oE '\b(GLIBCXX|CXXABI)_[0-9.A-Z_]+' || true; } | sort -u | tr '\n' ' ')
  [ -z "$cxx" ] || fail "$rel needs libstdc++ ($cxx)"
  needed=$(readelf -d "$f" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p')
  bad=$({ grep -E '^(libnvrtc|libcuda|libstdc\+\+)' || true; } <<<"$needed" | tr '\n' ' ')
  [ -z "$bad" ] || fail "$rel needs $bad(NVRTC and libcuda are loaded at run time, libstdc++ linked in)"
done < <(find "$unpacked" -type f -print0)
[ "$elves" -eq 3 ] || fail "$name: expected 3 ELF files (module, library, command), found $elves"

# Installed into a fresh environment: nothing compiles, the command and the package run.
venv="$work/venv"
rm -rf "$venv"
"$py" -m venv "$venv"
start=$EPOCHREALTIME
"$venv/bin/python" -m pip install -q --disable-pip-version-check --no-deps "$wheel"
seconds=$(awk "BEGIN { printf \"%.1f\", $EPOCHREALTIME - $start }")
version=$("$venv/bin/nvfp4-jit" --version)
[[ $version == "nvfp4-jit "* ]] || fail "nvfp4-jit --version printed '$version'"
"$venv/bin/nvfp4-jit" info >/dev/null || fail "nvfp4-jit info failed"
set +e; "$venv/bin/nvfp4-jit" no-such-verb >/dev/null 2>&1; rc=$?; set -e
[ "$rc" -eq 2 ] || fail "nvfp4-jit no-such-verb exited $rc, expected 2 (the command's usage error)"
imported=$(cd / && "$venv/bin/python" -c "import nvfp4_jit; print(nvfp4_jit.__version__)")
[ "nvfp4-jit $imported" = "$version" ] || fail "import nvfp4_jit gave version '$imported', the command '$version'"
echo "check-wheel: $name ($(du -k "$wheel" | cut -f1) KiB): manylinux_2_28, $elves ELF files, installed in ${seconds}s;" \
     "nvfp4-jit --version, info and import nvfp4_jit OK"
