"""The binding without a GPU or torch: version, sizes, cache and NVRTC info, errors and their messages,
and its calls by field name (_C.fields, _core.fields)."""
import os
import pathlib
import re

import pytest

import nvfp4_jit
from nvfp4_jit import _C
from nvfp4_jit._core import DTYPES, GEMM_EPILOGUES, GEMM_PRECISIONS, fields

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


def _gemm_fields(**changes):
    """A W4A16 GEMM's GemmArgs fields by name (host-checked values: no GPU needed)."""
    fields = {"m": 16, "n": 64, "k": 128, "a": 0x1000, "a_dtype": 0, "a_row_stride": 0, "b.data": 0x2000,
              "b.row_stride_bytes": 0, "b.scales": 0x3000, "b.scale_layout": 0, "b.global_scale.value": 1.0,
              "b.global_scale.device_ptr": 0, "b.global_scale.per_row": False, "d": 0x4000, "d_dtype": 0,
              "d_row_stride": 0, "bias": 0, "bias_dtype": 0, "alpha": 1.0, "a_fp4.data": 0, "a_fp4.row_stride_bytes": 0,
              "a_fp4.scales": 0, "a_fp4.scale_layout": 0, "a_fp4.global_scale.value": 1.0,
              "a_fp4.global_scale.device_ptr": 0, "a_fp4.global_scale.per_row": False, "workspace": 0,
              "workspace_bytes": 0, "b_prepacked": False, "weights_static": False, "epilogue": 0, "precision": 0,
              "a_rmsnorm_weight": 0, "a_rmsnorm_weight_fp32": False, "a_rmsnorm_eps": 1e-6, "residual": 0,
              "residual_row_stride": 0, "d_fp4.data": 0, "d_fp4.row_stride_bytes": 0, "d_fp4.scales": 0,
              "d_fp4.scale_layout": 0, "d_fp4.scale_mode": 0, "d_fp4.global_scale.value": 1.0,
              "d_fp4.global_scale.device_ptr": 0, "d_fp4.global_scale.per_row": False, "d_fp4.global_scale_out": 0,
              "b_swiglu_interleave": 0}
    return {**fields, **changes}


GEMM = fields("gemm")


def test_gemm_validation_runs_before_any_device_work():
    # Checked by the library on the host: the message names the argument, no GPU needed.
    with pytest.raises(nvfp4_jit.InvalidArgument, match=r"\bk\b"):
        _C.gemm(*GEMM(_gemm_fields(k=100)), 0)
    with pytest.raises(nvfp4_jit.InvalidArgument, match=r"\bd\b"):
        _C.gemm(*GEMM(_gemm_fields(d=0)), 0)


def test_gemm_modes_are_checked_on_the_host():
    # W4A8 reads the prepacked layout: a plain weight is refused, naming the argument. (SwiGLU's
    # rule is the arch's: sm_90a reads prepack's order, Blackwell the weight as stored.)
    with pytest.raises(nvfp4_jit.Unsupported, match=r"b_prepacked"):
        _C.gemm(*GEMM(_gemm_fields(m=1024, precision=GEMM_PRECISIONS["w4a8"])), 0)
    with pytest.raises(nvfp4_jit.InvalidArgument, match=r"epilogue"):
        _C.gemm(*GEMM(_gemm_fields(epilogue=7)), 0)


def test_gemm_fused_options_are_checked_on_the_host():
    # RMSNorm of A and the residual add: misaligned buffers and a negative eps are refused by name
    with pytest.raises(nvfp4_jit.InvalidArgument, match=r"a_rmsnorm_weight"):
        _C.gemm(*GEMM(_gemm_fields(a_rmsnorm_weight=0x5001)), 0)
    with pytest.raises(nvfp4_jit.InvalidArgument, match=r"a_rmsnorm_eps"):
        _C.gemm(*GEMM(_gemm_fields(a_rmsnorm_weight=0x5000, a_rmsnorm_eps=-1.0)), 0)
    with pytest.raises(nvfp4_jit.InvalidArgument, match=r"residual"):
        _C.gemm(*GEMM(_gemm_fields(residual=0x5001)), 0)
    # NVFP4 D: the SwiGLU epilogue's only; its fields reach the library's checks by name
    fp4_d = {"d": 0, "d_dtype": DTYPES["nvfp4"], "d_fp4.data": 0x5000, "d_fp4.scales": 0x6000}
    with pytest.raises(nvfp4_jit.Unsupported, match=r"d_dtype = nvfp4 is the SwiGLU epilogue's output"):
        _C.gemm(*GEMM(_gemm_fields(**fp4_d)), 0)
    swiglu = {**fp4_d, "epilogue": GEMM_EPILOGUES["swiglu"], "b_prepacked": True, "b.scales": 0}
    with pytest.raises(nvfp4_jit.InvalidArgument, match=r"d_fp4.row_stride_bytes = 18"):
        _C.gemm(*GEMM(_gemm_fields(**swiglu, **{"d_fp4.row_stride_bytes": 18})), 0)


def test_w4a8_takes_nvfp4_activations():
    # W4A4's NVFP4 A in the W4A8 mode: the workspace holds the E4M3 rows and their scales, or W4A4's
    # decoded A where the call is small enough for the exact mode
    size = fields("gemm_workspace_bytes")
    fp4 = {"a": 0, "a_dtype": DTYPES["nvfp4"], "a_fp4.data": 0x5000, "a_fp4.scales": 0x6000, "b.scales": 0,
           "b_prepacked": True, "precision": GEMM_PRECISIONS["w4a8"]}
    assert _C.gemm_workspace_bytes(*size(_gemm_fields(m=1024, **fp4))) == 1024 * 128 + 4 * 1024
    assert _C.gemm_workspace_bytes(*size(_gemm_fields(m=32, **fp4))) == 32 * 128 * 2
    assert _C.gemm_workspace_bytes(*size(_gemm_fields(m=16, **fp4))) == 16 * 128 * 2
    assert _C.gemm_workspace_bytes(*size(_gemm_fields(m=4, **fp4))) == 0  # W4A4 in one launch


