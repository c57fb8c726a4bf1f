// A GEMM call as the front sees it: its arguments validated once (errors name the argument),
// the strides and scale modes they resolve to, and the problem they compile in.
#pragma once
#include <cstdint>

#include "ops/gemm/gemm_spec.hpp"
#include "nvfp4/jit.hpp"

namespace nvfp4::jit::detail {

// W4A8 calls of at most this many rows run the exact mode: up to there the GEMM is bound by the
// weight's bytes and its decode, and FP8's rate gains nothing against the activation pass and
// the heavier E4M3 fold (H200: M = 1 and 16 at 0.63-0.68x of the exact mode, 128 at 0.87-0.93x,
// 256 at 0.92x on two of three shapes; from M = 1024 on, 1.22-1.40x).
constexpr int64_t kW4A8ExactRows = 256;
// The same for a grouped call, by its rows per expert (expected_m, the bucket its tile is chosen
// for). With few rows an expert every expert's weight is read and decoded for them, and the
// heavier E4M3 fold and the activation pass cost more than FP8's rate gains (H200, bench grouped:
// 0.72-0.74x at 128 tokens, 0.80-0.83x at 512 on DeepSeek-V3's, Qwen3-30B-A3B's and gpt-oss-120b's
// experts, expected_m 16-64; at 4096 tokens 0.99-1.08x at expected_m 157, 0.89x on Qwen3's small
// experts at 296).
constexpr int64_t kW4A8GroupedExactRows = 128;
// A grouped call on experts of fewer weight rows (n) runs the exact mode at any rows per expert:
// on Qwen3-30B-A3B's gate_up experts (1536 x 2048) W4A8 ran at 0.87-0.91x from 296 to 1104 rows
// an expert, where experts of 4096 to 7168 rows (DeepSeek-V3's gate_up and down,
// gpt-oss-120b's) gained 1.01-1.19x from 296 on (H200, bench grouped, 4096-16384 tokens). 4096:
// the least n measured to gain.
constexpr int64_t kW4A8GroupedLeastN = 4096;
// Whether a W4A8 call of n weight rows (per expert) whose tile is chosen for `tile_rows` (M, or a
// grouped call's expected_m) runs the exact mode. Rows gathered through row_index count as sorted
// ones: W4A8's activation pass gathers them as it reads them, and the exact mode copies them
// first (gathers_rows_first).
inline bool w4a8_runs_exact(bool grouped, int64_t tile_rows, int64_t n) {
  if (!grouped) return tile_rows <= kW4A8ExactRows;
  return tile_rows <= kW4A8GroupedExactRows || n < kW4A8GroupedLeastN;
}

// Dense W4A4 calls of at most kW4A4OneLaunchRows rows and K of at most kW4A4OneLaunchK run in one
// launch on a backend whose GEMM decodes NVFP4 activations as it loads them
// (GemmBackend::decodes_fp4_activations): its producers decode the few rows of each stage, and the
// separate decode's launch and A's round trip through the workspace are gone. Every CTA along N
// decodes its rows of A again, on the producers' path to each stage, so the decode's cost grows
// with the rows and with K while the launch it saves is fixed: past these bounds, and in grouped
// calls (whose experts' tiles each decode their rows), two launches are faster (docs/perf-log.md,
// "W4A4 in one launch: where it pays"). The others decode A first and run the BF16 GEMM on it.
constexpr int64_t kW4A4OneLaunchRows = 4;
constexpr int64_t kW4A4OneLaunchK = 8192;
// Whether a W4A4 call (`grouped`, or dense of `m` rows) runs in one launch on such a backend.
inline bool w4a4_runs_one_launch(bool grouped, int64_t m, int64_t k) {
  return !grouped && m <= kW4A4OneLaunchRows && k <= kW4A4OneLaunchK;
}

struct GemmCall {
  GemmArgs args;  // W4A4's GEMM: a is the decoded BF16 A, a_dtype bf16
  int64_t rows = 0;  // of A and D: m, or groups * m (masked, batched)
  // grouped layouts (groups > 0)
  int32_t groups = 0;
  GroupedLayout layout = GroupedLayout::contiguous;
  const int32_t* group_ends = nullptr;
  const int32_t* masked_m = nullptr;
  const int32_t* row_index = nullptr;  // contiguous: A's rows gathered (W4A4: when A is decoded)
  int64_t a_rows = 0;                  // rows of A with row_index
  int64_t a_group_stride = 0, d_group_stride = 0;  // batched: elements from one group's rows to the next's
  int64_t expected_m = 0;  // rows per group the tile is chosen for
  // GemmEpilogue::moe_combine: its arguments, out_row_stride and counters resolved (counters null
  // until gemm.cpp allocates them for a call that passed none)
  MoeCombineEpilogue combine;
  int64_t a_stride = 0, b_stride = 0, d_stride = 0;  // d_stride: elements (NVFP4 D: bytes)
  int d_gscale_mode = 0;  // NVFP4 D's: GlobalScaleCode of d_fp4.global_scale
  int64_t residual_stride = 0;  // GemmArgs::residual's row stride, its default resolved
  int b_gscale_mode = 0;  // GlobalScaleCode of b.global_scale
  int a_gscale_mode = 0;  // of a_scale
  GlobalScale a_scale;    // A's global scale, applied in the epilogue (W4A4); else 1
  // gemm_problem of the call with the arch left at KernelSpec's default: the warm table's key
  // with the context's id, which fixes the arch (gemm_problem_on sets it)
  GemmSpec problem;
};

// The epilogue's parameters, named alike in every arch's kernel parameters: the weight's and
// A's global scales, alpha, bias, D (NVFP4 D: its packed values, scales and global scale) and
// the MoE combine's arguments.
template <class KernelParams>
void bind_epilogue(KernelParams& p, const GemmCall& call) {
  const GemmArgs& args = call.args;
  p.w_gscale_ptr = args.b.global_scale.device_ptr;
  p.w_gscale_value = args.b.global_scale.value;
  p.w_gscale_mode = call.b_gscale_mode;
  p.alpha = args.alpha;
  p.a_gscale_ptr = call.a_scale.device_ptr;
  p.a_gscale_value = call.a_scale.value;
  p.a_gscale_mode = call.a_gscale_mode;
  p.bias = args.bias;
  p.d = args.d;
  p.d_stride = call.d_stride;
  if (args.d_dtype == DType::nvfp4) {
    const QuantizedOutput& o = args.d_fp4;
    p.d = o.data;
    p.d_fp4 = {static_cast<unsigned char*>(o.scales), int(o.scale_layout), o.global_scale.device_ptr, o.global_scale.value,
               call.d_gscale_mode};
  }
  const MoeCombineEpilogue& c = call.combine;
  p.combine = {c.positions, c.row_token, c.weights,  c.out, static_cast<int*>(c.counters), c.out_row_stride,
               c.tokens,    c.topk,      call.rows, int(c.weights_dtype), int(c.out_dtype)};
}

// Validates `args` as `who` (the public entry point's name) and resolves defaults. Throws
// Error(invalid_argument) naming the argument. `pointers` false: all but the buffers (a size
// helper's check, made before they exist).
GemmCall gemm_call(const GemmArgs& args, const char* who, bool pointers = true);
GemmCall grouped_gemm_call(const GroupedGemmArgs& args, const char* who, bool pointers = true);
// A contiguous grouped call's expected_m where the caller gives none, from its m rows (an upper
// bound of all groups') in `groups` groups: 1.25 m / groups, from 16 to 128 rows rounded up to a
// power of two; past 128, mean + 2.5 sqrt(mean) (a random routing's spread).
int64_t grouped_default_expected_m(int64_t m, int32_t groups);
// The M a call's tile is chosen for: m, or a grouped call's rows per group.
inline int64_t gemm_tile_rows(const GemmCall& call) { return call.groups ? call.expected_m : call.args.m; }
// The workspace bytes a validated call uses (in the mode it runs): W4A8's E4M3 rows and row
// scales (fp8_activations_op.hpp), W4A4's decoded A or W4A16's gathered rows (rows * k * 2),
// else 0.
int64_t gemm_call_workspace_bytes(const GemmCall& call);
// w4a4_runs_one_launch for a validated call (W4A4 or not).
inline bool w4a4_runs_one_launch(const GemmCall& call) {
  return w4a4_runs_one_launch(call.groups > 0, call.args.m, call.args.k);
}
// Whether a validated call copies the rows it reads through row_index into the workspace in
// sorted order first (gather_rows_op.hpp), its GEMM then reading them as sorted rows: W4A16 in
// the exact mode (W4A8's activation pass gathers as it reads, W4A4's decode on sm_90a too).
// The GEMM's producers gathering 16-byte pieces themselves took 1.1-1.2x the sorted rows' time at
// 16-128 tokens and 2.6-2.8x at 4096, where the copy's launch and bytes cost 1-5% (H200,
// docs/perf-log.md); at one token the two are within 2% either way.
inline bool gathers_rows_first(const GemmCall& call) {
  return call.row_index && call.args.a_dtype != DType::nvfp4 && call.args.precision == GemmPrecision::exact;
}
// How many groups a contiguous grouped call's rows can reach (at most one a row: a token's few
// experts), which sizes a decode tile; 0 (all) for other calls.
int64_t gemm_groups_reached(const GemmCall& call);

// W4A4's GEMM: the call on A decoded to BF16 (without its global scale, which the call's
// epilogue applies) at `decoded_a`, row stride k.
GemmCall gemm_call_on_decoded_a(const GemmCall& call, const void* decoded_a);
// The call on its rows gathered in sorted order at `gathered_a` (row stride k): no row_index.
GemmCall gemm_call_on_gathered_a(const GemmCall& call, const void* gathered_a);
// W4A8's GEMM: the call on A as E4M3 at `workspace` (row stride k; a grouped call's rows as
// sorted, the pass gathered them) with its row scales after it (fp8_activations_op.hpp's
// layout), as A's per-row global scale (NVFP4 A's global scale folded in by the pass).
GemmCall gemm_call_on_fp8_a(const GemmCall& call, const void* workspace);
// The problem W4A8's GEMM kernel runs for a W4A8 call's `problem`: it reads A as E4M3 whatever A
// was, so NVFP4 A's is the BF16 one's (its tile and tuning too; the call's problem keeps NVFP4,
// which selects the activation pass).
GemmSpec gemm_fp8_problem(GemmSpec problem);

// What a GEMM kernel compiles in besides its tile (the tile fields zero): the key of the
// tuning table and of the front's warm dispatch. `a` is the kernel's activation type (BF16 or
// FP16); `bias` kNoDType or the bias DType.
GemmSpec gemm_problem(Arch arch, int64_t n, int64_t k, DType a, DType d, ScaleLayout b_layout, bool b_prepacked,
                        uint8_t bias);
GemmSpec gemm_problem(Arch arch, const GemmCall& call);
// `spec` with the residual added in the epilogue (kFlagResidual) where `residual`.
GemmSpec with_residual(GemmSpec spec, bool residual);
// `spec` with RMSNorm of A (kFlagARmsNorm, or kFlagARmsNormFp32 for an fp32 weight) where `rmsnorm`.
GemmSpec with_a_rmsnorm(GemmSpec spec, bool rmsnorm, bool weight_fp32);
// `spec` with `epilogue` (kFlagEpilogueSwiglu, kFlagEpilogueMoeCombine).
GemmSpec with_epilogue(GemmSpec spec, GemmEpilogue epilogue);
// MoeCombineEpilogue::counters' bytes for a validated call (0 without the epilogue): a counter
// per token and 64 columns (a tile's columns are a multiple of 64).
int64_t moe_combine_counter_bytes(const GemmCall& call);
// call.problem on `arch`.
GemmSpec gemm_problem_on(Arch arch, const GemmCall& call);
GemmSpec gemm_problem(Arch arch, const GemmProblem& problem);
// `problem` on NVFP4 activations whose scales are in `a_layout`, for a backend that takes them
// as they are (GemmBackend::native_fp4_activations).
GemmSpec gemm_fp4_problem(GemmSpec problem, ScaleLayout a_layout);
// An NVFP4-activation problem as the BF16 GEMM on A decoded first runs it (gemm_fp4_problem undone).
GemmSpec gemm_decoded_a_problem(GemmSpec problem);
bool gemm_problem_prepacked(const GemmSpec& problem);
// `problem` in `precision` (GemmPrecision::w4a8 sets kFlagW4A8, exact clears it), and whether a
// problem is W4A8's.
GemmSpec gemm_with_precision(GemmSpec problem, GemmPrecision precision);
bool gemm_problem_w4a8(const GemmSpec& problem);
// nvfp4k::GroupedLayoutCode of a problem (GROUPED_NONE for a dense one).
int gemm_problem_grouped(const GemmSpec& problem);
// Its groups, 0 for a dense problem (the backends' tile heuristics take them so).
int gemm_problem_groups(const GemmSpec& problem);
// The problem with `tile`: a kernel spec.
GemmSpec gemm_spec(const GemmSpec& problem, const GemmTile& tile);

}  // namespace nvfp4::jit::detail
