// The grouped W4A16 GEMM's row gather (templates/gather_rows.cuh): A's rows copied through
// moe_route's row_index into the workspace in sorted order, for the GEMM to read as sorted rows.
#pragma once
#include <cstdint>
#include <string_view>
#include <tuple>

#include "core/codegen.hpp"
#include "core/launcher.hpp"
#include "core/spec.hpp"
#include "nvfp4/jit.hpp"

namespace nvfp4::jit::detail {

struct GatherRowsSpec {
  static constexpr Op kOp = Op::gather_rows;
  static constexpr std::string_view kName = "GatherRowsSpec";
  static constexpr bool serves(Op op) { return op == kOp; }
  int64_t k = 0;
  DType a_dtype = DType::bf16;  // BF16 or FP16: the NaN a row outside A gets
  int threads = 0;
  template <class Self>
  static auto fields(Self& s) { return std::tie(s.k, s.a_dtype, s.threads); }
};

KernelSpec gather_rows_spec(Arch arch, int64_t k, DType a_dtype);
GeneratedKernel generate_gather_rows(const KernelSpec& spec);

// `rows` rows of k 16-bit values to `out` (row stride k): row r from A's row row_index[r] of
// a_rows (a_stride elements a row), by `function`, the kernel of gather_rows_spec.
void launch_gather_rows(CUfunction function, const void* a, int64_t a_stride, int64_t a_rows, const int32_t* row_index,
                        int64_t rows, void* out, CUstream stream);

}  // namespace nvfp4::jit::detail
