#include "ops/gemm/dispatch.hpp"

#include <cstring>
#include <optional>
#include <cstdlib>
#include <string>
#include <unordered_map>

#define XXH_INLINE_ALL
#include <xxhash.h>

#include "core/driver.hpp"
#include "core/error.hpp"
#include "ops/dequantize_op.hpp"
#include "ops/gemm/fp8_activations_op.hpp"
#include "ops/gemm/m_buckets.hpp"
#include "ops/gemm/tile_choice.hpp"
#include "ops/gemm/tune.hpp"

namespace nvfp4::jit::detail {

namespace {

struct Key {
  uint64_t context_id;
  GemmSpec problem;
  int64_t m, tile_rows;
  int64_t gathers_first;  // (a flag, 64 bits wide: no padding)
  bool operator==(const Key& o) const { return std::memcmp(this, &o, sizeof o) == 0; }
};
static_assert(std::has_unique_object_representations_v<Key>, "Key must have no padding");
struct KeyHash {
  size_t operator()(const Key& k) const noexcept { return size_t(XXH3_64bits(&k, sizeof k)); }
};

// A serving loop repeats its layers' shapes and a bounded set of M; a thread that sees more
// than this many starts over rather than grow without bound.
constexpr size_t kMaxEntries = 4096;

bool capturing(CUstream stream) {
  CUstreamCaptureStatus status = CU_STREAM_CAPTURE_STATUS_NONE;
  const CUresult r = driver().cuStreamIsCapturing(stream, &status);
  return r != CUDA_SUCCESS || status != CU_STREAM_CAPTURE_STATUS_NONE;
}

bool autotune_enabled() {
  static const bool on = [] {
    const char* v = std::getenv("NVFP4_JIT_AUTOTUNE");
    return v && std::string(v) == "1";
  }();
  return on;
}

GemmKernel choose_and_load(const DeviceInfo& device, const GemmBackend& backend, const GemmSpec& problem,
                           const GemmCall& call, CUstream stream) {
  if (std::string why = backend.unsupported(problem); !why.empty())
    fail(Status::unsupported, "nvfp4::jit::gemm: {} on {}", why, to_string(device.arch));
  const int64_t m = gemm_tile_rows(call);
  const int bucket = gemm_m_bucket(m);
  std::optional<GemmTile> tuned = gemm_tuned_tile(device, problem, bucket);
  // (NVFP4 activations that a backend takes as they are have no tuner yet: its heuristic runs.
  // A grouped problem is not tuned on first use: its scratch holds every expert's weight; `tune`
  // it ahead, per expected_m bucket.)
  if (!tuned && autotune_enabled() && !capturing(stream) && !load_only() &&
      problem.a_dtype != uint8_t(DType::nvfp4) && !call.groups) {
    tune_gemm(device, problem, {bucket}, 10);
    tuned = gemm_tuned_tile(device, problem, bucket);
  }
  const GemmTile tile =
      gemm_tile_choice(backend, problem, tuned ? &*tuned : nullptr, m, device.sm_count, &call);
  return load_gemm_kernel(device, backend, gemm_spec(problem, tile), call.args.m, stream, call);
}

// The warm entry of a call met for the first time: its kernel, or W4A4's that decodes A first
// (GemmBackend::runs_fp4_activations false): the BF16 kernel of the call on decoded A; W4A8's and
// the row gather's with their passes.
GemmKernel first_call(const DeviceInfo& device, const GemmCall& call, CUstream stream) {
  const GemmBackend& backend = gemm_backend(device.arch, "nvfp4::jit::gemm");
  const GemmSpec problem = gemm_problem_on(device.arch, call);
  if (call.args.precision == GemmPrecision::w4a8)
    return with_activation_pass(choose_and_load(device, backend, gemm_fp8_problem(problem), call, stream), device, call, stream);
  if (call.args.a_dtype != DType::nvfp4 || backend.runs_fp4_activations(call))  // (with the row gather where it runs first)
    return with_activation_pass(choose_and_load(device, backend, problem, call, stream), device, call, stream);
  const GemmCall inner = gemm_call_on_decoded_a(call, nullptr);
  GemmKernel kernel = choose_and_load(device, backend, gemm_problem_on(device.arch, inner), inner, stream);
  // the decode's kernel loaded too before either is enqueued, so a capture error leaves the stream untouched
  kernel_for(device, dequantize_spec(device.arch, call.args.k, DType::bf16, call.args.a_fp4.scale_layout), stream,
             [&] { return gemm_prewarm_hint(call, device); });
  kernel.decodes_a = true;
  return kernel;
}

}  // namespace

const GemmKernel& gemm_dispatch(const DeviceInfo& device, const GemmCall& call, CUstream stream) {
  thread_local std::unordered_map<Key, GemmKernel, KeyHash> kernels;
  thread_local uint64_t generation = 0;
  if (const uint64_t now = gemm_tuning_generation.load(std::memory_order_relaxed); now != generation) {
    kernels.clear();
    generation = now;
  }
  const Key key{device.context_id, call.problem, call.args.m, gemm_tile_rows(call), gathers_rows_first(call)};
  if (auto it = kernels.find(key); it != kernels.end()) return it->second;
  GemmKernel kernel = first_call(device, call, stream);
  if (kernels.size() >= kMaxEntries) kernels.clear();
  return kernels.emplace(key, kernel).first->second;
}

}  // namespace nvfp4::jit::detail
