// ensure_loaded: a call's kernels loaded without buffers and without a launch, so the same
// call inside a CUDA graph capture finds them.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <random>

#include "../dequantize_fixture.hpp"
#include "core/gpu_util.hpp"
#include "core/launcher.hpp"
#include "ops/gemm/backend.hpp"

using namespace nvfp4::jit;
using namespace nvfp4::jit::detail;

namespace {

// Captures `call` on a fresh stream and replays it once; throws what the call throws.
template <class Call>
void capture_and_replay(Call&& call) {
  const Driver& d = driver();
  CUstream stream = nullptr;
  check_cu(d.cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING), "cuStreamCreate");
  CUgraph graph = nullptr;
  CUgraphExec exec = nullptr;
  check_cu(d.cuStreamBeginCapture(stream, CU_STREAM_CAPTURE_MODE_GLOBAL), "cuStreamBeginCapture");
  try {
    call(stream);
  } catch (...) {
    d.cuStreamEndCapture(stream, &graph);
    if (graph) d.cuGraphDestroy(graph);
    d.cuStreamDestroy(stream);
    throw;
  }
  check_cu(d.cuStreamEndCapture(stream, &graph), "cuStreamEndCapture");
  check_cu(d.cuGraphInstantiateWithFlags(&exec, graph, 0), "cuGraphInstantiate");
  check_cu(d.cuGraphLaunch(exec, stream), "cuGraphLaunch");
  check_cu(d.cuStreamSynchronize(stream), "sync");
  d.cuGraphExecDestroy(exec);
  d.cuGraphDestroy(graph);
  d.cuStreamDestroy(stream);
}

}  // namespace

TEST_SUITE("gpu_capture") {
  TEST_CASE("ensure_loaded with null pointers loads what dequantize and quantize launch, launching nothing") {
    std::mt19937 rng(std::random_device{}());
    const int64_t rows = 3, k = 16 * 983;  // a K no other test loads
    testutil::HostNvfp4 t(rows, k, ScaleLayout::linear, rng);
    DeviceBuffer packed = to_device(t.packed), scales = to_device(t.scales), out(rows * k * 4);
    out.fill(0xEE);
    DequantizeArgs shape;  // the call's shape, no buffers
    shape.src_rows = rows, shape.k = k, shape.out_dtype = DType::fp32;
    ensure_loaded(shape);
    std::vector<uint8_t> untouched(rows * k * 4);
    out.download(untouched.data(), untouched.size());
    CHECK(std::count(untouched.begin(), untouched.end(), uint8_t(0xEE)) == long(untouched.size()));

    DequantizeArgs a = shape;
    a.src = {packed.get(), 0, scales.get(), ScaleLayout::linear, {}};
    a.out = out.get();
    CHECK_NOTHROW(capture_and_replay([&](CUstream s) { dequantize(a, s); }));
    std::vector<float> got(rows * k);
    out.download(got.data(), got.size() * 4);
    for (int64_t i = 0; i < rows * k; ++i) {
      const double want = t.value(i / k, i % k);
      if (!(got[i] == float(want) || (std::isnan(got[i]) && std::isnan(want)))) {
        FAIL_CHECK("dequantize " << rows << " x " << k << " after ensure_loaded: first wrong element (" << i / k << ", "
                                 << i % k << "): " << got[i] << " != " << want);
        break;
      }
    }

    // quantize with a per-tensor amax computed on the device: three kernels and a memset
    QuantizeArgs q;
    q.rows = rows, q.k = k, q.in_dtype = DType::fp32, q.scale_mode = GlobalScaleMode::compute_per_tensor;
    ensure_loaded(q);
    DeviceBuffer qout(rows * k / 2), qscales(scale_bytes(ScaleLayout::linear, rows, k)), gscale(4);
    q.in = out.get(), q.out = qout.get(), q.scales = qscales.get(), q.global_scale_out = gscale.as<float>();
    CHECK_NOTHROW(capture_and_replay([&](CUstream s) { quantize(q, s); }));
  }

  TEST_CASE("ensure_loaded loads a W4A4 GEMM's kernels (one launch, or A decoded first); the captured call then runs") {
    if (!find_gemm_backend(current_device().arch)) {
      MESSAGE("skipped: no GEMM backend for this GPU's arch");
      return;
    }
    std::mt19937 rng(std::random_device{}());
    for (const int64_t m : {int64_t(3), kW4A4OneLaunchRows + 6}) {
      CAPTURE(m);
      const int64_t n = 192, k = 32 * 37;  // a shape no other test loads
      GemmArgs g;
      g.m = m, g.n = n, g.k = k, g.a_dtype = DType::nvfp4;  // no workspace: allocated on the stream
      ensure_loaded(g);
      testutil::HostNvfp4 w(n, k, ScaleLayout::linear, rng), x(m, k, ScaleLayout::linear, rng);
      DeviceBuffer wp = to_device(w.packed), ws = to_device(w.scales), xp = to_device(x.packed), xs = to_device(x.scales);
      DeviceBuffer d(m * n * 2);
      g.b = {wp.get(), 0, ws.get(), ScaleLayout::linear, {}};
      g.a_fp4 = {xp.get(), 0, xs.get(), ScaleLayout::linear, {}};
      g.d = d.get();
      CHECK_NOTHROW(capture_and_replay([&](CUstream s) { gemm(g, s); }));
    }
  }
}
