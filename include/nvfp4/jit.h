/* nvfp4-jit C API: NVFP4 kernels generated, compiled and cached at run time.
 *
 * Every function returns a status; on failure nvfp4_jit_last_error() gives a message for
 * the calling thread that names the bad argument. Pointers are device pointers unless a
 * field says otherwise; `stream` is a CUstream or cudaStream_t (NULL: legacy stream). */
#ifndef NVFP4_JIT_H
#define NVFP4_JIT_H

#include <stddef.h>
#include <stdint.h>

/* The library is built with hidden visibility; what these headers declare is its API. */
#if defined(__GNUC__)
#pragma GCC visibility push(default)
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* The same type as cuda.h's CUstream and cuda_runtime's cudaStream_t. */
typedef struct CUstream_st* CUstream;

typedef enum nvfp4_status {
  NVFP4_OK = 0,
  NVFP4_INVALID_ARGUMENT = 1,   /* a pointer, shape, stride or value is wrong */
  NVFP4_UNSUPPORTED = 2,        /* arch, dtype or layout combination not supported */
  NVFP4_COMPILE_FAILED = 3,     /* NVRTC rejected the generated source (log in the message), or no NVRTC was found */
  NVFP4_CUDA_ERROR = 4,         /* the driver failed (no driver, no context, launch error) */
  NVFP4_NOT_LOADED_IN_CAPTURE = 5, /* the stream is capturing and the kernel is not loaded */
  NVFP4_CACHE_ERROR = 6,        /* the kernel cache cannot be used as asked */
  NVFP4_INTERNAL = 7,
  NVFP4_NO_DEVICE = 8           /* no CUDA driver, or no GPU (the nvfp4-jit command exits 3) */
} nvfp4_status;

typedef enum nvfp4_dtype {
  NVFP4_DTYPE_BF16 = 0,
  NVFP4_DTYPE_FP16 = 1,
  NVFP4_DTYPE_FP32 = 2,
  NVFP4_DTYPE_NVFP4 = 3 /* packed E2M1 pairs with E4M3 block scales */
} nvfp4_dtype;

typedef enum nvfp4_scale_layout {
  NVFP4_SCALES_LINEAR = 0,        /* [rows, K/16] row-major */
  NVFP4_SCALES_SWIZZLED128X4 = 1  /* cuBLASLt / CUTLASS 128x4 tiles, rows padded to 128 */
} nvfp4_scale_layout;

/* The fp32 global scale of an NVFP4 tensor: `device_ptr` (one value, or one per row when
 * `per_row` is set) when given, else the host value `value`. */
typedef struct nvfp4_global_scale {
  float value;
  const float* device_ptr;
  int per_row;
} nvfp4_global_scale;

/* An NVFP4 matrix [rows, k]: packed E2M1 [rows, k/2] (element 2i in the low nibble) and
 * E4M3 block scales, one per 16 elements along k. */
typedef struct nvfp4_tensor {
  const void* data;
  int64_t row_stride_bytes; /* 0: k/2 */
  const void* scales;
  nvfp4_scale_layout scale_layout;
  nvfp4_global_scale global_scale;
} nvfp4_tensor;

/* out[r, :] = decode(src[row_indices ? row_indices[r] : r, :]) for r < rows.
 * src_rows bounds the gather: an index outside [0, src_rows) gives a row of NaN. */
typedef struct nvfp4_dequantize_args {
  nvfp4_tensor src;
  int64_t src_rows;
  int64_t k;
  void* out;
  nvfp4_dtype out_dtype;
  int64_t out_row_stride; /* elements; 0: k */
  const int32_t* row_indices; /* device int32 [rows], or NULL */
  int64_t rows;               /* rows written; with no row_indices it must equal src_rows */
} nvfp4_dequantize_args;

typedef enum nvfp4_global_scale_mode {
  NVFP4_GSCALE_GIVEN = 0,
  NVFP4_GSCALE_COMPUTE_PER_TENSOR = 1,
  NVFP4_GSCALE_COMPUTE_PER_ROW = 2
} nvfp4_global_scale_mode;

