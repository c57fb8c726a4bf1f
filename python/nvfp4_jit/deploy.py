"""Prewarm from a checkpoint, without torch or a GPU: the NVFP4 GEMMs one rank of a sharded
engine runs, read from a ModelOpt NVFP4 checkpoint's config.json and its quant config, as
`nvfp4-jit prewarm --model DIR --tp N --ep N` derives them (README, "Prewarm from a model")."""
import os
import sys

from . import _C
from ._core import bad, fields

_MODEL_SHAPES = fields("model_shapes")
_PREWARM = fields("prewarm")


def _size(op, name, value):
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        bad(op, f"{name} must be an int of at least 1, got {value!r}")
    return value


def _model_dir(op, model_dir):
    try:
        return os.fspath(model_dir)
    except TypeError:
        bad(op, f"model_dir must be a path (str or os.PathLike), got {model_dir!r}")


def model_shapes(model_dir, *, tp=1, ep=1):
    """The weight shapes one rank of a tp x ep engine runs for the checkpoint in `model_dir`:
    a list of (name, n, k, groups), fused as engines fuse them (q+k+v, gate+up), deduplicated by
    (n, k, groups). Modules the checkpoint excludes, routers, lm_head and embeddings are left out.
    Raises InvalidArgument naming the file and field (or tp / ep) that is wrong."""
    op = "model_shapes"
    return [tuple(s) for s in _C.model_shapes(*_MODEL_SHAPES({"model_dir": _model_dir(op, model_dir), "tp": _size(op, "tp", tp),
                                                              "ep": _size(op, "ep", ep)}))]


def prewarm_model(model_dir, *, tp=1, ep=1, archs=None, sm_count=0, variants="", threads=0, load=False):
    """Compiles into the disk cache every kernel the model's shapes (model_shapes) need, as
    `nvfp4-jit prewarm --model` does: for `archs` ("sm_90a", a list of them, or None: the
    current GPU's), GEMM tiles for `sm_count` SMs (0: the current GPU's, else 132), in the
    `variants` a deployment runs (a manifest line's fields, e.g. "a-dtype=fp16 bias=bf16"),
    on `threads` threads (0: one per core). load=True also loads every kernel into the current
    GPU's context (torch's current device where torch is imported), so a CUDA graph captured
    right after needs no warm-up call. Returns the PrewarmResult's fields as a dict: kernels,
    compiled, cached, failed, not_stored, deferred, loaded, seconds, errors, notes."""
    op = "prewarm_model"
    return prewarm_shapes(op, _model_dir(op, model_dir), _size(op, "tp", tp), _size(op, "ep", ep), [], archs, sm_count,
                          variants, threads, load)


def prewarm_shapes(op, model, tp, ep, shapes, archs, sm_count, variants, threads, load):
    """nvfp4::jit::prewarm of a model ("" for none) and/or (n, k, groups) shapes, its arguments
    checked for `op`; with load, into torch's current device when torch is imported."""
    if archs is None:
        archs = ""
    elif not isinstance(archs, str):
        if not all(isinstance(a, str) for a in archs):
            bad(op, f"archs must be a str, a list of str or None, got {archs!r}")
        if not archs or not all(archs):  # "" alone would mean the current device
            bad(op, f"archs must name at least one arch and no empty one, got {list(archs)!r}")
        archs = ",".join(archs)
    if not isinstance(variants, str):
        bad(op, f"variants must be a str, got {variants!r}")
    for name, value in (("sm_count", sm_count), ("threads", threads)):
        if isinstance(value, bool) or not isinstance(value, int):
            bad(op, f"{name} must be an int, got {value!r}")
    torch = sys.modules.get("torch")
    if load and torch is not None and torch.cuda.is_available():
        torch.cuda.synchronize()  # torch's context of its current device, created and current on this thread
    return _C.prewarm(*_PREWARM({"model": model, "tp": tp, "ep": ep, "shapes": shapes, "archs": archs,
                                 "sm_count": sm_count, "variants": variants, "threads": threads, "load": bool(load)}))
