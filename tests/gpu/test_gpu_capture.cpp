// CUDA graph capture: prewarmed kernels launch inside a capture; a cold kernel fails with a
// clear error and leaves the capture intact.
#include <doctest/doctest.h>

#include <cstring>

#include "../dequantize_fixture.hpp"
#include "../test_util.hpp"
#include "core/gpu_util.hpp"
#include "core/kernel_store.hpp"
#include "core/launcher.hpp"
#include "core/tensor_map.hpp"

using namespace nvfp4::jit;
using namespace nvfp4::jit::detail;

namespace {

// `call(stream)` inside a capture on `stream`: "" when it was captured, else its error, which
// must be not_loaded_in_capture. The capture ends either way.
template <class Call>
std::string capture_error(CUstream stream, Call&& call) {
  const Driver& d = driver();
  std::string error;
  check_cu(d.cuStreamBeginCapture(stream, CU_STREAM_CAPTURE_MODE_GLOBAL), "cuStreamBeginCapture");
  try {
    call(stream);
  } catch (const Error& e) {
    CHECK(e.status() == Status::not_loaded_in_capture);
    error = e.what();
  }
  CUgraph graph = nullptr;
  CHECK(d.cuStreamEndCapture(stream, &graph) == CUDA_SUCCESS);
  if (graph) d.cuGraphDestroy(graph);
  return error;
}

// The prewarm command a capture error names, run in another process on this cache; then `call`
// loads its kernels from disk, compiling nothing, and is captured. Returns the command.
template <class Call>
std::string prewarm_named_command(CUstream stream, Call&& call) {
  const std::string error = capture_error(stream, call);
  const size_t from = error.find("(after `"), to = error.find('`', from + 8);
  REQUIRE(from != std::string::npos);
  const std::string command = error.substr(from + 8, to - from - 8);
  CAPTURE(command);
  REQUIRE(command.rfind("nvfp4-jit prewarm ", 0) == 0);
  const auto prewarm = testutil::run(testutil::cli() + command.substr(std::string("nvfp4-jit").size()) + " --quiet --json");
  CAPTURE(prewarm.err);
  REQUIRE(prewarm.code == 0);
  const StoreStats before = KernelStore::instance().stats();
  call(stream);
  check_cu(driver().cuStreamSynchronize(stream), "sync");
  const StoreStats after = KernelStore::instance().stats();
  CHECK(after.compiled == before.compiled);
  CHECK(after.disk_hits > before.disk_hits);
  CHECK(capture_error(stream, call).empty());  // and now it is captured
  return command;
}

}  // namespace