/* in [rows, k] (BF16 / FP16 / FP32) -> packed [rows, k/2] + E4M3 scales; see jit.hpp. */
typedef struct nvfp4_quantize_args {
  const void* in;
  nvfp4_dtype in_dtype;
  int64_t in_row_stride; /* elements; 0: k */
  int64_t rows;
  int64_t k;
  void* out;
  int64_t out_row_stride_bytes; /* 0: k/2 */
  void* scales;
  nvfp4_scale_layout scale_layout;
  nvfp4_global_scale_mode scale_mode;
  nvfp4_global_scale global_scale; /* NVFP4_GSCALE_GIVEN */
  float* global_scale_out;         /* NVFP4_GSCALE_COMPUTE_*: device, 1 or rows floats */
} nvfp4_quantize_args;

/* Where a fused quantizer writes NVFP4 [rows, k]; scale_mode GIVEN or COMPUTE_PER_ROW. */
typedef struct nvfp4_quantized_output {
  void* data;
  int64_t row_stride_bytes; /* 0: k/2 */
  void* scales;
  nvfp4_scale_layout scale_layout;
  nvfp4_global_scale_mode scale_mode;
  nvfp4_global_scale global_scale;
  float* global_scale_out;
} nvfp4_quantized_output;

/* RMSNorm then quantize in one pass; see jit.hpp (nvfp4::jit::RmsNormQuantizeArgs). */
typedef struct nvfp4_rmsnorm_quantize_args {
  const void* in;
  nvfp4_dtype in_dtype;
  int64_t in_row_stride; /* elements; 0: k */
  int64_t rows, k;
  const void* weight; /* [k], in_dtype */
  float eps;
  nvfp4_quantized_output out;
  void* normed;              /* optional */
  int64_t normed_row_stride; /* elements; 0: k */
  float* inv_rms;            /* optional [rows] */
  int weight_fp32;           /* weight in fp32 instead of in_dtype */
} nvfp4_rmsnorm_quantize_args;

/* SwiGLU (gate, up in one [rows, 2k] input) then quantize; see jit.hpp. */
typedef struct nvfp4_swiglu_quantize_args {
  const void* in;
  nvfp4_dtype in_dtype;
  int64_t in_row_stride; /* elements; 0: 2k */
  int64_t rows, k;
  int64_t interleave; /* 0: two halves */
  nvfp4_quantized_output out;
} nvfp4_swiglu_quantize_args;

/* The integer type of router top-k ids (DeepEP's are int64). */
typedef enum nvfp4_index_type { NVFP4_INDEX_INT32 = 0, NVFP4_INDEX_INT64 = 1 } nvfp4_index_type;

/* MoE staging: tokens quantized, router top-k ids and weights copied; see jit.hpp. */
typedef struct nvfp4_moe_stage_args {
  const void* tokens;
  nvfp4_dtype in_dtype;
  int64_t in_row_stride;
  int64_t rows, k;
  nvfp4_quantized_output out;
  int64_t topk;
  const void* topk_ids;      /* [rows, topk] of topk_ids_type */
  const float* topk_weights; /* or NULL */
  void* topk_ids_out;        /* [rows, topk] of topk_ids_out_type */
  float* topk_weights_out;
  nvfp4_index_type topk_ids_type;     /* 0: int32 */
  nvfp4_index_type topk_ids_out_type; /* 0: int32 */
} nvfp4_moe_stage_args;

/* mHC pre-block (h = sum_i mix[r, i] * X[r, i, :]), RMSNorm and quantize in one pass over X
 * [rows, n_hc, k]; see jit.hpp (nvfp4::jit::MhcRmsNormQuantizeArgs). */
typedef struct nvfp4_mhc_rmsnorm_quantize_args {
  const void* in;
  nvfp4_dtype in_dtype;
  int64_t rows, n_hc, k;
  int64_t in_row_stride; /* elements; 0: n_hc * in_hc_stride */
  int64_t in_hc_stride;  /* elements; 0: k */
  const float* mix;      /* [rows, n_hc] fp32 */
  int64_t mix_row_stride; /* floats; 0: n_hc */
  const void* weight;    /* [k], in_dtype or fp32 (weight_fp32) */
  int weight_fp32;
  float eps;
  nvfp4_quantized_output out;
  void* h; /* optional [rows, k] */
  int64_t h_row_stride;
  void* normed; /* optional [rows, k] */
  int64_t normed_row_stride;
  float* inv_rms; /* optional [rows] */
} nvfp4_mhc_rmsnorm_quantize_args;
nvfp4_status nvfp4_jit_mhc_rmsnorm_quantize(const nvfp4_mhc_rmsnorm_quantize_args* args, CUstream stream);

