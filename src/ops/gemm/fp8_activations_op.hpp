// The W4A8 GEMM's activation pass (templates/fp8_activations.cuh): BF16/FP16 or NVFP4 A to E4M3
// per row, with each row's scale (NVFP4's global scale folded in), into the GEMM's workspace.
#pragma once
#include <cstdint>
#include <string_view>
#include <tuple>

#include "core/codegen.hpp"
#include "core/launcher.hpp"
#include "core/spec.hpp"
#include "nvfp4/jit.hpp"

namespace nvfp4::jit::detail {

struct Fp8ActivationsSpec {
  static constexpr Op kOp = Op::fp8_activations;
  static constexpr std::string_view kName = "Fp8ActivationsSpec";
  static constexpr bool serves(Op op) { return op == kOp; }
  int64_t k = 0;
  DType a_dtype = DType::bf16;
  int threads = 0;
  ScaleLayout a_scales = ScaleLayout::linear;  // NVFP4 A's block scales (linear for BF16 / FP16)
  template <class Self>
  static auto fields(Self& s) { return std::tie(s.k, s.a_dtype, s.threads, s.a_scales); }
};

// The pass for A of `a_dtype` (bf16, fp16 or nvfp4, whose scales are in `a_scales`).
KernelSpec fp8_activations_spec(Arch arch, int64_t k, DType a_dtype, ScaleLayout a_scales = ScaleLayout::linear);
GeneratedKernel generate_fp8_activations(const KernelSpec& spec);

// Bytes of the W4A8 workspace for `rows` rows of k: the E4M3 rows, then (16-byte aligned) one
// fp32 scale a row.
int64_t fp8_activation_bytes(int64_t rows, int64_t k);
inline int64_t fp8_row_scales_offset(int64_t rows, int64_t k) { return (rows * k + 15) / 16 * 16; }

// The rows the pass writes: `rows` of A in order (dense calls, contiguous groups); with
// row_index, row r from A's row row_index[r] of a_rows (contiguous groups gathered); with
// group_rows, masked groups of group_stride rows, each written up to its count on the device.
// group_ends: contiguous groups' ends, where NVFP4 A's global scale is one per group.
struct Fp8ActivationRows {
  int64_t rows = 0;
  const int32_t* row_index = nullptr;
  int64_t a_rows = 0;
  const int32_t* group_rows = nullptr;
  int64_t group_stride = 0;
  const int32_t* group_ends = nullptr;
  int32_t groups = 0;
};

// A (a_stride elements a row) to E4M3 at `workspace` and its row scales after them, for `rows`,
// by `function`, the kernel of fp8_activations_spec for k and A's dtype.
void launch_fp8_activations(CUfunction function, const void* a, int64_t a_stride, const Fp8ActivationRows& rows, int64_t k,
                            void* workspace, CUstream stream);
// NVFP4 A the same way, its global scale's source `gscale_mode` (nvfp4k::GlobalScaleCode:
// host, device, per row or per group) folded into the row scales.
void launch_fp8_activations(CUfunction function, const Nvfp4Tensor& a, int gscale_mode, const Fp8ActivationRows& rows,
                            int64_t k, void* workspace, CUstream stream);

}  // namespace nvfp4::jit::detail
