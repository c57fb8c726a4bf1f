"""Prewarm from a checkpoint without torch or a GPU: nvfp4_jit.model_shapes and prewarm_model on
configs written here with real models' numbers, the expected shapes worked out by hand."""
import json

import pytest

import nvfp4_jit

LLAMA_70B = {"model_type": "llama", "hidden_size": 8192, "intermediate_size": 28672, "num_attention_heads": 64,
             "num_key_value_heads": 8, "num_hidden_layers": 80}
QWEN3_30B_A3B = {"model_type": "qwen3_moe", "hidden_size": 2048, "intermediate_size": 6144, "head_dim": 128,
                 "moe_intermediate_size": 768, "num_experts": 128, "decoder_sparse_step": 1, "mlp_only_layers": [],
                 "num_attention_heads": 32, "num_key_value_heads": 4, "num_hidden_layers": 48}
MODELOPT = {"quantization": {"quant_algo": "NVFP4", "group_size": 16, "exclude_modules": ["lm_head"]}}


def checkpoint(path, config, quant=MODELOPT):
    (path / "config.json").write_text(json.dumps(config))
    if quant is not None:
        (path / "hf_quant_config.json").write_text(json.dumps(quant))
    return path


def test_llama_70b_at_tp_8(tmp_path):
    shapes = nvfp4_jit.model_shapes(checkpoint(tmp_path, LLAMA_70B), tp=8)
    assert shapes == [("model.layers.*.self_attn.qkv_proj", (64 + 2 * 8) * 128 // 8, 8192, 1),
                      ("model.layers.*.self_attn.o_proj", 8192, 64 * 128 // 8, 1),
                      ("model.layers.*.mlp.gate_up_proj", 2 * 28672 // 8, 8192, 1),
                      ("model.layers.*.mlp.down_proj", 8192, 28672 // 8, 1)]


def test_qwen3_moe_experts_split_by_tp_or_held_whole_by_ep(tmp_path):
    model = str(checkpoint(tmp_path, QWEN3_30B_A3B))
    experts = {name: (n, k, g) for name, n, k, g in nvfp4_jit.model_shapes(model, tp=8) if "experts" in name}
    assert experts == {"model.layers.*.mlp.experts.gate_up_proj": (2 * 768 // 8, 2048, 128),
                       "model.layers.*.mlp.experts.down_proj": (2048, 768 // 8, 128)}
    experts = {name: (n, k, g) for name, n, k, g in nvfp4_jit.model_shapes(model, tp=8, ep=8) if "experts" in name}
    assert experts == {"model.layers.*.mlp.experts.gate_up_proj": (2 * 768, 2048, 128 // 8),
                       "model.layers.*.mlp.experts.down_proj": (2048, 768, 128 // 8)}
    qkv = nvfp4_jit.model_shapes(model, tp=8)[0]  # 4 KV heads at tp 8: one per rank, replicated
    assert qkv == ("model.layers.*.self_attn.qkv_proj", (32 // 8 + 2 * 1) * 128, 2048, 1)


def test_errors_name_the_file_field_or_argument(tmp_path):
    model = checkpoint(tmp_path, LLAMA_70B)
    with pytest.raises(nvfp4_jit.InvalidArgument, match="config.json: num_attention_heads 64 is not divisible by tp 3"):
        nvfp4_jit.model_shapes(model, tp=3)
    with pytest.raises(nvfp4_jit.InvalidArgument, match="model_shapes: tp must be an int of at least 1, got 0"):
        nvfp4_jit.model_shapes(model, tp=0)
    with pytest.raises(nvfp4_jit.InvalidArgument, match="ep must be an int of at least 1, got True"):
        nvfp4_jit.model_shapes(model, ep=True)
    with pytest.raises(nvfp4_jit.InvalidArgument, match="model_dir must be a path"):
        nvfp4_jit.model_shapes(3)
    with pytest.raises(nvfp4_jit.InvalidArgument, match="config.json: no such file"):
        nvfp4_jit.model_shapes(tmp_path / "nowhere")
    (tmp_path / "hf_quant_config.json").unlink()
    with pytest.raises(nvfp4_jit.InvalidArgument, match="no quantization config"):
        nvfp4_jit.model_shapes(model)
    with pytest.raises(nvfp4_jit.InvalidArgument, match="archs must be a str, a list of str or None"):
        nvfp4_jit.prewarm_model(model, archs=[90])
    for archs in ([""], [], ["sm_90a", ""]):  # joined, "" would mean the current device
        with pytest.raises(nvfp4_jit.InvalidArgument, match="archs must name at least one arch and no empty one"):
            nvfp4_jit.prewarm_model(model, archs=archs)
    with pytest.raises(nvfp4_jit.InvalidArgument, match="tp must be an int of at least 1"):
        nvfp4_jit.prewarm_model(model, tp=-2, archs="sm_90a")


def test_prewarm_model_compiles_the_shapes_kernels_into_the_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("NVFP4_JIT_CACHE_DIR", str(tmp_path / "cache"))
    model = tmp_path / "model"
    model.mkdir()
    # a small Llama: qkv [(2 + 2 x 2) x 32, 64], o_proj and gate_up [64, 64], down [64, 32]
    checkpoint(model, {"model_type": "llama", "hidden_size": 64, "intermediate_size": 32, "num_attention_heads": 2,
                       "num_key_value_heads": 2, "num_hidden_layers": 1})
    assert [s[1:] for s in nvfp4_jit.model_shapes(model)] == [((2 + 2 * 2) * 32, 64, 1), (64, 64, 1), (64, 32, 1)]
    result = nvfp4_jit.prewarm_model(model, archs=["sm_90a"], variants="a-dtype=bf16 in-dtype=bf16", threads=2)
    assert result["kernels"] > 0 and result["failed"] == 0 and result["errors"] == []
    assert result["compiled"] + result["cached"] == result["kernels"]
    again = nvfp4_jit.prewarm_model(str(model), archs="sm_90a", variants="a-dtype=bf16 in-dtype=bf16", threads=2)
    assert again["kernels"] == result["kernels"] and again["compiled"] == 0
    assert result["loaded"] == 0  # nothing loaded without load=True


def test_prewarm_model_with_load_needs_a_gpu(tmp_path, monkeypatch):
    import importlib.util
    if importlib.util.find_spec("torch") is not None:
        pytest.skip("torch is installed here: test_gpu.py loads on a GPU")
    monkeypatch.setenv("NVFP4_JIT_CACHE_DIR", str(tmp_path / "cache"))
    model = tmp_path / "model"
    model.mkdir()
    checkpoint(model, {"model_type": "llama", "hidden_size": 64, "intermediate_size": 32, "num_attention_heads": 2,
                       "num_key_value_heads": 2, "num_hidden_layers": 1})
    try:
        import ctypes
        ctypes.CDLL("libcuda.so.1")
        pytest.skip("a CUDA driver is installed here")
    except OSError:
        pass
    with pytest.raises(nvfp4_jit.NoDevice, match="CUDA driver unavailable"):
        nvfp4_jit.prewarm_model(model, archs="sm_90a", variants="a-dtype=bf16", load=True)


def test_prewarm_model_refuses_sizes_that_do_not_fit(tmp_path):
    model = tmp_path / "model"
    model.mkdir()
    checkpoint(model, {"model_type": "llama", "hidden_size": 64, "intermediate_size": 32, "num_attention_heads": 2,
                       "num_key_value_heads": 2, "num_hidden_layers": 1})
    with pytest.raises(nvfp4_jit.InvalidArgument, match=r"tp = 4294967298 is out of range"):
        nvfp4_jit.prewarm_model(model, tp=2**32 + 2, archs="sm_90a")
    with pytest.raises(nvfp4_jit.InvalidArgument, match=r"sm_count = 4294967296 is out of range"):
        nvfp4_jit.prewarm_model(model, archs="sm_90a", sm_count=2**32)