/* E4M3 scales of an NVFP4 [rows, k] matrix rewritten in another layout; see jit.hpp. */
typedef struct nvfp4_convert_scales_args {
  const void* src;
  nvfp4_scale_layout src_layout;
  void* dst;
  nvfp4_scale_layout dst_layout;
  int64_t rows;
  int64_t k;
} nvfp4_convert_scales_args;

/* What the GEMM's epilogue writes (nvfp4::jit::GemmEpilogue): D, or silu(gate) * up of a
 * gate_up weight (D [m, n/2]): prepacked with swiglu_interleave on sm_90a, as stored (gate rows
 * [0, n/2) then up rows, or interleaved: b_swiglu_interleave) on sm_100a / 103a / 120a / 121a;
 * or D and then the MoE combine of its rows into the tokens' output rows (grouped, contiguous). */
typedef enum nvfp4_gemm_epilogue {
  NVFP4_GEMM_EPILOGUE_NONE = 0,
  NVFP4_GEMM_EPILOGUE_SWIGLU = 1,
  NVFP4_GEMM_EPILOGUE_MOE_COMBINE = 2
} nvfp4_gemm_epilogue;
/* How gemm multiplies (nvfp4::jit::GemmPrecision): exact, or W4A8 on FP8 tensor cores (sm_90a). */
typedef enum nvfp4_gemm_precision { NVFP4_GEMM_EXACT = 0, NVFP4_GEMM_W4A8 = 1 } nvfp4_gemm_precision;

/* D[m, n] = alpha * sum_k A[m, k] * decode(B)[n, k] (+ bias[n]), fp32 accumulation; see
 * jit.hpp (nvfp4::jit::GemmArgs). */
typedef struct nvfp4_gemm_args {
  int64_t m, n, k;
  const void* a;          /* [m, k] BF16 or FP16 */
  nvfp4_dtype a_dtype;
  int64_t a_row_stride;   /* elements; 0: k */
  nvfp4_tensor b;         /* weight [n, k] */
  void* d;
  nvfp4_dtype d_dtype;    /* BF16, FP16, FP32; NVFP4: D in d_fp4 */
  int64_t d_row_stride;   /* elements; 0: n */
  const void* bias;       /* [n] or NULL */
  nvfp4_dtype bias_dtype; /* BF16 or FP32 */
  float alpha;
  nvfp4_tensor a_fp4;      /* W4A4 (a_dtype NVFP4): A [m, k]; global scale per tensor or per row */
  void* workspace;         /* W4A4, W4A8, grouped W4A16 through row_index: the *_workspace_bytes() helpers'
                              bytes, or NULL (stream-ordered) */
  int64_t workspace_bytes;
  int b_prepacked;         /* b.data holds nvfp4_jit_prepack()'s output */
  int weights_static;      /* b is no output of work still running on the stream: may launch early */
  nvfp4_gemm_epilogue epilogue; /* NONE, or SWIGLU: D [m, n/2] = silu(gate) * up */
  nvfp4_gemm_precision precision; /* NVFP4_GEMM_EXACT (default) or NVFP4_GEMM_W4A8 (sm_90a, prepacked b;
                                      grouped: contiguous or masked) */
  /* SWIGLU on a weight as stored: 0 gate rows [0, n/2) then up rows; g > 0 (a power of two):
     groups of g gate rows, then g up rows */
  int64_t b_swiglu_interleave;
  /* RMSNorm of A in the GEMM (sm_90a, BF16/FP16 A, exact, dense): D = (A * g / rms(A rows)) . W^T;
     g [k] in a_dtype, or fp32 with a_rmsnorm_weight_fp32; NULL: none (see jit.hpp) */
  const void* a_rmsnorm_weight;
  int a_rmsnorm_weight_fp32;
  float a_rmsnorm_eps;
  /* D = ... + residual [m, n] in d_dtype (sm_90a, BF16/FP16 A, exact, dense, no fused epilogue);
     NULL: none; may be d (same stride) */
  const void* residual;
  int64_t residual_row_stride; /* elements; 0: n */
  /* NVFP4 D (d_dtype NVFP4, d NULL; epilogue SWIGLU, every arch): D [m, n/2] quantized from the fp32
     values, scales linear (n/2 a multiple of 16) or swizzled (64), global scale given (see jit.hpp) */
  nvfp4_quantized_output d_fp4;
} nvfp4_gemm_args;

