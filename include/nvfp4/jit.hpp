// nvfp4-jit C++ API: NVFP4 kernels generated, compiled and cached at run time.
//
// Calls take device pointers, shapes and strides, validate them, and launch on the
// caller's stream. The first call for a new shape compiles (or loads from the disk cache);
// later calls are a table lookup plus a launch. Errors throw nvfp4::jit::Error, whose
// message names the bad argument. Rows and strides whose tensor would span more than 2^63
// bytes (an offset the kernels could not form) are refused so, naming both.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "nvfp4/jit.h"

// The library is built with hidden visibility; what this header declares is its API.
#if defined(__GNUC__)
#pragma GCC visibility push(default)
#endif

namespace nvfp4::jit {

enum class Status : int {
  ok = NVFP4_OK,
  invalid_argument = NVFP4_INVALID_ARGUMENT,
  unsupported = NVFP4_UNSUPPORTED,
  compile_failed = NVFP4_COMPILE_FAILED,
  cuda_error = NVFP4_CUDA_ERROR,
  not_loaded_in_capture = NVFP4_NOT_LOADED_IN_CAPTURE,
  cache_error = NVFP4_CACHE_ERROR,
  internal = NVFP4_INTERNAL,
  no_device = NVFP4_NO_DEVICE,
};

class Error : public std::runtime_error {
 public:
  Error(Status status, const std::string& message) : std::runtime_error(message), status_(status) {}
  Status status() const noexcept { return status_; }

