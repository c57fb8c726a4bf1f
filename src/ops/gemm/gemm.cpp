// The public GEMM entry points: validate once, find the warm kernel, launch. W4A4 on a backend
// without an FP4 MMA decodes A first.
#include "ops/gemm/gemm.hpp"

#include "common/params.cuh"
#include "core/driver.hpp"
#include "core/error.hpp"
#include "core/stream_buffer.hpp"
#include "ops/gemm/call.hpp"
#include "ops/gemm/dispatch.hpp"
#include "ops/gemm/fp8_activations_op.hpp"
#include "ops/gemm/gather_rows_op.hpp"
#include "ops/validate.hpp"

namespace nvfp4::jit::detail {

namespace {

constexpr const char* kWho = "nvfp4::jit::gemm";
constexpr const char* kGroupedWho = "nvfp4::jit::grouped_gemm";

// The workspace a pass writes before the GEMM: `given`, else `bytes` allocated in stream order
// into `owned` (none in load-only mode, which enqueues nothing).
void* pass_workspace(void* given, int64_t bytes, StreamBuffer& owned, CUstream stream, const char* what) {
  if (!given && !load_only()) owned = StreamBuffer(size_t(bytes), stream, what);
  return given ? given : owned.get();
}

// W4A4 in two launches (a backend whose GEMM neither takes nor decodes NVFP4 activations, or a
// call w4a4_runs_one_launch leaves to two): A decoded exactly to BF16 without its global scale
// (e2m1 x e4m3 has at most 6 significant bits and lies in [2^-10, 2688]), then `kernel`, the
// BF16 GEMM, with A's global scale in the epilogue. (gemm_dispatch loaded both kernels before
// anything is enqueued, so a capture error leaves the stream untouched.)
void gemm_w4a4(const GemmCall& call, const GemmKernel& kernel, CUstream stream) {
  const GemmArgs& args = call.args;
  const int64_t rows = call.rows;
  // (a workspace sized for a one-launch call, which needs none, is not used: see gemm_workspace_bytes)
  StreamBuffer owned;
  const GemmCall inner = gemm_call_on_decoded_a(
      call, pass_workspace(w4a4_runs_one_launch(call) ? nullptr : args.workspace, rows * args.k * 2, owned, stream, "W4A4 workspace"));
  DequantizeArgs decode;
  decode.src = args.a_fp4;
  decode.src.global_scale = GlobalScale{};  // 1: applied in the GEMM's epilogue instead
  decode.src_rows = call.row_index ? call.a_rows : rows;
  decode.row_indices = call.row_index;  // grouped: A's rows gathered from the unsorted tokens
  decode.rows = rows;
  decode.k = args.k;
  decode.out = const_cast<void*>(inner.args.a);
  decode.out_dtype = DType::bf16;
  dequantize(decode, stream);
  launch_gemm(kernel, inner, stream);
  owned.free();
}

// W4A8: A rounded to E4M3 per row into the workspace (its row scales after it; a grouped call's
// rows gathered or skipped there), then `kernel`, the FP8 GEMM, on that A with the row scales as
// its per-row global scale. (gemm_dispatch loaded both kernels, kernel.activations the pass's,
// before anything is enqueued.)
void gemm_w4a8(const GemmCall& call, const GemmKernel& kernel, CUstream stream) {
  const GemmArgs& args = call.args;
  StreamBuffer owned;
  auto* workspace = static_cast<unsigned char*>(
      pass_workspace(args.workspace, fp8_activation_bytes(call.rows, args.k), owned, stream, "W4A8 workspace"));
  Fp8ActivationRows rows;
  rows.rows = call.rows;
  rows.row_index = call.row_index, rows.a_rows = call.a_rows;
  if (call.groups && call.layout == GroupedLayout::masked) rows.group_rows = call.masked_m, rows.group_stride = args.m;
  if (call.groups && call.layout == GroupedLayout::contiguous) rows.group_ends = call.group_ends, rows.groups = call.groups;
  if (args.a_dtype == DType::nvfp4)
    launch_fp8_activations(kernel.activations, args.a_fp4, call.a_gscale_mode, rows, args.k, workspace, stream);
  else
    launch_fp8_activations(kernel.activations, args.a, call.a_stride, rows, args.k, workspace, stream);
  launch_gemm(kernel, gemm_call_on_fp8_a(call, workspace), stream);
  owned.free();
}

// W4A16 on rows gathered through row_index (gathers_rows_first): A's rows copied into the
// workspace in sorted order, then `kernel` on them as sorted rows.
void gemm_gathered(const GemmCall& call, const GemmKernel& kernel, CUstream stream) {
  const GemmArgs& args = call.args;
  StreamBuffer owned;
  void* rows = pass_workspace(args.workspace, call.rows * args.k * 2, owned, stream, "gathered rows");
  launch_gather_rows(kernel.activations, args.a, call.a_stride, call.a_rows, call.row_index, call.rows, rows, stream);
  launch_gemm(kernel, gemm_call_on_gathered_a(call, rows), stream);
  owned.free();
}

// `kernel` (loaded) on `call`: W4A4's decode first where the kernel runs on decoded A, W4A8's
// activation pass or the row gather first.
void enqueue_gemm(const GemmCall& call, const GemmKernel& kernel, CUstream stream) {
  if (kernel.decodes_a) return gemm_w4a4(call, kernel, stream);
  if (kernel.gathers_a) return gemm_gathered(call, kernel, stream);
  if (call.args.precision == GemmPrecision::w4a8) return gemm_w4a8(call, kernel, stream);
  launch_gemm(kernel, call, stream);
}

// enqueue_gemm, with the MoE combine's counters allocated and zeroed in stream order where the
// call passed none (its kernel leaves them zero; they are freed after it).
void enqueue_gemm_with_counters(const GemmCall& call, const GemmKernel& kernel, CUstream stream) {
  const int64_t bytes = moe_combine_counter_bytes(call);
  if (bytes == 0 || call.combine.counters || load_only()) return enqueue_gemm(call, kernel, stream);
  StreamBuffer counters(size_t(bytes), stream, "MoE combine counters");
  check_cu(driver().cuMemsetD32Async(reinterpret_cast<CUdeviceptr>(counters.get()), 0, size_t(bytes / 4), stream),
           "cuMemsetD32Async");
  GemmCall counted = call;
  counted.combine.counters = counters.get();
  enqueue_gemm(counted, kernel, stream);
  counters.free();
}

// A validated call (dense or grouped): its warm kernel, enqueued.
void run_gemm(const GemmCall& call, const char* who, CUstream stream) {
  if (call.args.m == 0) return;
  const CallDevice call_device(stream, call.args.d, who);
  enqueue_gemm_with_counters(call, gemm_dispatch(call_device.info, call, stream), stream);
}

// A validated call on a given tile.
void run_gemm_with_tile(const GemmCall& call, const GemmTile& tile, const char* who, CUstream stream) {
  if (call.args.m == 0) return;
  const CallDevice call_device(stream, call.args.d, who);
  const DeviceInfo& device = call_device.info;
  const GemmBackend& backend = gemm_backend(device.arch, who);
  const bool w4a8 = call.args.precision == GemmPrecision::w4a8;  // (its GEMM reads E4M3 whatever A was)
  if (call.args.a_dtype == DType::nvfp4 && !w4a8 && !backend.runs_fp4_activations(call))  // the BF16 kernel on decoded A
    Check(who).fail("a_dtype",
                    fmt::format("a_dtype = nvfp4: a given tile runs BF16 or FP16 activations only on {} (W4A4 past {} rows "
                                "a tile or K = {} decodes A first and runs gemm's own tile)",
                                to_string(device.arch), kW4A4OneLaunchRows, kW4A4OneLaunchK),
                    Status::unsupported);
  const GemmSpec problem = gemm_problem_on(device.arch, call);
  const GemmSpec spec = gemm_spec(w4a8 ? gemm_fp8_problem(problem) : problem, tile);
  if (std::string why = backend.unsupported(spec); !why.empty()) fail(Status::unsupported, "{}: {}", who, why);
  if (std::string why = backend.tile_problem(spec); !why.empty())
    fail(Status::unsupported, "{}: tile {}: {}", who, backend.describe(tile), why);
  const GemmKernel kernel = load_gemm_kernel(device, backend, spec, call.args.m, stream, call);
  enqueue_gemm_with_counters(call, with_activation_pass(kernel, device, call, stream), stream);
}

}  // namespace

void gemm_with_tile(const GemmArgs& args, const GemmTile& tile, CUstream stream) {
  run_gemm_with_tile(gemm_call(args, kWho), tile, kWho, stream);
}

void grouped_gemm_with_tile(const GroupedGemmArgs& args, const GemmTile& tile, CUstream stream) {
  run_gemm_with_tile(grouped_gemm_call(args, kGroupedWho), tile, kGroupedWho, stream);
}

}  // namespace nvfp4::jit::detail