/* A weight rewritten in the GEMM's own layout (sm_90a), once at load; see jit.hpp. */
typedef struct nvfp4_prepack_args {
  nvfp4_tensor weight; /* [n, k] as stored */
  int64_t n, k;
  void* out; /* nvfp4_jit_prepacked_bytes(n, k) bytes */
  int64_t swiglu_interleave; /* -1: none; a gate_up weight's row order: 0 gate then up halves, g > 0 groups of g */
} nvfp4_prepack_args;
const char* nvfp4_jit_version(void);
/* The NVRTC this process compiles with (see jit.hpp's nvrtc_info); the strings live as long as
 * the process. NVFP4_OK when one is loaded; NVFP4_COMPILE_FAILED when none can be (`error` and
 * the last error say why); NVFP4_INVALID_ARGUMENT when `info` is NULL. */
typedef struct nvfp4_nvrtc_info {
  const char* path;    /* "" when none */
  const char* version; /* "13.0" (major.minor, as in every cache key); "" when none */
  const char* source;  /* "env", "process", "wheel" or "system"; "" when none */
  const char* error;   /* "" when one is loaded */
} nvfp4_nvrtc_info;
nvfp4_status nvfp4_jit_nvrtc_info(nvfp4_nvrtc_info* info);
/* The message of the last failed call on this thread ("" if none). */
const char* nvfp4_jit_last_error(void);

nvfp4_status nvfp4_jit_dequantize(const nvfp4_dequantize_args* args, CUstream stream);
nvfp4_status nvfp4_jit_quantize(const nvfp4_quantize_args* args, CUstream stream);
nvfp4_status nvfp4_jit_convert_scales(const nvfp4_convert_scales_args* args, CUstream stream);
nvfp4_status nvfp4_jit_rmsnorm_quantize(const nvfp4_rmsnorm_quantize_args* args, CUstream stream);
nvfp4_status nvfp4_jit_swiglu_quantize(const nvfp4_swiglu_quantize_args* args, CUstream stream);
nvfp4_status nvfp4_jit_moe_stage(const nvfp4_moe_stage_args* args, CUstream stream);
nvfp4_status nvfp4_jit_gemm(const nvfp4_gemm_args* args, CUstream stream);
/* Workspace bytes nvfp4_jit_gemm needs for `args` (W4A8: m * k rounded up to 16, plus 4 * m,
   whatever A's dtype; W4A4 in the exact mode, a W4A8 call of NVFP4 A small enough for it too:
   m * k * 2, or 0 at m <= 4 and k <= 8192: one launch on every arch; else 0). -1, with
   nvfp4_jit_last_error() naming the argument, for any argument nvfp4_jit_gemm would refuse
   (the buffers aside: they need not exist yet). */
int64_t nvfp4_jit_gemm_workspace_bytes(const nvfp4_gemm_args* args);

/* A grouped GEMM (mixture of experts), as nvfp4::jit::grouped_gemm (jit.hpp says what each
   field means for the groups). */
