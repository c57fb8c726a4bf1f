// The context a call runs in (CallDevice): a thread with no current context, the legacy stream,
// a stream of another device; and prewarm with load, then graph capture with no eager call.
#include <doctest/doctest.h>

#include <algorithm>
#include <cstring>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "core/driver.hpp"
#include "core/gpu_util.hpp"
#include "core/launcher.hpp"
#include "nvfp4/jit.hpp"
#include "ops/gemm/backend.hpp"

using namespace nvfp4::jit;
using namespace nvfp4::jit::detail;

namespace {

constexpr int64_t kRows = 37, kK = 16 * 71;  // a K no other test loads

std::vector<float> random_input(int64_t count) {
  std::mt19937 rng(7);
  std::normal_distribution<float> dist(0.0f, 3.0f);
  std::vector<float> v(static_cast<size_t>(count));
  for (float& x : v) x = dist(rng);
  return v;
}

// An fp32 quantize of [kRows, kK] from `in` into fresh outputs; the bytes it wrote.
struct Quantized {
  DeviceBuffer out{size_t(kRows * kK / 2)}, scales{size_t(scale_bytes(ScaleLayout::linear, kRows, kK))};
  QuantizeArgs args(const DeviceBuffer& in) const {
    QuantizeArgs q;
    q.in = in.get(), q.in_dtype = DType::fp32, q.rows = kRows, q.k = kK;
    q.out = out.get(), q.scales = scales.get(), q.global_scale.value = 0.5f;
    return q;
  }
  std::vector<uint8_t> bytes() const {
    std::vector<uint8_t> b(out.bytes() + scales.bytes());
    out.download(b.data(), out.bytes());
    scales.download(b.data() + out.bytes(), scales.bytes());
    return b;
  }
};

CUcontext current_context() {
  CUcontext c = nullptr;
  check_cu(driver().cuCtxGetCurrent(&c), "cuCtxGetCurrent");
  return c;
}

// Runs `body` on a fresh std::thread (no context current there); rethrows its error's text.
template <class Body>
std::string on_fresh_thread(Body&& body) {
  std::string error;
  std::thread t([&] {
    try {
      if (current_context()) throw std::runtime_error("a fresh thread has a current context");
      body();
    } catch (const std::exception& e) {
      error = e.what();
    }
  });
  t.join();
  return error;
}

}  // namespace

