// Typed kernel specs as the kernel key: every op's spec writes every field it has into the key
// (a field left out of `fields()` fails here), a change of any field changes the key, and two
// ops whose fields hold the same bytes never share a key.
#include <doctest/doctest.h>

#include <cstddef>
#include <tuple>
#include <type_traits>
#include <utility>

#include "core/error.hpp"
#include "ops/convert_scales_op.hpp"
#include "ops/dequantize_op.hpp"
#include "ops/gemm/gemm_spec.hpp"
#include "ops/moe_route_op.hpp"
#include "ops/prepack_op.hpp"
#include "ops/quantize_op.hpp"
#include "ops/row_quantize_op.hpp"

using namespace nvfp4::jit;
using namespace nvfp4::jit::detail;

namespace {

// Converts to anything: counts an aggregate's members by how many initialize it.
struct Any {
  template <class U>
  operator U() const;
};

template <class T, class... A>
constexpr size_t member_count() {
  if constexpr (requires { T{A{}..., Any{}}; })
    return member_count<T, A..., Any>();
  else
    return sizeof...(A);
}

template <class T>
constexpr size_t field_count() {
  return std::tuple_size_v<decltype(T::fields(std::declval<T&>()))>;
}

// `field` changed to another value of its type.
template <class F>
void change(F& field) {
  if constexpr (std::is_same_v<F, bool>)
    field = !field;
  else if constexpr (std::is_enum_v<F>)
    field = F(std::underlying_type_t<F>(field) + 1);
  else
    field = F(field + 1);
}

// For each field of `spec`: the spec with that field changed has another key (and hash).
template <class T>
void check_every_field_keyed(Op op, const T& spec) {
  const KernelSpec base = KernelSpec::of(Arch::sm_90a, op, spec);
  T back = base.as<T>(), written = spec;
  CHECK(T::fields(back) == T::fields(written));  // read back as written
  [&]<size_t... I>(std::index_sequence<I...>) {
    (
        [&] {
          T changed = spec;
          change(std::get<I>(T::fields(changed)));
          const KernelSpec key = KernelSpec::of(Arch::sm_90a, op, changed);
          CAPTURE(to_string(op));
          CAPTURE(I);
          CHECK_FALSE(key == base);
          CHECK(KernelSpecHash{}(key) != KernelSpecHash{}(base));
        }(),
        ...);
  }(std::make_index_sequence<field_count<T>()>());
}

}  // namespace