def test_binding_rejects_wrong_argument_counts_and_types():
    with pytest.raises(TypeError, match=r"takes 48 arguments, got 47 \(the first missing: stream\)"):
        _C.gemm(*GEMM(_gemm_fields()))
    with pytest.raises(TypeError, match=r"argument 0 \(m\) must be an integer"):
        _C.gemm("16", *GEMM(_gemm_fields())[1:], 0)
    with pytest.raises(TypeError, match=r"argument 10 \(b.global_scale.value\) must be a float"):
        _C.gemm(*GEMM(_gemm_fields(**{"b.global_scale.value": "1"})), 0)


# The binding methods that take no field list: no arguments, or the torch function's own (checked fast paths).
NOT_BY_FIELDS = {"fields", "version", "nvrtc_info", "bind_torch", "dlpack_dtypes", "gemm_checked", "quantize_checked",
                 "dequantize_checked"}


def test_every_binding_method_but_the_checked_paths_lists_its_fields():
    methods = {name for name in dir(_C) if callable(getattr(_C, name)) and not name[0].isupper() and name[0] != "_"}
    assert set(_C.fields()) == methods - NOT_BY_FIELDS, sorted(methods - NOT_BY_FIELDS ^ set(_C.fields()))
    for method in _C.fields():
        names = _C.fields(method)
        assert names and all(isinstance(n, str) and n for n in names), (method, names)
        assert len(set(names)) == len(names), f"{method} repeats a field: {names}"
        assert "stream" not in names[:-1], (method, names)
    with pytest.raises(KeyError, match="no method gemm_checked reads named fields"):
        _C.fields("gemm_checked")


def test_field_names_follow_the_c_structs():
    gemm = _C.fields("gemm")
    assert gemm[:3] == ("m", "n", "k") and gemm[-1] == "stream" and len(gemm) == 48
    assert gemm[6:13] == ("b.data", "b.row_stride_bytes", "b.scales", "b.scale_layout", "b.global_scale.value",
                          "b.global_scale.device_ptr", "b.global_scale.per_row")
    # GroupedGemmArgs: the dense GEMM's fields under their own names, then its own
    assert gemm[30:37] == ("epilogue", "precision", "a_rmsnorm_weight", "a_rmsnorm_weight_fp32", "a_rmsnorm_eps", "residual",
                           "residual_row_stride")
    assert gemm[37:47] == ("d_fp4.data", "d_fp4.row_stride_bytes", "d_fp4.scales", "d_fp4.scale_layout", "d_fp4.scale_mode",
                           "d_fp4.global_scale.value", "d_fp4.global_scale.device_ptr", "d_fp4.global_scale.per_row",
                           "d_fp4.global_scale_out", "b_swiglu_interleave")
    assert _C.fields("grouped_gemm")[:47] == gemm[:47] and _C.fields("grouped_gemm")[47] == "groups"
    assert _C.fields("gemm_workspace_bytes") == gemm[:-1]  # a size query takes no stream
    assert _C.fields("rmsnorm_quantize")[8:17] == (
        "out.data", "out.row_stride_bytes", "out.scales", "out.scale_layout", "out.scale_mode", "out.global_scale.value",
        "out.global_scale.device_ptr", "out.global_scale.per_row", "out.global_scale_out")
    assert _C.fields("cpu_quantize") == _C.fields("quantize")[:-1]


def test_a_missing_or_unknown_field_is_named():
    with pytest.raises(KeyError, match=r"nvfp4_jit._C.gemm: field 'b.scales' is not given"):
        GEMM({k: v for k, v in _gemm_fields().items() if k != "b.scales"})
    with pytest.raises(KeyError, match=r"nvfp4_jit._C.gemm reads no field 'b.sclaes'"):
        GEMM({**_gemm_fields(), "b.sclaes": 0x3000})


def test_values_go_to_their_fields_in_any_order():
    shuffled = dict(reversed(list(_gemm_fields(k=100).items())))
    assert GEMM(shuffled) == GEMM(_gemm_fields(k=100))
    assert dict(zip(GEMM.names, GEMM(shuffled)))["k"] == 100
    with pytest.raises(nvfp4_jit.InvalidArgument, match=r"\bk\b"):
        _C.gemm(*GEMM(shuffled), 0)


@pytest.mark.parametrize("change", ["moved", "added", "removed"])
def test_a_field_changed_in_the_binding_never_lands_in_the_wrong_slot(monkeypatch, change):
    """As if the C++ struct changed: the packer follows the binding's list, or names the field."""
    names = _C.fields("gemm")
    changed = {"moved": (names[1], names[0]) + names[2:],
               "added": names[:-1] + ("pdl", "stream"),
               "removed": tuple(n for n in names if n != "alpha")}[change]
    monkeypatch.setattr(_C, "fields", lambda method: changed)
    pack = fields("gemm")
    values = _gemm_fields(m=7, n=9)
    if change == "moved":
        assert pack(values)[:2] == (9, 7)
    elif change == "added":
        with pytest.raises(KeyError, match="field 'pdl' is not given"):
            pack(values)
    else:
        with pytest.raises(KeyError, match="reads no field 'alpha'"):
            pack(values)