TEST_SUITE("gpu_context") {
  TEST_CASE("a thread with no current context runs in its stream's context, or device 0's for the legacy stream") {
    const Driver& d = driver();
    const DeviceBuffer in = to_device(random_input(kRows * kK));
    CUstream stream = nullptr;
    check_cu(d.cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING), "cuStreamCreate");
    Quantized want;
    quantize(want.args(in), stream);
    check_cu(d.cuStreamSynchronize(stream), "sync");
    const std::vector<uint8_t> want_bytes = want.bytes();

    Quantized on_stream;
    CHECK(on_fresh_thread([&] {
            quantize(on_stream.args(in), stream);
            check_cu(driver().cuStreamSynchronize(stream), "sync");
            if (!current_context()) throw std::runtime_error("the stream's context was not adopted");
          }) == "");
    CHECK(on_stream.bytes() == want_bytes);

    Quantized on_legacy;
    CHECK(on_fresh_thread([&] {
            quantize(on_legacy.args(in), nullptr);
            check_cu(driver().cuCtxSynchronize(), "cuCtxSynchronize");
          }) == "");
    CHECK(on_legacy.bytes() == want_bytes);
    d.cuStreamDestroy(stream);
  }

  TEST_CASE("a stream of device 1 while device 0's context is current runs on device 1") {
    const Driver& d = driver();
    int count = 0;
    check_cu(d.cuDeviceGetCount(&count), "cuDeviceGetCount");
    if (count < 2) {
      MESSAGE("skipped: one GPU (a stream of another device needs two)");
      return;
    }
    const CUcontext home = current_context();
    const DeviceBuffer in0 = to_device(random_input(kRows * kK));
    Quantized want;
    quantize(want.args(in0), nullptr);
    check_cu(d.cuCtxSynchronize(), "sync");

    REQUIRE(use_primary_context(1));
    CUstream stream1 = nullptr;
    check_cu(d.cuStreamCreate(&stream1, CU_STREAM_NON_BLOCKING), "cuStreamCreate");
    std::optional<DeviceBuffer> in1(to_device(random_input(kRows * kK)));
    std::optional<Quantized> got(std::in_place);
    REQUIRE(use_primary_context(0));
    REQUIRE(current_context() == home);
    quantize(got->args(*in1), stream1);
    check_cu(d.cuStreamSynchronize(stream1), "sync");
    CHECK(current_context() == home);  // pushed for the call, popped after
    CHECK(got->bytes() == want.bytes());
    // device 0's output on device 1's stream: refused, naming the stream
    Quantized wrong;
    try {
      quantize(wrong.args(in0), stream1);
      FAIL("a stream of device 1 with device 0's output was accepted");
    } catch (const Error& e) {
      CHECK(e.status() == Status::invalid_argument);
      CHECK(std::string(e.what()).find("`stream` belongs to device 1") != std::string::npos);
    }
    REQUIRE(use_primary_context(1));
    got.reset(), in1.reset();  // freed in device 1's context
    d.cuStreamDestroy(stream1);
    REQUIRE(use_primary_context(0));
  }

  TEST_CASE("prewarm with load makes gemm and quantize capture-ready with no eager call") {
    const Driver& d = driver();
    const int64_t n = 384, k = 64 * 23;  // a shape no other test loads
    PrewarmOptions options;
    options.shapes = {{n, k, 1}};
    options.load = true;
    const PrewarmResult result = prewarm(options);
    REQUIRE(result.failed == 0);
    CHECK(result.loaded > 0);
    CHECK(result.loaded <= result.kernels);
    const PrewarmResult again = prewarm(options);
    CHECK(again.loaded == result.loaded);  // already loaded: counted, not loaded twice

    const int64_t m = 77;
    std::mt19937 rng(3);
    std::vector<uint16_t> x(size_t(m * k));
    for (uint16_t& v : x) {  // bf16 in [-2, 2)
      const float f = std::uniform_real_distribution<float>(-2.0f, 2.0f)(rng);
      uint32_t bits;
      std::memcpy(&bits, &f, 4);
      v = uint16_t(bits >> 16);
    }
    std::vector<uint8_t> w(size_t(n * k / 2));
    for (uint8_t& b : w) b = uint8_t(rng());
    const DeviceBuffer a = to_device(x), b = to_device(w);
    DeviceBuffer b_scales(size_t(scale_bytes(ScaleLayout::linear, n, k))), a_fp4(size_t(m * k / 2)),
        a_scales(size_t(scale_bytes(ScaleLayout::linear, m, k))), workspace(size_t(m * k * 2));
    b_scales.fill(0x38);  // 1.0
    std::vector<DeviceBuffer> outs;
    for (int i = 0; i < 4; ++i) outs.emplace_back(size_t(m * n * 2));

    auto calls = [&](CUstream s, const DeviceBuffer& w4a16_out, const DeviceBuffer& w4a4_out) {
      QuantizeArgs q;
      q.in = a.get(), q.rows = m, q.k = k, q.out = a_fp4.get(), q.scales = a_scales.get(), q.global_scale.value = 0.25f;
      quantize(q, s);
      GemmArgs g;
      g.m = m, g.n = n, g.k = k, g.a = a.get(), g.b.data = b.get(), g.b.scales = b_scales.get(), g.d = w4a16_out.get();
      gemm(g, s);
      g.a = nullptr, g.a_dtype = DType::nvfp4, g.a_fp4 = {a_fp4.get(), 0, a_scales.get(), q.scale_layout, q.global_scale};
      g.d = w4a4_out.get(), g.workspace = workspace.get(), g.workspace_bytes = gemm_workspace_bytes(g);
      gemm(g, s);
    };
    CUstream stream = nullptr;
    check_cu(d.cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING), "cuStreamCreate");
    CUgraph graph = nullptr;
    CUgraphExec exec = nullptr;
    check_cu(d.cuStreamBeginCapture(stream, CU_STREAM_CAPTURE_MODE_GLOBAL), "cuStreamBeginCapture");
    std::string error;
    try {
      calls(stream, outs[0], outs[1]);
    } catch (const Error& e) {
      error = e.what();
    }
    check_cu(d.cuStreamEndCapture(stream, &graph), "cuStreamEndCapture");
    REQUIRE_MESSAGE(error.empty(), error);
    check_cu(d.cuGraphInstantiateWithFlags(&exec, graph, 0), "cuGraphInstantiate");
    check_cu(d.cuGraphLaunch(exec, stream), "cuGraphLaunch");
    calls(stream, outs[2], outs[3]);  // the same calls, eager: the replay's bits
    check_cu(d.cuStreamSynchronize(stream), "sync");
    for (int i = 0; i < 2; ++i) {
      std::vector<uint8_t> replayed(outs[i].bytes()), eager(outs[i].bytes());
      outs[i].download(replayed.data(), replayed.size());
      outs[i + 2].download(eager.data(), eager.size());
      CAPTURE(i == 0 ? "W4A16" : "W4A4");
      CHECK(replayed == eager);
      CHECK(std::count(eager.begin(), eager.end(), uint8_t(0)) < long(eager.size()));  // something was written
    }
    d.cuGraphExecDestroy(exec);
    d.cuGraphDestroy(graph);
    d.cuStreamDestroy(stream);
  }
}