TEST_SUITE("gpu_capture") {
  TEST_CASE("a loaded kernel is captured into a graph and replays with new global scales") {
    std::mt19937 rng(std::random_device{}());
    testutil::HostNvfp4 t(64, 256, ScaleLayout::linear, rng);
    DeviceBuffer packed = to_device(t.packed), scales = to_device(t.scales), out(64 * 256 * 4);
    DeviceBuffer gscale = to_device(std::vector<float>{2.0f});
    DequantizeArgs a;
    a.src = {packed.get(), 0, scales.get(), ScaleLayout::linear, {1.0f, gscale.as<float>(), false}};
    a.src_rows = 64;
    a.k = 256;
    a.out = out.get();
    a.out_dtype = DType::fp32;
    const Driver& d = driver();
    CUstream stream = nullptr;
    check_cu(d.cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING), "cuStreamCreate");
    dequantize(a, stream);  // warm-up outside the capture loads the kernel
    check_cu(d.cuStreamSynchronize(stream), "sync");

    CUgraph graph = nullptr;
    CUgraphExec exec = nullptr;
    check_cu(d.cuStreamBeginCapture(stream, CU_STREAM_CAPTURE_MODE_GLOBAL), "cuStreamBeginCapture");
    dequantize(a, stream);
    check_cu(d.cuStreamEndCapture(stream, &graph), "cuStreamEndCapture");
    check_cu(d.cuGraphInstantiateWithFlags(&exec, graph, 0), "cuGraphInstantiate");
    for (float s : {3.0f, 0.25f}) {
      gscale.upload(&s, sizeof s);
      out.fill(0xEE);
      check_cu(d.cuGraphLaunch(exec, stream), "cuGraphLaunch");
      check_cu(d.cuStreamSynchronize(stream), "sync");
      std::vector<float> got(64 * 256);
      out.download(got.data(), got.size() * 4);
      for (int64_t i = 0; i < 64 * 256; ++i)
        if (got[i] != float(t.value(i / 256, i % 256) * s)) {
          FAIL_CHECK("replay with scale " << s << ": first wrong element (" << i / 256 << ", " << i % 256 << ")");
          break;
        }
    }
    d.cuGraphExecDestroy(exec);
    d.cuGraphDestroy(graph);
    d.cuStreamDestroy(stream);
  }

  TEST_CASE("a kernel not yet loaded fails inside a capture, naming the kernel and the prewarm command") {
    std::mt19937 rng(std::random_device{}());
    const int64_t k = 16 * 997;  // a K no other test loads
    testutil::HostNvfp4 t(2, k, ScaleLayout::linear, rng);
    DeviceBuffer packed = to_device(t.packed), scales = to_device(t.scales), out(2 * k * 2);
    DequantizeArgs a;
    a.src = {packed.get(), 0, scales.get(), ScaleLayout::linear, {}};
    a.src_rows = 2;
    a.k = k;
    a.out = out.get();
    const Driver& d = driver();
    CUstream stream = nullptr;
    check_cu(d.cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING), "cuStreamCreate");
    const std::string error = capture_error(stream, [&](CUstream st) { dequantize(a, st); });  // the capture survives
    CHECK(error.find("nvfp4_dequantize_k15952_bf16_linear") != std::string::npos);
    CHECK(error.find("nvfp4-jit prewarm --shape 2,15952") != std::string::npos);
    dequantize(a, stream);  // and outside the capture the same call works
    CHECK(d.cuStreamSynchronize(stream) == CUDA_SUCCESS);
    d.cuStreamDestroy(stream);
  }

  TEST_CASE("a GEMM variant's capture error names a prewarm command that builds its kernels") {
    // FP16 A, FP32 output and bias, swizzled weight scales: none of it in a default prewarm, on a
    // shape no other test loads
    std::mt19937 rng(std::random_device{}());
    const int64_t m = 3, n = 320, k = 32 * 37;
    testutil::HostNvfp4 w(n, k, ScaleLayout::swizzled128x4, rng);
    DeviceBuffer w_packed = to_device(w.packed), w_scales = to_device(w.scales), a(m * k * 2), bias(n * 4), out(m * n * 4);
    a.fill(0);
    bias.fill(0);
    GemmArgs g;
    g.m = m, g.n = n, g.k = k, g.a = a.get(), g.a_dtype = DType::fp16;
    g.b = {w_packed.get(), 0, w_scales.get(), ScaleLayout::swizzled128x4, {1.0f, nullptr, false}};
    g.d = out.get(), g.d_dtype = DType::fp32, g.bias = bias.get(), g.bias_dtype = DType::fp32;
    const Driver& d = driver();
    CUstream stream = nullptr;
    check_cu(d.cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING), "cuStreamCreate");
    const std::string command = prewarm_named_command(stream, [&](CUstream st) { gemm(g, st); });
    CHECK(command.find("--a-dtype fp16 --d-dtype fp32 --bias fp32 --b-layout swizzled") != std::string::npos);
    d.cuStreamDestroy(stream);
  }

  TEST_CASE("an RMSNorm with an fp32 weight: its capture error names --norm-weight fp32, whose prewarm builds it") {
    const int64_t rows = 3, k = 16 * 61;  // a K no other test loads
    DeviceBuffer in(rows * k * 2), weight(k * 4), packed(rows * k / 2), scales(rows * k / 16);
    in.fill(0x3C);
    weight.fill(0);
    RmsNormQuantizeArgs a;
    a.in = in.get(), a.rows = rows, a.k = k, a.weight = weight.get(), a.weight_fp32 = true;
    a.out.data = packed.get(), a.out.scales = scales.get(), a.out.global_scale.value = 1.0f;
    const Driver& d = driver();
    CUstream stream = nullptr;
    check_cu(d.cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING), "cuStreamCreate");
    const std::string command = prewarm_named_command(stream, [&](CUstream st) { rmsnorm_quantize(a, st); });
    CHECK(command.find("--in-dtype bf16 --norm-weight fp32") != std::string::npos);
    d.cuStreamDestroy(stream);
  }

  TEST_CASE("W4A4 gemm without a workspace is captured (stream-ordered allocation) and replays with a new A scale") {
    std::mt19937 rng(std::random_device{}());
    const int64_t m = 70, n = 256, k = 512;  // past W4A4's one-launch rows: A decoded into the allocation
    testutil::HostNvfp4 a(m, k, ScaleLayout::swizzled128x4, rng), w(n, k, ScaleLayout::linear, rng);
    DeviceBuffer a_packed = to_device(a.packed), a_scales = to_device(a.scales), w_packed = to_device(w.packed),
                 w_scales = to_device(w.scales), ga = to_device(std::vector<float>{1.0f}), eager(m * n * 4),
                 replayed(m * n * 4);
    GemmArgs g;
    g.m = m, g.n = n, g.k = k, g.a_dtype = DType::nvfp4, g.d_dtype = DType::fp32;
    g.a_fp4 = {a_packed.get(), 0, a_scales.get(), ScaleLayout::swizzled128x4, {1.0f, ga.as<float>(), false}};
    g.b = {w_packed.get(), 0, w_scales.get(), ScaleLayout::linear, {1.0f / 64, nullptr, false}};
    g.d = eager.get();
    const Driver& d = driver();
    CUstream stream = nullptr;
    check_cu(d.cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING), "cuStreamCreate");
    gemm(g, stream);  // eager, with A's scale 1: loads both kernels
    check_cu(d.cuStreamSynchronize(stream), "sync");

    g.d = replayed.get();
    CUgraph graph = nullptr;
    CUgraphExec exec = nullptr;
    check_cu(d.cuStreamBeginCapture(stream, CU_STREAM_CAPTURE_MODE_GLOBAL), "cuStreamBeginCapture");
    gemm(g, stream);
    check_cu(d.cuStreamEndCapture(stream, &graph), "cuStreamEndCapture");
    check_cu(d.cuGraphInstantiateWithFlags(&exec, graph, 0), "cuGraphInstantiate");
    const float two = 2.0f;
    ga.upload(&two, sizeof two);
    for (int replay = 0; replay < 2; ++replay) {
      replayed.fill(0xEE);
      check_cu(d.cuGraphLaunch(exec, stream), "cuGraphLaunch");
      check_cu(d.cuStreamSynchronize(stream), "sync");
      std::vector<float> want(m * n), got(m * n);
      eager.download(want.data(), want.size() * 4);
      replayed.download(got.data(), got.size() * 4);
      for (int64_t i = 0; i < m * n; ++i)
        if (got[i] != 2.0f * want[i]) {  // a power-of-two scale: exactly twice the eager result
          FAIL_CHECK("replay " << replay << ": m=5 n=256 k=512, first wrong element (" << i / n << ", " << i % n << "): "
                               << got[i] << " != 2 * " << want[i]);
          break;
        }
    }
    d.cuGraphExecDestroy(exec);
    d.cuGraphDestroy(graph);
    d.cuStreamDestroy(stream);
  }

  TEST_CASE("TMA descriptors encode through the driver") {
    DeviceBuffer buf(1024 * 1024);
    TensorMapCache cache;
    const CUtensorMap map = cache.get(tensor_map_2d(buf.get(), CU_TENSOR_MAP_DATA_TYPE_UINT8, 1024, 1024, 1024, 64, 128,
                                                    CU_TENSOR_MAP_SWIZZLE_128B));
    const CUtensorMap empty{};
    CHECK(std::memcmp(&map, &empty, sizeof map) != 0);
    CHECK_THROWS_AS(cache.get(tensor_map_2d(buf.get(), CU_TENSOR_MAP_DATA_TYPE_UINT8, 1024, 1024, 1000, 64, 128,
                                            CU_TENSOR_MAP_SWIZZLE_128B)),
                    Error);  // stride not a multiple of 16
    CHECK(cache.size() == 1);
  }
}