typedef enum nvfp4_grouped_layout {
  NVFP4_GROUPED_CONTIGUOUS = 1,
  NVFP4_GROUPED_MASKED = 2,
  NVFP4_GROUPED_BATCHED = 3
} nvfp4_grouped_layout;
/* NVFP4_GEMM_EPILOGUE_MOE_COMBINE's arguments (nvfp4::jit::MoeCombineEpilogue). */
typedef struct nvfp4_moe_combine_epilogue {
  const int32_t* positions;  /* [tokens, topk]: moe_route's positions */
  const int32_t* row_token;  /* [gemm.m]: moe_route's row_index */
  const void* weights;       /* [tokens, topk] router weights */
  nvfp4_dtype weights_dtype; /* FP32 or BF16 */
  int64_t tokens, topk;
  void* out;                 /* [tokens, gemm.n] */
  nvfp4_dtype out_dtype;     /* BF16, FP16 or FP32 */
  int64_t out_row_stride;    /* elements; 0: gemm.n */
  void* counters;            /* nvfp4_jit_moe_combine_counter_bytes() bytes, zero before the first call; or NULL */
  int64_t counters_bytes;
} nvfp4_moe_combine_epilogue;
typedef struct nvfp4_grouped_gemm_args {
  nvfp4_gemm_args gemm;
  int32_t groups;
  nvfp4_grouped_layout layout;
  const int32_t* group_ends; /* contiguous: [groups] cumulative row ends, on the device */
  const int32_t* masked_m;   /* masked: [groups] rows of each group, on the device */
  int64_t expected_m;        /* rows per group the kernel is chosen for; 0: derived from m (as nvfp4::jit's) */
  int a_global_scale_per_group; /* W4A4: gemm.a_fp4.global_scale.device_ptr holds [groups] scales */
  const int32_t* row_index;  /* contiguous: A's sorted row r is A's row row_index[r] (gemm.a or gemm.a_fp4), or NULL */
  int64_t a_rows;            /* rows of A with row_index */
  int64_t a_group_stride;    /* batched: elements from group g's row of A to group g+1's; 0: k */
  int64_t d_group_stride;    /* batched: the same in D; 0: n */
  nvfp4_moe_combine_epilogue combine; /* gemm.epilogue NVFP4_GEMM_EPILOGUE_MOE_COMBINE only */
} nvfp4_grouped_gemm_args;
nvfp4_status nvfp4_jit_grouped_gemm(const nvfp4_grouped_gemm_args* args, CUstream stream);
/* Workspace bytes nvfp4_jit_grouped_gemm needs for `args` (W4A4, and W4A8 through
   gemm.precision: every group's rows, whatever their number; W4A16 through row_index: its rows
   copied in sorted order; else 0); -1 as nvfp4_jit_gemm_workspace_bytes. */
int64_t nvfp4_jit_grouped_gemm_workspace_bytes(const nvfp4_grouped_gemm_args* args);
/* Bytes of combine.counters nvfp4_jit_grouped_gemm needs for `args` (epilogue MOE_COMBINE: tokens *
   ceil(n / 64) * 4, else 0); -1 as nvfp4_jit_gemm_workspace_bytes. */
int64_t nvfp4_jit_moe_combine_counter_bytes(const nvfp4_grouped_gemm_args* args);

/* Mixture-of-experts routing on the device, as nvfp4::jit::moe_route (jit.hpp): top-k ids
   sorted by expert into the contiguous layout; ids outside [first_expert, first_expert +
   groups) are skipped. */
typedef struct nvfp4_moe_route_args {
  const void* topk_ids;     /* [tokens, topk] of topk_ids_type */
  nvfp4_index_type topk_ids_type; /* 0: int32 */
  int64_t tokens, topk;
  int32_t groups;
  int64_t first_expert;
  int32_t* counts;          /* [groups] or NULL */
  int32_t* group_ends;      /* [groups] */
  int32_t* row_index;       /* [tokens * topk]: token of each sorted row, -1 past the routed rows */
  int32_t* positions;       /* [tokens * topk]: sorted row of (t, j), -1 where skipped; or NULL */
  void* workspace;          /* nvfp4_jit_moe_route_workspace_bytes() bytes, or NULL (stream-ordered) */
  int64_t workspace_bytes;
} nvfp4_moe_route_args;
nvfp4_status nvfp4_jit_moe_route(const nvfp4_moe_route_args* args, CUstream stream);
/* Workspace bytes nvfp4_jit_moe_route needs for `args` (0 up to 4096 entries; -1: bad input). */
int64_t nvfp4_jit_moe_route_workspace_bytes(const nvfp4_moe_route_args* args);

/* out[t, :] = sum_j weights[t, j] * d[positions[t * topk + j], :] in fp32, j in order; see
   nvfp4::jit::moe_combine (jit.hpp). */
typedef struct nvfp4_moe_combine_args {
  const void* d;            /* [d_rows, n] */
  nvfp4_dtype d_dtype;
  int64_t d_row_stride;     /* elements; 0: n */
  int64_t d_rows;
  const int32_t* positions; /* [tokens, topk] */
  const void* weights;      /* [tokens, topk] FP32 or BF16 */
  nvfp4_dtype weights_dtype;
  int64_t tokens, topk, n;
  void* out;                /* [tokens, n] */
  nvfp4_dtype out_dtype;
  int64_t out_row_stride;   /* elements; 0: n */
} nvfp4_moe_combine_args;
nvfp4_status nvfp4_jit_moe_combine(const nvfp4_moe_combine_args* args, CUstream stream);
nvfp4_status nvfp4_jit_prepack(const nvfp4_prepack_args* args, CUstream stream);
/* Bytes of a prepacked weight [n, k] (-1: bad input). */
int64_t nvfp4_jit_prepacked_bytes(int64_t n, int64_t k);