 private:
  Status status_;
};

enum class DType : int { bf16 = NVFP4_DTYPE_BF16, fp16 = NVFP4_DTYPE_FP16, fp32 = NVFP4_DTYPE_FP32, nvfp4 = NVFP4_DTYPE_NVFP4 };
enum class ScaleLayout : int { linear = NVFP4_SCALES_LINEAR, swizzled128x4 = NVFP4_SCALES_SWIZZLED128X4 };

// fp32 global scale: a device pointer (one value, or one per row with per_row) when set,
// else the host value. A device pointer lets CUDA graphs change the scale between replays.
struct GlobalScale {
  float value = 1.0f;
  const float* device_ptr = nullptr;
  bool per_row = false;
};

// An NVFP4 matrix [rows, k]: packed E2M1 [rows, k/2] plus E4M3 scales, one per 16 along k.
struct Nvfp4Tensor {
  const void* data = nullptr;
  int64_t row_stride_bytes = 0;  // 0: k/2
  const void* scales = nullptr;
  ScaleLayout scale_layout = ScaleLayout::linear;
  GlobalScale global_scale{};
};

// out[r, :] = decode(src[row_indices ? row_indices[r] : r, :]).
// With row_indices, `rows` rows are gathered and an index outside [0, src_rows) yields a
// row of NaN; without, rows must be 0 or src_rows.
struct DequantizeArgs {
  Nvfp4Tensor src{};
  int64_t src_rows = 0;
  int64_t k = 0;
  void* out = nullptr;
  DType out_dtype = DType::bf16;
  int64_t out_row_stride = 0;  // elements; 0: k
  const int32_t* row_indices = nullptr;
  int64_t rows = 0;  // 0: src_rows
};

void dequantize(const DequantizeArgs& args, CUstream stream);

// How quantize gets the global scale the values are divided by.
enum class GlobalScaleMode : int {
  given = NVFP4_GSCALE_GIVEN,                            // args.global_scale
  compute_per_tensor = NVFP4_GSCALE_COMPUTE_PER_TENSOR,  // amax / (6 * 448) of the tensor
  compute_per_row = NVFP4_GSCALE_COMPUTE_PER_ROW,        // amax / (6 * 448) of each row
};

// in [rows, k] (BF16 / FP16 / FP32) -> NVFP4: packed [rows, k/2] + E4M3 scales.
// A computed global scale is written to global_scale_out (device, 1 or rows floats) on the
// stream, without a host synchronization. Blocks holding NaN or +-Inf get the NaN scale
// (they dequantize to NaN); swizzled scale padding is written as zeros.
struct QuantizeArgs {
  const void* in = nullptr;
  DType in_dtype = DType::bf16;
  int64_t in_row_stride = 0;  // elements; 0: k
  int64_t rows = 0;
  int64_t k = 0;
  void* out = nullptr;               // packed E2M1 [rows, k/2]
  int64_t out_row_stride_bytes = 0;  // 0: k/2
  void* scales = nullptr;            // scale_bytes(scale_layout, rows, k) bytes
  ScaleLayout scale_layout = ScaleLayout::linear;
  GlobalScaleMode scale_mode = GlobalScaleMode::given;
  GlobalScale global_scale{};         // scale_mode == given
  float* global_scale_out = nullptr;  // scale_mode == compute_*
};

void quantize(const QuantizeArgs& args, CUstream stream);

// Where a fused quantizer writes its NVFP4 result [rows, k]: as QuantizeArgs' outputs, with
// the global scale given or computed per row (a per-tensor amax would need the whole tensor
// before the first block is quantized, which one pass over the input cannot have).
struct QuantizedOutput {
  void* data = nullptr;              // packed E2M1 [rows, k/2], 8-byte aligned
  int64_t row_stride_bytes = 0;      // 0: k/2
  void* scales = nullptr;            // scale_bytes(scale_layout, rows, k) bytes
  ScaleLayout scale_layout = ScaleLayout::linear;
  GlobalScaleMode scale_mode = GlobalScaleMode::given;  // given or compute_per_row
  GlobalScale global_scale{};         // scale_mode == given
  float* global_scale_out = nullptr;  // compute_per_row: rows floats
};

// RMSNorm then quantize, in one pass over `in`:
//   inv_rms[r] = 1 / sqrt(sum_k x^2 / k + eps)   (fp32, correctly rounded steps)
//   y = RN(RN(x * inv_rms) * weight)              (RN: round to in_dtype, as frameworks do)
// and y is quantized exactly as quantize() would quantize a tensor holding y, so the result
// equals the unfused RMSNorm -> quantize. One CTA per row, k <= 65536 (32768 for FP32 input).
struct RmsNormQuantizeArgs {
  const void* in = nullptr;           // [rows, k], 16-byte aligned
  DType in_dtype = DType::bf16;       // BF16, FP16 or FP32
  int64_t in_row_stride = 0;          // elements; 0: k
  int64_t rows = 0, k = 0;            // k: a multiple of 16
  const void* weight = nullptr;       // [k], in_dtype (fp32 with weight_fp32)
  float eps = 1e-6f;
  QuantizedOutput out{};
  void* normed = nullptr;             // optional: y [rows, k] in in_dtype; may be `in` (same stride)
  int64_t normed_row_stride = 0;      // elements; 0: k
  float* inv_rms = nullptr;           // optional: [rows]
  bool weight_fp32 = false;           // weight in fp32: y = RN(fp32(RN(x * inv_rms) * weight))
};
void rmsnorm_quantize(const RmsNormQuantizeArgs& args, CUstream stream);

// The pre-block of manifold-constrained hyper-connections (mHC, DeepSeek-V4), RMSNorm and
// quantize, in one pass over X:
//   h[r, :] = RN(sum_i mix[r, i] * X[r, i, :])   (fp32 products and sums, i = 0, 1, ... in order)
// then exactly rmsnorm_quantize of h (same weight, eps and outputs), so the result equals the
// unfused sequence: the mix stored in in_dtype, then rmsnorm_quantize. One CTA per row; n_hc <= 4
// and n_hc * k * element size <= 128 KiB (k <= 16384 for four BF16 streams).
struct MhcRmsNormQuantizeArgs {
  const void* in = nullptr;           // X [rows, n_hc, k], 16-byte aligned
  DType in_dtype = DType::bf16;       // BF16, FP16 or FP32
  int64_t rows = 0, n_hc = 0, k = 0;  // n_hc: 1..4; k: a multiple of 16
  int64_t in_row_stride = 0;          // elements from row r to r + 1; 0: n_hc * in_hc_stride
  int64_t in_hc_stride = 0;           // elements from stream i to i + 1; 0: k
  const float* mix = nullptr;         // A [rows, n_hc], fp32, 4-byte aligned
  int64_t mix_row_stride = 0;         // floats; 0: n_hc
  const void* weight = nullptr;       // [k], in_dtype (fp32 with weight_fp32)
  bool weight_fp32 = false;
  float eps = 1e-6f;
  QuantizedOutput out{};
  void* h = nullptr;                  // optional: h [rows, k] in in_dtype
  int64_t h_row_stride = 0;           // elements; 0: k
  void* normed = nullptr;             // optional: the normalized rows [rows, k] in in_dtype
  int64_t normed_row_stride = 0;      // elements; 0: k
  float* inv_rms = nullptr;           // optional: [rows]
};
void mhc_rmsnorm_quantize(const MhcRmsNormQuantizeArgs& args, CUstream stream);

// SwiGLU then quantize (the input of an MoE or MLP down projection), in one pass:
//   h = RN(silu(gate) * up), silu(g) = g / (1 + e^-g) in fp32 (e^x within 2 ulp)
// Each input row holds 2k values: gate then up as two halves (interleave = 0), or groups of
// `interleave` gate values each followed by `interleave` up values (interleave divides 16,
// or is a multiple of 16; it divides k). Output [rows, k].
struct SwigluQuantizeArgs {
  const void* in = nullptr;           // [rows, 2k], 16-byte aligned
  DType in_dtype = DType::bf16;       // BF16, FP16 or FP32
  int64_t in_row_stride = 0;          // elements; 0: 2k
  int64_t rows = 0, k = 0;            // k: a multiple of 16, <= 65536 (32768 for FP32)
  int64_t interleave = 0;
  QuantizedOutput out{};
};
void swiglu_quantize(const SwigluQuantizeArgs& args, CUstream stream);

// The integer type of router top-k ids (DeepEP's convention is int64).
enum class IndexType : int { int32 = NVFP4_INDEX_INT32, int64 = NVFP4_INDEX_INT64 };

// MoE input staging in one launch: the tokens [rows, k] quantized (as quantize() does) and
// the router's top-k ids and weights [rows, topk] copied to the buffers the expert GEMMs
// read (e.g. a CUDA graph's static inputs). Ids are int32 or int64 on either side (aligned to
// their size); an int64 id that int32 cannot hold is written to an int32 output as -1.
struct MoeStageArgs {
  const void* tokens = nullptr;       // [rows, k], 16-byte aligned
  DType in_dtype = DType::bf16;
  int64_t in_row_stride = 0;          // elements; 0: k
  int64_t rows = 0, k = 0;
  QuantizedOutput out{};
  int64_t topk = 0;
  const void* topk_ids = nullptr;     // [rows, topk] of topk_ids_type
  const float* topk_weights = nullptr;  // [rows, topk] or null (then nothing is copied for them)
  void* topk_ids_out = nullptr;       // [rows, topk] of topk_ids_out_type
  float* topk_weights_out = nullptr;
  IndexType topk_ids_type = IndexType::int32;
  IndexType topk_ids_out_type = IndexType::int32;
};
void moe_stage(const MoeStageArgs& args, CUstream stream);

// E4M3 block scales of an NVFP4 matrix [rows, k] rewritten in another layout, e.g. a
// ModelOpt weight_scale (linear) into the swizzled128x4 layout GEMM libraries read.
// Padding of a swizzled destination is written as zeros.
struct ConvertScalesArgs {
  const void* src = nullptr;
  ScaleLayout src_layout = ScaleLayout::linear;
  void* dst = nullptr;  // scale_bytes(dst_layout, rows, k) bytes
  ScaleLayout dst_layout = ScaleLayout::swizzled128x4;
  int64_t rows = 0;
  int64_t k = 0;
};

void convert_scales(const ConvertScalesArgs& args, CUstream stream);

// D[m, n] = alpha * gA[m] * gB * sum_k A[m, k] * B[n, k] (+ bias[n]), rounded to d_dtype.
// Every product is the exact product of the decoded values (global scales aside),
// accumulated in fp32; the global scales gB (B's) and gA (W4A4: A's, per tensor or per row)
// and alpha are applied once to the sum. B is a ModelOpt NVFP4 weight as stored (packed
// [n, k/2], E4M3 scales in either layout, global scale on the host or the device).
// A is BF16 / FP16 (W4A16), or NVFP4 in a_fp4 (W4A4: decoded exactly to BF16 in a workspace,
// then the W4A16 kernel). M is a run-time size: kernels are compiled per (n, k, dtypes,
// layout, M bucket), and ragged M and N are handled in the kernel. Needs an sm_90a device.
//
// What the epilogue makes of the fp32 sums (after alpha, the global scales and the bias):
enum class GemmEpilogue : uint8_t {
  none = 0,
  // An MLP's or MoE's gate_up projection with SwiGLU fused in: b is the gate_up weight, n = 2 I
  // rows (I a multiple of 8): on sm_90a prepacked with PrepackArgs::swiglu_interleave set
  // (b_prepacked); on sm_100a / 103a / 120a / 121a as ModelOpt stores it (not prepacked), gate
  // rows [0, I) then up rows [I, 2I) (b_swiglu_interleave 0). D is [m, I] = silu(gate) * up:
  // column i from gate row i and up row i, each the fp32 sum with alpha, the global scales and
  // its bias applied (bias [2 I]: gate's I values, then up's, whatever the weight's stored
  // order); silu(g) = g / (1 + e^-g) in fp32 (the hardware's exp2 and divide: relative error
  // below 2^-19), then one rounding to d_dtype. d_row_stride defaults to I. Dense, contiguous
  // (row_index too) and masked grouped calls, W4A16 (sm_90a) and W4A4; not batched.
  swiglu = 1,
  // An MoE block's down projection with moe_combine fused in (every arch; grouped_gemm, contiguous
  // layout, on moe_route's rows): D is stored as always (the experts' outputs, rounded to
  // d_dtype), and each token's output row is then written by the tile that stores the token's
  // last row: GroupedGemmArgs::combine.out[t, :] = exactly what moe_combine computes from that D
  // (one fused multiply-add per slot in slot order, fp32, one rounding), the same bits on every
  // run and every order the tiles finish in. A token none of whose entries this rank holds
  // (all skipped: padding ids, other ranks' experts) keeps its output row untouched
  // (moe_combine writes zeros there). See MoeCombineEpilogue.
  moe_combine = 2,
};
// How gemm multiplies. exact: every product of the decoded values exact, fp32 accumulation
// (the default, every arch). w4a8 (sm_90a only; opt-in): Hopper has no FP4 MMA, so its exact
// mode runs BF16 tensor cores; w4a8 runs FP8 ones at up to twice the rate, on A rounded to
// E4M3 per row (scale amax / 448, a pass into the workspace) and weights folded to E4M3 (value
// x block scale x 2^-e[n], e[n] a power of two per weight row that keeps the row in E4M3's range,
// stored by prepack), each rounded once: about 2.5% relative Frobenius error on typical data, at
// most ~1/17 per element plus E4M3's subnormal floor (docs/formats.md, "W4A8"). It needs a
// prepacked weight (b_prepacked); A is BF16/FP16, or NVFP4 (a_fp4, W4A4 input: each value
// decoded exactly, then rounded to E4M3 as above, its global scale folded into the row scale);
// sm_100a/103a/120a/121a refuse it (their exact mode is their native FP4 MMA already). Calls of
// at most 256 rows (decode, small batches) run the exact mode: there the GEMM is bound by the
// weight and its decode, and FP8 gains nothing.
// grouped_gemm takes it in gemm.precision (contiguous, row_index too, and masked layouts; not
// batched); calls of at most 128 rows an expert (expected_m; 16 with row_index), and calls of
// sorted rows on experts of fewer than 4096 weight rows (n), run the exact mode. Its workspace
// then holds every group's rows (masked: groups * m).
enum class GemmPrecision : uint8_t { exact = 0, w4a8 = 1 };

struct GemmArgs {
  int64_t m = 0, n = 0, k = 0;       // k: a multiple of 32
  const void* a = nullptr;           // [m, k] BF16 or FP16, 16-byte aligned (null for W4A4)
  DType a_dtype = DType::bf16;       // BF16, FP16, or NVFP4 (W4A4: A in a_fp4)
  int64_t a_row_stride = 0;          // elements, a multiple of 8; 0: k
  Nvfp4Tensor b{};                   // weight [n, k]; data 16-byte aligned, scales 16-byte aligned
  void* d = nullptr;                 // [m, n]
  DType d_dtype = DType::bf16;       // BF16, FP16 or FP32; NVFP4 (epilogue swiglu): D in d_fp4
  int64_t d_row_stride = 0;          // elements; 0: n
  const void* bias = nullptr;        // [n] or null
  DType bias_dtype = DType::bf16;    // BF16 or FP32
  float alpha = 1.0f;
  // W4A4 only: A [m, k] as NVFP4 (data 4-byte aligned, row stride a multiple of 4 bytes);
  // its global scale may be per row (m values on the device).
  Nvfp4Tensor a_fp4{};
  // W4A4, W4A8 and grouped W4A16 through row_index only: gemm_workspace_bytes(args) /
  // grouped_gemm_workspace_bytes(args) bytes, 16-byte aligned. Null: allocated and freed on the
  // stream (cuMemAllocAsync / cuMemFreeAsync, which CUDA graphs capture).
  void* workspace = nullptr;
  int64_t workspace_bytes = 0;
  // b.data holds prepack()'s output (values and scales together; b.scales, b.scale_layout and
  // b.row_stride_bytes are unused, b.global_scale is used as always).
  bool b_prepacked = false;
  // b is no output of work still running on the stream (true for a served model's weights):
  // the kernel is launched as a programmatic dependent launch, so it may start while the
  // previous kernel finishes and stream the weights before it waits for that kernel's results
  // (where its grid is at most four waves of CTAs: longer ones gain nothing from it).
  // Leave false right after writing b on the stream (prepack, a weight update).
  bool weights_static = false;
  GemmEpilogue epilogue = GemmEpilogue::none;
  // Epilogue swiglu on a weight as stored (b_prepacked false): its rows' gate / up order. 0
  // (the default): gate rows [0, n/2), then up rows [n/2, n), ModelOpt's halves, the order
  // read; g > 0: groups of g gate rows, then g up rows (an interleaved checkpoint; g = 1
  // alternates them), g a power of two dividing n/2, read as stored on sm_100a / 103a / 120a /
  // 121a. On sm_90a prepack the weight with PrepackArgs::swiglu_interleave = g instead: a
  // prepacked weight records its own order (leave 0).
  int64_t b_swiglu_interleave = 0;
  // exact, or w4a8 (see GemmPrecision): its workspace holds A as E4M3 and the row scales.
  GemmPrecision precision = GemmPrecision::exact;
  // RMSNorm of A inside the GEMM (sm_90a, BF16/FP16 A, exact precision, dense gemm so far): with
  // a_rmsnorm_weight set, D = (A_normed) . W^T with A_normed[m, :] = A[m, :] * g / rms(A[m, :]),
  // rms = sqrt(mean over k of A^2 + a_rmsnorm_eps), so the un-normalized rows go in and no
  // separate norm kernel runs. g [k]: a_dtype (4-byte aligned), or fp32 with
  // a_rmsnorm_weight_fp32 (8-byte aligned). Numerics (not the norm-then-GEMM chain's bits): each
  // decoded weight value times g[k] is rounded to a_dtype (an fp32 g is rounded to a_dtype
  // first), A's rows enter as they are, and 1 / rms (fp32, correctly rounded steps as
  // rmsnorm_quantize's) multiplies each row of D in the epilogue; the chain instead rounds
  // A * (1 / rms) and then * g to a_dtype. Both lie within a_dtype's rounding of the exact
  // product. Each CTA reads its rows of A once more for their rms: made for decode (few rows).
  const void* a_rmsnorm_weight = nullptr;
  bool a_rmsnorm_weight_fp32 = false;
  float a_rmsnorm_eps = 1e-6f;
  // A residual added in the epilogue (sm_90a, BF16/FP16 A, exact precision, dense gemm, no fused
  // epilogue so far): D = RN(alpha * gw * (A . W^T) + bias + residual), the sum in fp32 and one
  // rounding to d_dtype. residual [m, n] in d_dtype (element-aligned), residual_row_stride
  // elements a row (0: n); it may be d itself (same stride): each element is read before it is
  // written, by the thread that writes it.
  const void* residual = nullptr;
  int64_t residual_row_stride = 0;
  // NVFP4 D (d_dtype nvfp4, with d null): epilogue swiglu's D [m, n/2] quantized as quantize()
  // quantizes a tensor holding silu(gate) * up's fp32 values (not rounded to BF16 first), the
  // input of a W4A4 down projection in one pass: packed E2M1 (data 4-byte aligned, row stride a
  // multiple of 4 bytes; 0: n/4) and E4M3 scales in either layout (n/2 a multiple of 16; 64 for
  // swizzled128x4, whose padding rows past m are not written). The global scale is given: one
  // (host or device), or one per row of D on the device (scale_mode given, no
  // global_scale_out; a computed one needs a whole row before its first block). Every arch
  // (sm_100a / sm_120a: W4A4 on the weight as stored).
  QuantizedOutput d_fp4{};
};
void gemm(const GemmArgs& args, CUstream stream);
// Bytes of workspace gemm needs for `args` (W4A8: m * k rounded up to 16, plus 4 * m, whatever
// A's dtype; W4A4 in the exact mode, a W4A8 call of NVFP4 A small enough for it too: m * k * 2,
// or 0 at m <= 4 and k <= 8192, which runs in one launch on every arch; otherwise 0). Checks every
// argument gemm checks but the buffers (which need not exist yet): throws Error naming the one
// gemm would refuse.
int64_t gemm_workspace_bytes(const GemmArgs& args);

// A grouped GEMM (mixture of experts): group g multiplies its rows of A by its own weight g.
enum class GroupedLayout : uint8_t {
  contiguous = 1,  // A [m, k] sorted by group, group g's rows [group_ends[g-1], group_ends[g])
  masked = 2,      // A [groups, m, k], group g's first masked_m[g] rows
  batched = 3,     // every row to every group: A [m, groups, k] and D [m, groups, n], strided
};
// GemmEpilogue::moe_combine's arguments: moe_route's outputs for the rows of D, the router
// weights and the output rows (as MoeCombineArgs's, with d = gemm.d and d_rows = gemm.m).
struct MoeCombineEpilogue {
  const int32_t* positions = nullptr;  // [tokens, topk]: moe_route's positions (-1: skipped)
  const int32_t* row_token = nullptr;  // [gemm.m]: moe_route's row_index (the token of sorted row r)
  const void* weights = nullptr;       // [tokens, topk] router weights
  DType weights_dtype = DType::fp32;   // FP32 or BF16
  int64_t tokens = 0, topk = 0;
  void* out = nullptr;                 // [tokens, gemm.n]
  DType out_dtype = DType::bf16;       // BF16, FP16 or FP32
  int64_t out_row_stride = 0;          // elements; 0: gemm.n
  // A counter per token and 64 columns: moe_combine_counter_bytes(args) bytes, 4-byte aligned,
  // ZERO before its first call (e.g. cuMemsetD32Async once, when allocated); every call leaves
  // it zero again, so CUDA graph replays need no memset. One call at a time per buffer (calls
  // in one stream's order may share it). Null: allocated, zeroed and freed in stream order for
  // the call (cuMemAllocAsync, cuMemsetD32Async: recordable in a CUDA graph).
  void* counters = nullptr;
  int64_t counters_bytes = 0;
};

struct GroupedGemmArgs {
  // As for gemm, except:
  // - m: contiguous: rows of A and D (at least group_ends[groups - 1]); masked: rows per group.
  // - a, d (and a_fp4 for W4A4): contiguous [m, k] / [m, n]; masked [groups, m, k] / [groups, m, n]
  //   (row strides as gemm's; a group's rows follow the previous group's).
  // - b: every group's weight, one after the other: data [groups, n, k/2] (row stride as gemm's),
  //   scales [groups] x what one weight's take (either layout), or prepacked: prepacked_bytes(n, k)
  //   per group. b.global_scale: one for all groups, or per group: device_ptr with per_row = true
  //   holds [groups] values (ModelOpt's per-expert weight_scale_2). bias [n] is every group's.
  // - W4A4: A's global scale per tensor, per row (of all groups' rows) or per group
  //   (a_global_scale_per_group).
  GemmArgs gemm{};
  int32_t groups = 0;
  GroupedLayout layout = GroupedLayout::contiguous;
  // On the device, read when the kernel runs (CUDA graphs may change them between replays).
  // An end below the previous one leaves its group empty; one past m counts as m. A count
  // outside [0, m] is clamped to it. No row outside A and D is ever read or written.
  const int32_t* group_ends = nullptr;  // contiguous: [groups] cumulative row ends
  const int32_t* masked_m = nullptr;    // masked: [groups] rows of each group
  int64_t expected_m = 0;               // rows per group the kernel is chosen for; 0: m (masked), contiguous: r = 1.25 m / groups,
                                        // from 6 to 128 rounded up to a power of two (at least 16), past 128 mean + 2.5 sqrt(mean)
  // W4A4: gemm.a_fp4.global_scale.device_ptr holds one scale per group ([groups] values, e.g.
  // ModelOpt's per-expert input_scale) instead of one, or one per row (then per_row is false).
  bool a_global_scale_per_group = false;
  // Contiguous: A's rows read through row_index (moe_route's), so the tokens need no sorted
  // copy: sorted row r is row row_index[r] of A [a_rows, k] (gemm.a, or gemm.a_fp4 for W4A4).
  // W4A16 copies them into the workspace in sorted order first (one launch more; the GEMM then
  // runs as on sorted rows). W4A4 on sm_90a gathers them in the pass that decodes A into the
  // workspace (sm_100a / sm_120a as they load them), W4A8 in the pass that rounds A to E4M3.
  // An index outside [0, a_rows) (moe_route's -1 past the routed rows) gives a NaN row of A.
  // W4A4's global scale of A then is one or per group (per row it would be the tokens', which
  // the sorted rows do not follow).
  const int32_t* row_index = nullptr;  // [m] on the device, or null
  int64_t a_rows = 0;                  // rows of A with row_index
  // Batched (the einsum "tgk,gnk->tgn", DeepSeek-V4's wo_a): gemm.m is the rows every group takes
  // (no group_ends or masked_m); row t of group g is at a + t * gemm.a_row_stride + g *
  // a_group_stride and D's likewise, in elements (multiples of 8 for A, for TMA). Defaults: the
  // groups side by side in each row, [m, groups, k] / [m, groups, n] (group strides k / n, row
  // strides groups * k / groups * n); [groups, m, k] is a_group_stride = m * a_row_stride.
  // W4A4: gemm.a_fp4 is [m * groups] rows (row t * groups + g), its global scale one, per group
  // or per row of those; the decoded A in the workspace is [m, groups, k].
  int64_t a_group_stride = 0;
  int64_t d_group_stride = 0;
  // gemm.epilogue moe_combine: the combine's arguments (contiguous layout).
  MoeCombineEpilogue combine{};
};
void grouped_gemm(const GroupedGemmArgs& args, CUstream stream);
// Bytes of workspace grouped_gemm needs for `args` (W4A4: all groups' rows * k * 2, whatever
// their number (sm_90a decodes A first; sm_100a / sm_120a read NVFP4 A and leave it unused);
// W4A8: all groups' rows * k rounded up to 16, plus 4 per row; W4A16 through row_index: m * k * 2
// (its rows in sorted order); otherwise 0).
// Checks its arguments as gemm_workspace_bytes does.
int64_t grouped_gemm_workspace_bytes(const GroupedGemmArgs& args);
// Bytes of MoeCombineEpilogue::counters grouped_gemm needs for `args` (gemm.epilogue
// moe_combine: combine.tokens * ceil(gemm.n / 64) * 4; otherwise 0). Checks its arguments as
// grouped_gemm_workspace_bytes does.
int64_t moe_combine_counter_bytes(const GroupedGemmArgs& args);

// Mixture-of-experts routing on the device: the router's top-k ids sorted into grouped_gemm's
// contiguous layout. No host synchronization, no allocation when a workspace is passed
// (CUDA-graph safe either way: the ids may change between replays), and deterministic: the same ids give the same outputs, whatever
// the timing. This rank holds experts [first_expert, first_expert + groups) (expert parallelism's
// share of one rank; every expert: first_expert = 0). An id outside them (another rank's expert, or a
// padding token's id such as -1) is skipped: it gets no row and counts nowhere.
// Rows are sorted by expert, and within an expert by token, then slot (stable). Outputs:
//   counts[g]      rows of expert first_expert + g (optional)
//   group_ends[g]  cumulative row ends: grouped_gemm's group_ends
//   row_index[r]   the token of sorted row r, for r < group_ends[groups - 1]; -1 for the rows
//                  after it (tokens * topk in all)
//   positions[t * topk + j]  the sorted row of entry (t, j), -1 where skipped: moe_combine's input (optional)
// One CTA up to 4096 entries (tokens * topk); beyond, a CTA per 2048 entries in two launches
// (counts per CTA into the workspace, then the placement). groups <= 512, tokens * topk < 2^31.
struct MoeRouteArgs {
  const void* topk_ids = nullptr;  // [tokens, topk] of topk_ids_type, 4/8-byte aligned
  IndexType topk_ids_type = IndexType::int32;
  int64_t tokens = 0, topk = 0;
  int32_t groups = 0;
  int64_t first_expert = 0;
  int32_t* counts = nullptr;       // [groups] or null
  int32_t* group_ends = nullptr;   // [groups]
  int32_t* row_index = nullptr;    // [tokens * topk]
  int32_t* positions = nullptr;    // [tokens * topk] or null
  // moe_route_workspace_bytes(args) bytes, 4-byte aligned, for the sort over several CTAs
  // (more than 4096 entries). Null: allocated and freed in stream order (cuMemAllocAsync;
  // recordable in a CUDA graph).
  void* workspace = nullptr;
  int64_t workspace_bytes = 0;
};
void moe_route(const MoeRouteArgs& args, CUstream stream);
// Bytes of workspace moe_route needs for `args` (0 up to 4096 entries).
int64_t moe_route_workspace_bytes(const MoeRouteArgs& args);

// The experts' outputs back to their tokens:
//   out[t, c] = sum over j = 0..topk-1 of weights[t, j] * d[positions[t * topk + j], c]
// in fp32, one fused multiply-add per term in the order of j, rounded once to out_dtype. A
// position outside [0, d_rows) (moe_route's -1 for a skipped entry) adds nothing (a token
// with none left gets 0), and d is never read outside its rows.
struct MoeCombineArgs {
  const void* d = nullptr;         // [d_rows, n] the grouped GEMM's output
  DType d_dtype = DType::bf16;     // BF16, FP16 or FP32
  int64_t d_row_stride = 0;        // elements; 0: n
  int64_t d_rows = 0;
  const int32_t* positions = nullptr;  // [tokens, topk] (moe_route's positions)
  const void* weights = nullptr;   // [tokens, topk] router weights
  DType weights_dtype = DType::fp32;  // FP32 or BF16
  int64_t tokens = 0, topk = 0, n = 0;
  void* out = nullptr;             // [tokens, n]
  DType out_dtype = DType::bf16;   // BF16, FP16 or FP32
  int64_t out_row_stride = 0;      // elements; 0: n
};
void moe_combine(const MoeCombineArgs& args, CUstream stream);

// What a GEMM kernel is specialized on, besides M: the tuner's unit of work. (On sm_90a W4A4
// runs the BF16 kernel, so a_dtype = nvfp4 tunes the same kernels as bf16; sm_120a's kernels
// read NVFP4 activations, in a_scale_layout.)
struct GemmProblem {
  int64_t n = 0, k = 0;
  DType a_dtype = DType::bf16, d_dtype = DType::bf16;
  ScaleLayout scale_layout = ScaleLayout::linear;
  bool has_bias = false;
  DType bias_dtype = DType::bf16;
  bool b_prepacked = false;
  ScaleLayout a_scale_layout = ScaleLayout::linear;  // W4A4's activation scales, as the quantizers write them by default
  // A grouped weight (grouped_gemm) of this many experts, contiguous or masked; 0: a dense one.
  // Its M buckets are rows per expert (GroupedGemmArgs::expected_m).
  int32_t groups = 0;
  GroupedLayout grouped_layout = GroupedLayout::contiguous;
  GemmEpilogue epilogue = GemmEpilogue::none;
  GemmPrecision precision = GemmPrecision::exact;  // w4a8: its kernels (a prepacked weight; dense, contiguous or masked)
  // GemmArgs::a_rmsnorm_weight's kernels (RMSNorm of A in the GEMM), its weight in a_dtype or
  // (a_rmsnorm_weight_fp32) fp32.
  bool a_rmsnorm = false, a_rmsnorm_weight_fp32 = false;
  bool residual = false;  // GemmArgs::residual's kernels (a residual added in the epilogue)
};

struct TuneOptions {
  int64_t m = 0;  // 0: every M bucket (a grouped problem's up to 512 rows per expert); else only M's
  int runs = 10;  // timed launches per candidate (median)
};

// One M bucket's result. Times are medians on this GPU with the weights rotated past L2.
struct TunedBucket {
  int64_t m_bucket = 0;         // the bucket's largest M (0: the bucket of every M above 2048)
  std::string heuristic, winner;  // tiles, e.g. "bm8 bk256 wg1 s4 ks2"
  double heuristic_us = 0, winner_us = 0;
  int candidates = 0;
};

// Times every candidate tile of `problem` per M bucket on the current device (sm_90a) on
// scratch buffers (no user data is read or written), keeps the fastest (the heuristic's
// unless another is at least 2% faster) and records it in the cache root's tuning table
// (v2/tuning/<arch>-<device>-<SMs>.json), where every later gemm() of this problem finds it.
// A grouped problem is timed at expected_m = options.m rows per expert (every bucket: each
// one's largest) on the most rows whose default expected_m is that (grouped_gemm), routed
// uniformly at random (4.8 rows an expert for options.m = 8, 13.6 for 16, 256 for 296); beyond
// 32768 rows in all, as many rows an expert on fewer experts. Tune it at the
// rows per expert it serves. The bucket of up to 8 rows per expert serves single
// tokens too: it is also timed on one row in each of 8 experts, and its times are the geometric
// mean of the two routings'. Every later grouped_gemm() whose expected_m falls in the bucket
// runs the winner.
// Compiles the candidates first (in parallel; cached ones load from disk). Not during a
// CUDA graph capture. With NVFP4_JIT_AUTOTUNE=1, gemm() tunes an untuned bucket on first use.
std::vector<TunedBucket> tune(const GemmProblem& problem, const TuneOptions& options = {});

// A ModelOpt NVFP4 linear layer as its checkpoint stores it. The scalars are device pointers
// (GlobalScale::device_ptr, so CUDA graphs see updates) or host values.
struct ModelOptLinear {
  int64_t n = 0, k = 0;                 // out_features, in_features (k: a multiple of 32)
  const void* weight = nullptr;         // uint8 [n, k/2], 16-byte aligned
  const void* weight_scale = nullptr;   // float8_e4m3fn [n, k/16], 16-byte aligned
  GlobalScale weight_scale_2{};         // fp32 scalar: the weight's global scale
  GlobalScale input_scale{};            // fp32 scalar: the activations' static global scale (W4A4)
};

// What gemm and the activation quantizers take for such a layer.
struct Nvfp4Linear {
  Nvfp4Tensor weight;       // GemmArgs::b
  GlobalScale input_scale;  // W4A4: the given global scale for quantize / rmsnorm_quantize / ...
  bool prepacked = false;   // GemmArgs::b_prepacked: weight.data holds prepack()'s output
};

// Checks a ModelOpt layer and describes it for gemm. ModelOpt's tensors are the library's
// formats already (value = e2m1 * weight_scale * weight_scale_2; activations divided by
// input_scale), so with `layout` linear nothing is copied. With swizzled128x4 the scales are
// rewritten into `swizzled_scales` (scale_bytes(swizzled128x4, n, k) bytes) on `stream`, a
// one-time step at load.
Nvfp4Linear from_modelopt(const ModelOptLinear& layer, ScaleLayout layout = ScaleLayout::linear,
                          void* swizzled_scales = nullptr, CUstream stream = nullptr);

// The loader's default: from_modelopt's checks, then the layout gemm reads fastest on the
// device `stream` runs on. On sm_90a the weight is prepacked (prepack(), below) into
// `prepacked`, prepacked_bytes(n, k) bytes, 16-byte aligned, on `stream` (the layout as
// stored costs 1.3-1.5x at decode there): the result's weight is that buffer and `prepacked`
// is set (GemmArgs::b_prepacked). `swiglu_interleave` is PrepackArgs' (a gate_up weight for the
// fused SwiGLU epilogue). On sm_100a / 103a / 120a / 121a the block-scaled MMAs read the
// weight as stored: it is described as from_modelopt does and `prepacked` is neither needed
// nor written (a gate_up weight's order is then GemmArgs::b_swiglu_interleave). (The GEMM's
// emulation of those archs on sm_90a, a test facility, takes the weight as stored too.)
Nvfp4Linear load_modelopt(const ModelOptLinear& layer, void* prepacked, CUstream stream, int64_t swiglu_interleave = -1);

// gemm's own weight layout (sm_90a): values and block scales rearranged in 64-row x 64-k
// chunks so each kernel thread reads its operands with one 16-byte load and places a BF16
// pair with two integer instructions instead of five, and each stage is one contiguous copy
// (Marlin and Machete prepack their weights likewise). A one-time step at load, on `stream`;
// the result is for gemm only (GemmArgs::b_prepacked) and gives the same bits as the weight
// it came from. It also holds, per row, a NaN flag and the fold exponent e[n] the W4A8 mode
// (GemmPrecision::w4a8) folds the row's block scales with.
struct PrepackArgs {
  Nvfp4Tensor weight{};  // [n, k] as stored (either scale layout); its global scale is not used here
  int64_t n = 0, k = 0;  // k: a multiple of 32
  void* out = nullptr;   // prepacked_bytes(n, k) bytes, 16-byte aligned
  // A gate_up weight for GemmEpilogue::swiglu: its rows' gate / up order as stored, which
  // prepack turns into the 8-row interleave the fused epilogue reads (gate rows 8j..8j+7, then
  // up rows 8j..8j+7). -1: none (rows as they are); 0: gate rows [0, n/2), then up rows
  // [n/2, n) (ModelOpt); g > 0: groups of g gate rows each followed by g up rows. n/2 must be a
  // multiple of 8 (and of g). The prepacked bytes record it: a swiglu GEMM on a weight prepacked
  // without it, or a plain GEMM on one prepacked with it, writes NaN.
  int64_t swiglu_interleave = -1;
};
void prepack(const PrepackArgs& args, CUstream stream);
// Bytes of a prepacked weight [n, k] (rows padded to 128, k to 256).
int64_t prepacked_bytes(int64_t n, int64_t k);

// Bytes of an E4M3 scale tensor for [rows, k] in `layout` (padding included).
int64_t scale_bytes(ScaleLayout layout, int64_t rows, int64_t k);

// ---- Warming up, before serving or before a CUDA graph capture ----

// Compiles (or reads from the disk cache) and loads into the current context every kernel the
// same call would launch, without launching anything or reading any pointer: pointers may be
// null, and the shapes, dtypes, layouts, flags and M (rows) choose the kernels. An engine warms
// up this way without real buffers; a later call, captured or not, finds its kernels loaded.
// Arguments are checked as the call checks them; rows (m) = 0 loads nothing, as the call
// launches nothing. Loads into the context a call on the legacy stream runs in (the current
// one, else device 0's primary context; Error(no_device) without a GPU).
void ensure_loaded(const DequantizeArgs& args);
void ensure_loaded(const QuantizeArgs& args);
void ensure_loaded(const RmsNormQuantizeArgs& args);
void ensure_loaded(const MhcRmsNormQuantizeArgs& args);
void ensure_loaded(const SwigluQuantizeArgs& args);
void ensure_loaded(const MoeStageArgs& args);
void ensure_loaded(const ConvertScalesArgs& args);
void ensure_loaded(const GemmArgs& args);
void ensure_loaded(const GroupedGemmArgs& args);
void ensure_loaded(const PrepackArgs& args);
void ensure_loaded(const MoeRouteArgs& args);
void ensure_loaded(const MoeCombineArgs& args);

struct PrewarmShape {
  int64_t n = 0, k = 0;  // a weight [n, k]
  int32_t groups = 1;    // > 1: a grouped (expert) weight
};
struct PrewarmOptions {
  std::string manifest;              // a built-in manifest ("llama-3.1-8b", ...) or a manifest file; or empty
  std::vector<PrewarmShape> shapes;  // weight shapes besides the manifest's
  std::vector<std::string> archs;    // "sm_90a", "sm_100a", ... (no empty names); none: the current context's device, else device 0
  int sm_count = 0;                  // GEMM tiles for this many SMs; 0: the current device's, else 132
  int threads = 0;                   // compiling threads, 1 to 256 (never more than kernels); 0: one per core
  // The variants a deployment runs, as a manifest line's fields; every shape without its own
  // takes them. Empty: the defaults (BF16 and W4A4 activations, BF16 out, no bias, ModelOpt's
  // linear weight scales, every quantizer). E.g. "a-dtype=fp16 d-dtype=fp16,fp32 bias=bf16
  // b-layout=prepacked a-from=swiglu"; the keys and values are `nvfp4-jit prewarm --help`'s.
  std::string variants;
  // A ModelOpt NVFP4 checkpoint directory (config.json + its quant config), or empty: the GEMMs
  // one rank of a tp x ep engine runs (model_shapes below), besides the manifest's and shapes.
  std::string model;
  int tp = 1;  // tensor-parallel size, with model
  int ep = 1;  // expert-parallel size, with model
  // Also load every kernel into the current device's context (compiling what the cache lacks),
  // so graph capture right after needs no eager warm-up call. archs then default to the current
  // device's and must include it; sm_count must be 0 or the device's.
  bool load = false;
};
struct PrewarmResult {
  int64_t kernels = 0, compiled = 0, cached = 0, failed = 0;
  int64_t loaded = 0;      // load: the current device's kernels now loaded in its context
  int64_t not_stored = 0;  // compiled but not written to the cache (read-only or full root, ...)
  int64_t deferred = 0;    // another process was compiling them when reached: visited again at the end
  double seconds = 0;
  std::vector<std::string> errors;  // one per failed kernel
  std::vector<std::string> notes;   // shapes that get no GEMM kernels, and why
};
// Compiles into the disk cache every kernel of every op for these weight shapes, as
// `nvfp4-jit prewarm` does (no GPU needed when archs are given). Processes prewarming one
// cache split the work. Throws Error(invalid_argument) for bad options; kernels that fail or
// are not stored are counted in the result.
PrewarmResult prewarm(const PrewarmOptions& options);

// One NVFP4 weight of a model, as one rank runs it: `name` says which modules (fused as engines
// fuse them, `model.layers.*.self_attn.qkv_proj`; `+` joins modules of one shape).
struct ModelShape {
  std::string name;
  int64_t n = 0, k = 0;
  int32_t groups = 1;  // > 1: a grouped (expert) weight
};
// The weight shapes one rank of a tp x ep engine runs for the checkpoint in `model_dir`, as
// `nvfp4-jit prewarm --model DIR --tp N --ep N --shapes` prints them, deduplicated by (n, k,
// groups). Excluded modules, routers, lm_head and embeddings are left out. Throws
// Error(invalid_argument) naming the file and field (or tp / ep) that is wrong.
std::vector<ModelShape> model_shapes(const std::string& model_dir, int tp = 1, int ep = 1);

const char* version() noexcept;

// The NVRTC this process compiles kernels with: the first of NVFP4_JIT_NVRTC, an NVRTC already
// loaded in the process, the nvidia-cuda-nvrtc wheel beside the library, the system CUDA
// (README, Environment). Found at the first call (or first compile), never at library load.
struct NvrtcInfo {
  std::string path;     // the loaded libnvrtc; "" when none
  std::string version;  // "13.0": major.minor, as in every cache key; "" when none
  std::string source;   // how it was found: "env", "process", "wheel" or "system"; "" when none
  std::string error;    // why none could be loaded ("" when one was): the places looked at, and the fix
};
// Never throws. Without an NVRTC the CPU references, info and the cache commands still work; a
// kernel cannot be found even on disk (its key holds the NVRTC's version).
NvrtcInfo nvrtc_info();

}  // namespace nvfp4::jit

namespace nvfp4::jit::cpu {

// CPU references with the GPU kernels' exact bits, on host pointers (device_ptr,
// row_indices and global_scale_out are host pointers here). For tests and for quantizing
// weights offline without a GPU.
void dequantize(const DequantizeArgs& args);
void quantize(const QuantizeArgs& args);
void convert_scales(const ConvertScalesArgs& args);
void rmsnorm_quantize(const RmsNormQuantizeArgs& args);
void swiglu_quantize(const SwigluQuantizeArgs& args);
void moe_stage(const MoeStageArgs& args);
void mhc_rmsnorm_quantize(const MhcRmsNormQuantizeArgs& args);
void prepack(const PrepackArgs& args);
void moe_route(const MoeRouteArgs& args);
void moe_combine(const MoeCombineArgs& args);

}  // namespace nvfp4::jit::cpu

#if defined(__GNUC__)
#pragma GCC visibility pop
#endif