namespace nvfp4::jit {

// The size helpers check every argument the call does but the buffers: a size from arguments the
// call would refuse is no size.
int64_t gemm_workspace_bytes(const GemmArgs& args) {
  return detail::gemm_call_workspace_bytes(detail::gemm_call(args, "nvfp4::jit::gemm_workspace_bytes", /*pointers=*/false));
}

void gemm(const GemmArgs& args, CUstream stream) { detail::run_gemm(detail::gemm_call(args, detail::kWho), detail::kWho, stream); }

void grouped_gemm(const GroupedGemmArgs& args, CUstream stream) {
  detail::run_gemm(detail::grouped_gemm_call(args, detail::kGroupedWho), detail::kGroupedWho, stream);
}

int64_t grouped_gemm_workspace_bytes(const GroupedGemmArgs& args) {
  return detail::gemm_call_workspace_bytes(
      detail::grouped_gemm_call(args, "nvfp4::jit::grouped_gemm_workspace_bytes", /*pointers=*/false));
}

int64_t moe_combine_counter_bytes(const GroupedGemmArgs& args) {
  return detail::moe_combine_counter_bytes(
      detail::grouped_gemm_call(args, "nvfp4::jit::moe_combine_counter_bytes", /*pointers=*/false));
}

}  // namespace nvfp4::jit