/* A ModelOpt NVFP4 linear layer as its checkpoint stores it, and what gemm takes for it
 * (jit.hpp: ModelOptLinear, Nvfp4Linear). */
typedef struct nvfp4_modelopt_linear {
  int64_t n, k;                      /* out_features, in_features (k: a multiple of 32) */
  const void* weight;                /* uint8 [n, k/2], 16-byte aligned */
  const void* weight_scale;          /* float8_e4m3fn [n, k/16], 16-byte aligned */
  nvfp4_global_scale weight_scale_2; /* the weight's global scale (ModelOpt: one scalar) */
  nvfp4_global_scale input_scale;    /* the activations' static global scale (W4A4) */
} nvfp4_modelopt_linear;
typedef struct nvfp4_linear {
  nvfp4_tensor weight;             /* nvfp4_gemm_args.b */
  nvfp4_global_scale input_scale;  /* W4A4: the quantizers' given global scale */
  int prepacked;                   /* nvfp4_gemm_args.b_prepacked */
} nvfp4_linear;
/* The loader's default (jit.hpp: load_modelopt): the layer checked, then on sm_90a prepacked into
 * `prepacked` (nvfp4_jit_prepacked_bytes(n, k) bytes, 16-byte aligned) on `stream`, elsewhere
 * described as stored (`prepacked` untouched). swiglu_interleave: nvfp4_prepack_args' (-1: none).
 * Writes *out. */
nvfp4_status nvfp4_jit_load_modelopt(const nvfp4_modelopt_linear* layer, void* prepacked, CUstream stream,
                                     int64_t swiglu_interleave, nvfp4_linear* out);
/* Bytes of an E4M3 scale tensor for [rows, k] in `layout`, padding included (-1: bad input). */
int64_t nvfp4_jit_scale_bytes(nvfp4_scale_layout layout, int64_t rows, int64_t k);

/* Each fills *args with the C++ API's defaults: every global scale 1 (host value), alpha 1,
 * eps 1e-6, BF16 dtypes, linear scales (convert_scales: linear -> swizzled128x4), contiguous
 * groups, everything else 0 or NULL. Start from these: a zero-filled struct is refused where
 * 0 is no valid choice (a global scale or alpha of 0 would compute zeros without a word). */
void nvfp4_dequantize_args_init(nvfp4_dequantize_args* args);
void nvfp4_quantize_args_init(nvfp4_quantize_args* args);
void nvfp4_rmsnorm_quantize_args_init(nvfp4_rmsnorm_quantize_args* args);
void nvfp4_mhc_rmsnorm_quantize_args_init(nvfp4_mhc_rmsnorm_quantize_args* args);
void nvfp4_swiglu_quantize_args_init(nvfp4_swiglu_quantize_args* args);
void nvfp4_moe_stage_args_init(nvfp4_moe_stage_args* args);
void nvfp4_convert_scales_args_init(nvfp4_convert_scales_args* args);
void nvfp4_gemm_args_init(nvfp4_gemm_args* args);
void nvfp4_grouped_gemm_args_init(nvfp4_grouped_gemm_args* args);
void nvfp4_prepack_args_init(nvfp4_prepack_args* args);
void nvfp4_modelopt_linear_init(nvfp4_modelopt_linear* layer);
void nvfp4_moe_route_args_init(nvfp4_moe_route_args* args);
void nvfp4_moe_combine_args_init(nvfp4_moe_combine_args* args);

/* Warming up (jit.hpp: nvfp4::jit::ensure_loaded): compile or read from the disk cache and load
 * into the current context every kernel the call with these args would launch, launching
 * nothing and reading no pointer (pointers may be NULL; shapes, dtypes, layouts, flags and
 * M choose the kernels). Then a call under CUDA graph capture finds its kernels loaded. */
