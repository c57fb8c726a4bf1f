// Kernel parameter blocks, shared by the host launcher and the generated kernels so the two
// can never disagree on a layout. Plain aggregates of fundamental types only.
#pragma once

namespace nvfp4k {

// DTYPE_E4M3: a kernel's FP8 activations (the sm_90a GEMM's W4A8 mode), no public DType.
// DTYPE_NVFP4: NVFP4 activations (DType::nvfp4's value) that a kernel takes as they are.
enum DTypeCode { DTYPE_BF16 = 0, DTYPE_FP16 = 1, DTYPE_FP32 = 2, DTYPE_NVFP4 = 3, DTYPE_E4M3 = 4 };

// Where a global scale comes from: a kernel argument, one device value, one per row, or
// computed from an amax the device holds (one, or one per row).
enum GlobalScaleCode {
  GSCALE_HOST = 0,
  GSCALE_DEVICE = 1,
  GSCALE_DEVICE_PER_ROW = 2,
  GSCALE_FROM_AMAX = 3,
  GSCALE_COMPUTE_PER_ROW = 4,  // fused quantize: amax of the row it holds, written to gscale_out
  GSCALE_DEVICE_PER_GROUP = 5,  // grouped GEMM: one device value per group
};

// RMSNorm of a GEMM's activations inside the GEMM (sm_90a W4A16): none, or its weight in the
// activations' 16-bit type, or in fp32.
enum ARmsNormCode { A_RMSNORM_NONE = 0, A_RMSNORM_16BIT = 1, A_RMSNORM_FP32 = 2 };

// NVFP4 D of a GEMM epilogue (ODT DTYPE_NVFP4, the SwiGLU epilogue's), `d_fp4` in every arch's
// parameter block beside its d (the packed values, d_stride bytes a row): the E4M3 scales in
// scale_layout (ScaleLayoutCode, linear or swizzled128x4) and the global scale the values are
// divided by (GSCALE_HOST, GSCALE_DEVICE, or GSCALE_DEVICE_PER_ROW: one per row of D).
struct Fp4OutputParams {
  unsigned char* scales;
  int scale_layout;
  const float* gscale_ptr;
  float gscale_value;
  int gscale_mode;
};

// EPILOGUE_MOE_COMBINE's arguments (common/moe_combine_epilogue.cuh): moe_route's outputs, the
// router weights, the output rows and a counter per (token, column tile).
struct MoeCombineEpilogueParams {
  const int* positions;     // [tokens, topk]: the sorted row of entry (t, j), or -1
  const int* row_token;     // [d_rows]: the token of sorted row r (moe_route's row_index)
  const void* weights;      // [tokens, topk] of weights_dtype
  void* out;                // [tokens, n] of out_dtype, out_stride elements per row
  int* counters;            // [tokens, column tiles], zero between calls
  long long out_stride, tokens, topk, d_rows;
  int weights_dtype, out_dtype;  // DTypeCode: FP32 or BF16; BF16, FP16 or FP32
};

struct DequantizeParams {
  const unsigned char* packed;  // [src_rows, K/2] with packed_stride bytes per row
  long long packed_stride;
  const unsigned char* scales;  // E4M3, layout compiled in
  const float* gscale_ptr;      // GSCALE_DEVICE*: device value(s)
  float gscale_value;           // GSCALE_HOST
  int gscale_mode;              // GlobalScaleCode
  void* out;                    // [rows, K] with out_stride elements per row
  long long out_stride;
  const int* row_indices;       // null: row r reads source row r
  long long src_rows;
  long long rows;
};

struct QuantizeParams {
  const void* in;               // [rows, K] with in_stride elements per row
  long long in_stride;
  unsigned char* packed;        // [rows, K/2] with packed_stride bytes per row
  long long packed_stride;
  unsigned char* scales;        // E4M3, layout compiled in; padding written as zeros
  const float* gscale_ptr;
  float gscale_value;
  int gscale_mode;
  long long rows;
};

struct ConvertScalesParams {
  const unsigned char* src;
  unsigned char* dst;
  long long rows;
};

// The W4A8 GEMM's activations: A [rows, K] (BF16, FP16 or NVFP4) per row to E4M3, columns
// permuted within every 16 (fp8_activations.cuh), and each row's scale amax / 448.
struct Fp8ActivationParams {
  const void* a;         // [rows, K] (with row_index: [a_rows, K]), a_stride elements per row
  long long a_stride;    // (NVFP4: packed E2M1 pairs, a_stride bytes per row)
  unsigned char* out;    // [rows, K] E4M3
  float* row_scales;     // [rows]
  long long rows;
  // A grouped GEMM's rows (on the device; none read on the host): output row r is A's row
  // row_index[r] (contiguous groups gathered; an index outside [0, a_rows) makes the row's
  // scale NaN, as the exact mode makes its D row NaN), or with group_rows (masked groups of
  // group_stride rows) only the first group_rows[g] rows of group g are written.
  const int* row_index;
  long long a_rows;
  const int* group_rows;
  long long group_stride;
  // NVFP4 A: its E4M3 block scales (layout compiled in) and its global scale (GlobalScaleCode),
  // folded into each row's scale; one per group (GSCALE_DEVICE_PER_GROUP) is the row's group's:
  // masked, row / group_stride; contiguous, the first of `groups` whose group_ends is past it.
  const unsigned char* a_scales;
  const float* gscale_ptr;
  float gscale_value;
  int gscale_mode;
  const int* group_ends;
  long long groups;
};

// A grouped W4A16 GEMM's rows copied in its sorted order (gather_rows.cuh): out [rows, K] row r
// is A's row row_index[r] (a NaN row for an index outside [0, a_rows)).
struct GatherRowsParams {
  const void* a;          // [a_rows, K] 16-bit, a_stride elements per row
  long long a_stride;
  long long a_rows;
  const int* row_index;   // [rows], on the device
  void* out;              // [rows, K]
};

struct PrepackParams {
  const unsigned char* packed;  // [rows, K/2] with packed_stride bytes per row
  long long packed_stride;
  const unsigned char* scales;  // E4M3, layout compiled in
  unsigned char* out;           // prepacked::bytes(rows, K)
  long long rows;
  long long swiglu_interleave;  // prepacked::stored_row's order of the rows (-1: as stored)
};

// The fused quantizers (RMSNorm, SwiGLU, MoE staging, mHC + RMSNorm): a prologue makes a
// row's values, which are quantized like QuantizeParams'. Fields an op does not use stay 0.
enum RowPrologue { ROW_PLAIN = 0, ROW_RMSNORM = 1, ROW_SWIGLU = 2, ROW_MHC = 3 };

struct RowQuantizeParams {
  const void* in;               // [rows, K] (SwiGLU: [rows, 2K]) with in_stride elements per row
  long long in_stride;
  long long hc_stride;          // mHC: stream i of row r starts at r * in_stride + i * hc_stride
  const float* mix;             // mHC: A [rows, n_hc], mix_stride floats per row
  long long mix_stride;
  void* h;                      // mHC, optional: the mixed rows [rows, K], h_stride elements per row
  long long h_stride;
  unsigned char* packed;        // [rows, K/2] with packed_stride bytes per row
  long long packed_stride;
  unsigned char* scales;        // E4M3, layout compiled in; padding written as zeros
  const float* gscale_ptr;
  float gscale_value;
  int gscale_mode;              // GlobalScaleCode; GSCALE_COMPUTE_PER_ROW writes gscale_out[r]
  float* gscale_out;
  long long rows;
  // RMSNorm
  const void* norm_weight;      // [K], the weight dtype compiled in
  float eps;
  void* normed;                 // optional [rows, K] in the input's dtype, normed_stride elements per row
  long long normed_stride;
  float* inv_rms;               // optional [rows]
  // MoE staging: rows x topk router outputs copied alongside the tokens; ids int32 or int64
  const void* topk_ids;
  const float* topk_weights;
  void* topk_ids_out;
  float* topk_weights_out;
  long long topk;
  int topk_ids_64, topk_ids_out_64;  // 1: int64 ids
};

// Amax over each row (finite values only): per row it writes global_scale_from_amax to
// out[r]; per tensor it atomically maxes the amax bits into out[0].
struct AmaxParams {
  const void* in;
  long long in_stride;
  float* out;
  long long rows;
};

// A CUtensorMap (TMA descriptor) as the kernels see it: 128 opaque bytes, 64-byte aligned.
struct alignas(64) TmaDescriptor {
  unsigned long long bytes[16];
};

enum BiasCode { BIAS_NONE = 0, BIAS_BF16 = 1, BIAS_FP32 = 2 };
// What a GEMM's epilogue makes of its fp32 tile after the scales and bias: D itself, or
// silu(gate) * up of a gate_up weight whose rows come in the 8-row interleave (D half as wide),
// or D and then the router-weighted sum of each finished token's rows into its output row
// (a grouped down GEMM's MoE combine, common/moe_combine_epilogue.cuh).
enum GemmEpilogueCode { EPILOGUE_NONE = 0, EPILOGUE_SWIGLU = 1, EPILOGUE_MOE_COMBINE = 2 };

// MoE routing (templates/moe_route.cuh): top-k ids [tokens, topk] sorted by expert.
// CTAs of MOE_ROUTE_WARPS warps; their dynamic shared memory: a count per warp and expert, the
// experts' totals and earlier CTAs' rows, the scan's warp sums (MOE_ROUTE_WARPS * groups +
// 2 * groups + 32 ints).
constexpr int MOE_ROUTE_WARPS = 32;
struct MoeRouteParams {
  const void* ids;              // [tokens, topk] int32 or int64 (compiled in)
  long long tokens, topk;
  long long first_expert;       // this rank's experts: [first_expert, first_expert + GROUPS)
  int* counts;                  // optional [GROUPS]
  int* group_ends;              // [GROUPS] cumulative row ends
  int* row_index;               // [tokens * topk]: the token of each sorted row, -1 past the routed rows
  int* positions;               // optional [tokens * topk]: the row of entry (t, j), -1 when skipped
  long long cta_entries;        // entries per CTA (all of them with one CTA)
  int* workspace;               // [GROUPS][CTAs] counts per CTA (several CTAs), or null (one)
};

// MoE combine: out[t, :] = sum_j w[t, j] * d[positions[t * topk + j], :], fp32, j in order.
struct MoeCombineParams {
  const void* d;                // [d_rows, n], d_stride elements per row
  long long d_stride, d_rows;
  const int* positions;         // [tokens, topk]; outside [0, d_rows): skipped
  const void* weights;          // [tokens, topk] fp32 or bf16 (compiled in)
  void* out;                    // [tokens, n], out_stride elements per row
  long long out_stride;
  long long tokens, topk, n;
};

}  // namespace nvfp4k
