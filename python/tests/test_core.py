"""The binding without a GPU or torch: version, sizes, cache and NVRTC info, errors and their messages."""
import os
import pathlib
import re

import pytest

import nvfp4_jit
from nvfp4_jit import _C

ROOT = pathlib.Path(__file__).resolve().parents[2]


def test_version_is_the_cmake_projects():
    if not (ROOT / "CMakeLists.txt").exists():
        pytest.skip("the tests run outside the repository (no CMakeLists.txt to read the version from)")
    cmake = (ROOT / "CMakeLists.txt").read_text()
    assert nvfp4_jit.version() == re.search(r"project\(nvfp4_jit VERSION ([0-9.]+)", cmake).group(1)
    assert nvfp4_jit.__version__ == nvfp4_jit.version()


def test_module_is_stable_abi_and_links_no_torch():
    so = pathlib.Path(_C.__file__)
    assert so.name == "_C.abi3.so"
    needed = os.popen(f"readelf -d {so} 2>/dev/null").read()
    if needed:
        assert "libtorch" not in needed and "libpython" not in needed
        assert "libnvfp4_jit.so" in needed


@pytest.mark.parametrize("rows,k", [(1, 16), (7, 48), (128, 256), (300, 4096)])
def test_scale_bytes_follow_the_documented_layouts(rows, k):
    assert nvfp4_jit.scale_bytes(rows, k) == rows * k // 16
    kb = -(-(k // 16) // 4) * 4
    assert nvfp4_jit.scale_bytes(rows, k, "swizzled128x4") == -(-rows // 128) * 128 * kb


def test_prepacked_bytes_hold_values_and_scales_and_check_k():
    for n, k in [(1, 32), (130, 288), (4096, 4096)]:
        assert nvfp4_jit.prepacked_bytes(n, k) >= n * k // 2 + n * k // 16
    with pytest.raises(nvfp4_jit.InvalidArgument, match=r"\bk\b.*32"):
        nvfp4_jit.prepacked_bytes(64, 48)


def test_cache_info_follows_the_environment(monkeypatch, tmp_path):
    monkeypatch.setenv("NVFP4_JIT_CACHE_DIR", str(tmp_path / "c"))
    monkeypatch.setenv("NVFP4_JIT_CACHE_PATH", "/a::/b")
    info = nvfp4_jit.cache_info()
    assert info["root"] == str(tmp_path / "c") and info["read_only_roots"] == ["/a", "/b"]
    monkeypatch.delenv("NVFP4_JIT_CACHE_DIR")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert nvfp4_jit.cache_info()["root"] == str(tmp_path / "nvfp4-jit")


def test_info_names_the_nvrtc_and_the_cache(monkeypatch, tmp_path):
    monkeypatch.setenv("NVFP4_JIT_CACHE_DIR", str(tmp_path / "c"))
    info = nvfp4_jit.info()
    assert info["version"] == nvfp4_jit.version() and info["root"] == str(tmp_path / "c")
    nvrtc = info["nvrtc"]
    assert nvrtc == nvfp4_jit.nvrtc_info()
    assert nvrtc["error"] == "" and os.path.exists(nvrtc["path"]), nvrtc
    assert re.fullmatch(r"\d+\.\d+", nvrtc["version"]) and nvrtc["source"] in ("env", "process", "wheel", "system")


SYSTEM_NVRTC = "/usr/local/cuda/lib64/libnvrtc.so.13"


def nvrtc_in_child(code, **env):
    """nvfp4_jit.nvrtc_info() in a fresh interpreter (a process searches once) after `code`."""
    import json
    import subprocess
    import sys
    run_env = {k: v for k, v in os.environ.items() if k != "NVFP4_JIT_NVRTC"} | env
    out = subprocess.run([sys.executable, "-c", code + "\nimport json, nvfp4_jit; print(json.dumps(nvfp4_jit.nvrtc_info()))"],
                         env=run_env, capture_output=True, text=True, check=True)
    return json.loads(out.stdout.splitlines()[-1])


@pytest.mark.skipif(not os.path.exists(SYSTEM_NVRTC), reason="no CUDA 13 toolkit at /usr/local/cuda")
def test_an_nvrtc_already_loaded_is_used_as_torchs_would_be(tmp_path):
    (tmp_path / "libnvrtc.so.13").symlink_to(SYSTEM_NVRTC)
    nvrtc = nvrtc_in_child(f"import ctypes; ctypes.CDLL({str(tmp_path / 'libnvrtc.so.13')!r})")
    assert nvrtc["source"] == "process" and nvrtc["path"] == str(tmp_path / "libnvrtc.so.13"), nvrtc


def test_a_missing_nvrtc_variable_is_reported_not_raised(tmp_path):
    nvrtc = nvrtc_in_child("", NVFP4_JIT_NVRTC=str(tmp_path / "nope.so"))
    assert nvrtc["path"] == "" and nvrtc["source"] == ""
    assert nvrtc["error"].startswith(f"NVFP4_JIT_NVRTC={tmp_path / 'nope.so'} cannot be loaded"), nvrtc


def test_library_errors_are_python_exceptions_with_its_message():
    with pytest.raises(nvfp4_jit.InvalidArgument, match=r"\bk\b") as e:
        nvfp4_jit.scale_bytes(4, 15)
    assert isinstance(e.value, ValueError) and isinstance(e.value, nvfp4_jit.Error)
    assert e.value.status == 1
    assert issubclass(nvfp4_jit.NotLoadedInCapture, nvfp4_jit.Error)
    assert issubclass(nvfp4_jit.Unsupported, NotImplementedError)


def test_python_layer_names_the_bad_enum():
    with pytest.raises(nvfp4_jit.InvalidArgument, match="scale_layout must be one of 'linear', 'swizzled128x4'"):
        nvfp4_jit.scale_bytes(4, 16, "tiled")


def _gemm_fields(m=16, n=64, k=128, a=0x1000, b=0x2000, scales=0x3000, d=0x4000):
    a4 = (0, 0, 0, 0, 1.0, 0, False)
    return (m, n, k, a, 0, 0, b, 0, scales, 0, 1.0, 0, False, d, 0, 0, 0, 0, 1.0, *a4, 0, 0, False, False)


def test_gemm_validation_runs_before_any_device_work():
    # Checked by the library on the host: the message names the argument, no GPU needed.
    with pytest.raises(nvfp4_jit.InvalidArgument, match=r"\bk\b"):
        _C.gemm(*_gemm_fields(k=100), 0)
    with pytest.raises(nvfp4_jit.InvalidArgument, match=r"\bd\b"):
        _C.gemm(*_gemm_fields(d=0), 0)


def test_binding_rejects_wrong_argument_counts_and_types():
    with pytest.raises(TypeError, match="takes 31 arguments, got 30"):
        _C.gemm(*_gemm_fields())
    with pytest.raises(TypeError, match="argument 0 must be an integer"):
        _C.gemm("16", *_gemm_fields()[1:], 0)