nvfp4_status nvfp4_jit_ensure_loaded_dequantize(const nvfp4_dequantize_args* args);
nvfp4_status nvfp4_jit_ensure_loaded_quantize(const nvfp4_quantize_args* args);
nvfp4_status nvfp4_jit_ensure_loaded_rmsnorm_quantize(const nvfp4_rmsnorm_quantize_args* args);
nvfp4_status nvfp4_jit_ensure_loaded_mhc_rmsnorm_quantize(const nvfp4_mhc_rmsnorm_quantize_args* args);
nvfp4_status nvfp4_jit_ensure_loaded_swiglu_quantize(const nvfp4_swiglu_quantize_args* args);
nvfp4_status nvfp4_jit_ensure_loaded_moe_stage(const nvfp4_moe_stage_args* args);
nvfp4_status nvfp4_jit_ensure_loaded_convert_scales(const nvfp4_convert_scales_args* args);
nvfp4_status nvfp4_jit_ensure_loaded_gemm(const nvfp4_gemm_args* args);
nvfp4_status nvfp4_jit_ensure_loaded_grouped_gemm(const nvfp4_grouped_gemm_args* args);
nvfp4_status nvfp4_jit_ensure_loaded_prepack(const nvfp4_prepack_args* args);
nvfp4_status nvfp4_jit_ensure_loaded_moe_route(const nvfp4_moe_route_args* args);
nvfp4_status nvfp4_jit_ensure_loaded_moe_combine(const nvfp4_moe_combine_args* args);

/* Prewarm (nvfp4::jit::prewarm, `nvfp4-jit prewarm`): every kernel of these weight shapes
 * compiled into the disk cache, in threads; no GPU needed when archs are given. */
typedef struct nvfp4_prewarm_args {
  const char* manifest;  /* a built-in manifest ("llama-3.1-8b", ...) or a manifest file, or NULL */
  const int64_t* shapes; /* num_shapes x {n, k, groups} (host), or NULL */
  int64_t num_shapes;
  const char* archs;     /* comma-separated, e.g. "sm_90a,sm_100a" (no empty names); NULL or "": the current context's device, else device 0 */
  int32_t sm_count;      /* GEMM tiles for this many SMs; 0: the current device's, else 132 */
  int32_t threads;       /* 1 to 256 (never more than kernels); 0: one per core */
  /* the variants a deployment runs, as a manifest line's fields (NULL: the defaults), e.g.
   * "a-dtype=fp16 d-dtype=fp16,fp32 bias=bf16 b-layout=prepacked"; see nvfp4-jit prewarm --help */
  const char* variants;
  /* a ModelOpt NVFP4 checkpoint directory, or NULL: the GEMMs one rank of a tp x ep engine runs
   * (nvfp4_jit_model_shapes), besides the manifest's and shapes */
  const char* model;
  int32_t tp; /* tensor-parallel size, with model (init: 1) */
  int32_t ep; /* expert-parallel size, with model (init: 1) */
  /* non-zero: also load every kernel into the current device's context (compiling what the
   * cache lacks), so graph capture right after needs no eager warm-up call; archs then default
   * to the current device's and must include it, sm_count must be 0 or the device's */
  int32_t load;
} nvfp4_prewarm_args;
typedef struct nvfp4_prewarm_result {
  int64_t kernels, compiled, cached, failed;
  int64_t not_stored; /* compiled but not written to the cache */
  int64_t deferred;   /* another process was compiling them when reached */
  double seconds;
  int64_t loaded;     /* load: the current device's kernels now loaded in its context */
} nvfp4_prewarm_result;
void nvfp4_prewarm_args_init(nvfp4_prewarm_args* args);
/* NVFP4_OK when every kernel is in the cache; NVFP4_COMPILE_FAILED when some failed,
 * NVFP4_CACHE_ERROR when some were not stored (the message says which and why). `result`
 * (may be NULL) receives the counts either way. */
nvfp4_status nvfp4_jit_prewarm(const nvfp4_prewarm_args* args, nvfp4_prewarm_result* result);
/* The weight shapes one rank of a tp x ep engine runs for the checkpoint in `model_dir`
 * (nvfp4::jit::model_shapes; names in C++ and `nvfp4-jit prewarm --model DIR --shapes`):
 * `*count` receives how many there are, and the first min(count, capacity) are written to
 * `shapes` as {n, k, groups} triples (host; NULL when capacity is 0), nvfp4_prewarm_args.shapes'
 * layout. */
nvfp4_status nvfp4_jit_model_shapes(const char* model_dir, int32_t tp, int32_t ep, int64_t* shapes, int64_t capacity,
                                    int64_t* count);

#ifdef __cplusplus
}
#endif
#if defined(__GNUC__)
#pragma GCC visibility pop
#endif
#endif /* NVFP4_JIT_H */