TEST_SUITE("spec") {
  TEST_CASE("every op spec writes every member it has into the key") {
    CHECK(field_count<DequantizeSpec>() == member_count<DequantizeSpec>());
    CHECK(field_count<QuantizeSpec>() == member_count<QuantizeSpec>());
    CHECK(field_count<RowAmaxSpec>() == member_count<RowAmaxSpec>());
    CHECK(field_count<AmaxFinalizeSpec>() == member_count<AmaxFinalizeSpec>());
    CHECK(field_count<ConvertScalesSpec>() == member_count<ConvertScalesSpec>());
    CHECK(field_count<PrepackSpec>() == member_count<PrepackSpec>());
    CHECK(field_count<RowQuantizeSpec>() == member_count<RowQuantizeSpec>());
    CHECK(field_count<MoeRouteSpec>() == member_count<MoeRouteSpec>());
    CHECK(field_count<MoeCombineSpec>() == member_count<MoeCombineSpec>());
    CHECK(field_count<GemmTile>() == member_count<GemmTile>());
    // the GEMM's: its members but arch (KernelSpec's own) and the tile, and the tile's
    CHECK(field_count<GemmSpec>() == member_count<GemmSpec>() - 2 + member_count<GemmTile>());
  }

  TEST_CASE("a change of any field of any op's spec changes the key") {
    check_every_field_keyed(Op::dequantize, DequantizeSpec{4096, DType::bf16, ScaleLayout::linear, 256, 4});
    check_every_field_keyed(Op::quantize, QuantizeSpec{4096, DType::bf16, ScaleLayout::linear, 256});
    check_every_field_keyed(Op::row_amax, RowAmaxSpec{4096, DType::bf16, false, 256});
    check_every_field_keyed(Op::amax_finalize, AmaxFinalizeSpec{32});
    check_every_field_keyed(Op::convert_scales, ConvertScalesSpec{4096, ScaleLayout::linear, ScaleLayout::swizzled128x4, 256});
    check_every_field_keyed(Op::prepack, PrepackSpec{4096, ScaleLayout::linear, 256});
    check_every_field_keyed(Op::moe_route, MoeRouteSpec{128, false, false, 256});
    check_every_field_keyed(Op::moe_combine, MoeCombineSpec{DType::bf16, DType::fp32, DType::bf16, 8, 128});
    const RowQuantizeSpec row{4096, DType::bf16, DType::bf16, ScaleLayout::linear, 1, 0, 256, 128, 1, 0};
    for (Op op : {Op::rmsnorm_quantize, Op::swiglu_quantize, Op::moe_stage, Op::mhc_rmsnorm_quantize})
      check_every_field_keyed(op, row);
    GemmSpec gemm;
    gemm.n = 4096, gemm.k = 4096, gemm.a_dtype = uint8_t(DType::bf16), gemm.out_dtype = uint8_t(DType::bf16);
    gemm.tile = GemmTile{128, 128, 128, 384, 4, 1, 1};
    check_every_field_keyed(Op::gemm, gemm);
    // the arch is KernelSpec's own
    CHECK_FALSE(KernelSpec::of(Arch::sm_90a, gemm) == KernelSpec::of(Arch::sm_100a, gemm));
    gemm.arch = Arch::sm_100a;
    CHECK(gemm_spec_of(gemm_key(gemm)) == gemm);
  }

  TEST_CASE("ops whose fields hold the same bytes have different keys; a spec read as another op's throws") {
    const RowQuantizeSpec row{4096, DType::bf16, DType::bf16, ScaleLayout::linear, 1, 0, 256, 128, 1, 0};
    const KernelSpec rms = KernelSpec::of(Arch::sm_90a, Op::rmsnorm_quantize, row);
    const KernelSpec swiglu = KernelSpec::of(Arch::sm_90a, Op::swiglu_quantize, row);
    CHECK(std::equal(std::begin(rms.payload), std::end(rms.payload), std::begin(swiglu.payload)));
    CHECK_FALSE(rms == swiglu);
    CHECK(KernelSpecHash{}(rms) != KernelSpecHash{}(swiglu));
    // dequantize's and quantize's first four fields: the same k, dtype, layout and threads
    const KernelSpec dq = KernelSpec::of(Arch::sm_90a, DequantizeSpec{4096, DType::bf16, ScaleLayout::linear, 256, 0});
    const KernelSpec q = KernelSpec::of(Arch::sm_90a, QuantizeSpec{4096, DType::bf16, ScaleLayout::linear, 256});
    CHECK(std::equal(std::begin(dq.payload), std::end(dq.payload), std::begin(q.payload)));
    CHECK_FALSE(dq == q);
    CHECK(KernelSpecHash{}(dq) != KernelSpecHash{}(q));
    CHECK_THROWS_AS(q.as<DequantizeSpec>(), Error);
    CHECK_THROWS_AS(KernelSpec::of(Arch::sm_90a, Op::gemm, row), Error);
  }

  TEST_CASE("a spec describes itself and writes its sidecar JSON from its own fields") {
    const KernelSpec dq = dequantize_spec(Arch::sm_90a, 4096, DType::fp16, ScaleLayout::swizzled128x4);
    CHECK(dq.describe() == "dequantize arch=sm_90a k=4096 out_dtype=fp16 scale_layout=sw128x4 threads=256 loads_per_thread=4");
    CHECK(dq.to_json() ==
          R"({"op":"dequantize","arch":"sm_90a","k":4096,"out_dtype":"fp16","scale_layout":"sw128x4","threads":256,"loads_per_thread":4})");
  }
}
