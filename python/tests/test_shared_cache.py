"""Two processes on one GPU sharing one cache root: each kernel is compiled once (compiles
counted by a shim over nvrtcCompileProgram given to the library as its NVRTC), both get the same bits, and a third
process compiles nothing. (The two-GPU, two-rank NCCL version needs a 2-GPU machine.)"""
import os
import pathlib
import shutil
import subprocess
import sys

import pytest

torch = pytest.importorskip("torch", reason="torch is not installed here: the torch layer runs on the GPU machine")

pytestmark = [pytest.mark.gpu, pytest.mark.torch_layer]
HERE = pathlib.Path(__file__).parent


@pytest.fixture(scope="module")
def counter(tmp_path_factory):
    cc = shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        pytest.skip("no C compiler to build the nvrtcCompileProgram counter")
    import nvfp4_jit
    real = nvfp4_jit.nvrtc_info()["path"]  # the NVRTC the library would load, behind the shim
    if not real:
        pytest.skip("no NVRTC found to count the compiles of")
    so = tmp_path_factory.mktemp("shim") / "nvrtc_count.so"
    subprocess.run([cc, "-shared", "-fPIC", "-O2", "-o", str(so), str(HERE / "nvrtc_count.c"), "-ldl",
                    "-Wl,--no-as-needed", real, f"-Wl,-rpath,{os.path.dirname(real)}"], check=True)
    return so


def run_workers(count, cache, shim, log, seeds):
    env = dict(os.environ, NVFP4_JIT_CACHE_DIR=str(cache), NVFP4_JIT_NVRTC=str(shim), NVRTC_COUNT_FILE=str(log))
    env.pop("NVFP4_JIT_CACHE_PATH", None)
    procs = [subprocess.Popen([sys.executable, str(HERE / "shared_cache_worker.py"), str(seed)], env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for seed in seeds[:count]]
    results = [p.communicate(timeout=240) for p in procs]
    for p, (out, err) in zip(procs, results):
        assert p.returncode == 0, err[-3000:]
    return [out.strip() for out, _ in results]


def test_two_processes_share_one_cache_and_compile_each_kernel_once(tmp_path, counter):
    cache, log = tmp_path / "cache", tmp_path / "compiles.log"
    digests = run_workers(2, cache, counter, log, [7, 7])
    compiles = log.read_text().split() if log.exists() else []
    cubins = list(cache.rglob("*.cubin"))
    per_pid = {pid: compiles.count(pid) for pid in set(compiles)}
    print(f"\nshared cache: {len(cubins)} kernels, {len(compiles)} compiles, per process {sorted(per_pid.values())}")
    assert len(cubins) > 5
    assert len(compiles) == len(cubins), "a kernel was compiled twice (or a compile left no cache entry)"
    assert digests[0] == digests[1], "the two processes got different bits from the same inputs"
    log.unlink()
    assert run_workers(1, cache, counter, log, [7]) == digests[:1]
    assert not log.exists() or log.read_text().split() == [], "a warm cache still compiled"
