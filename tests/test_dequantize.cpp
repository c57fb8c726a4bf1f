// dequantize: argument validation (no GPU needed) and the CPU reference.
#include <doctest/doctest.h>

#include <cstring>

#include "core/driver.hpp"
#include "dequantize_fixture.hpp"

using namespace nvfp4::jit;

namespace {

// Valid arguments over fake, well-aligned device addresses: validation runs before any
// device access, so bad-input tests need no GPU.
DequantizeArgs valid_args() {
  DequantizeArgs a;
  a.src.data = reinterpret_cast<void*>(0x10000);
  a.src.scales = reinterpret_cast<void*>(0x20000);
  a.src_rows = 4;
  a.k = 64;
  a.out = reinterpret_cast<void*>(0x30000);
  return a;
}

void expect_error(const DequantizeArgs& a, Status status, const std::string& text) {
  try {
    dequantize(a, nullptr);
    FAIL("expected an error mentioning: " << text);
  } catch (const Error& e) {
    CAPTURE(e.what());
    CHECK(e.status() == status);
    CHECK(std::string(e.what()).find(text) != std::string::npos);
    CHECK(std::string(e.what()).find("nvfp4::jit::dequantize") == 0);
  }
}

// Round to 8 significant bits, ties to even: BF16 from its definition.
float bf16_round(float x) {
  if (x == 0 || !std::isfinite(x)) return x;
  const int e = std::ilogb(x);
  return float(std::ldexp(std::nearbyint(std::ldexp(double(x), 7 - e)), e - 7));
}

}  // namespace

TEST_SUITE("dequantize") {
  TEST_CASE("bad arguments get an error naming the argument") {
    DequantizeArgs a = valid_args();
    SUBCASE("k zero") { a.k = 0; expect_error(a, Status::invalid_argument, "k = 0 must be a positive multiple of 16"); }
    SUBCASE("k not a multiple of 16") { a.k = 40; expect_error(a, Status::invalid_argument, "k = 40"); }
    SUBCASE("negative rows") { a.src_rows = -1; expect_error(a, Status::invalid_argument, "src_rows = -1 is negative"); }
    SUBCASE("null data") { a.src.data = nullptr; expect_error(a, Status::invalid_argument, "src.data is null"); }
    SUBCASE("null scales") { a.src.scales = nullptr; expect_error(a, Status::invalid_argument, "src.scales is null"); }
    SUBCASE("null out") { a.out = nullptr; expect_error(a, Status::invalid_argument, "out is null"); }
    SUBCASE("misaligned data") { a.src.data = reinterpret_cast<void*>(0x10002); expect_error(a, Status::invalid_argument, "src.data = 0x10002 is not 4-byte aligned"); }
    SUBCASE("misaligned packed stride") { a.src.row_stride_bytes = 34; expect_error(a, Status::invalid_argument, "src.row_stride_bytes = 34 must be a multiple of 4"); }
    SUBCASE("misaligned out") { a.out = reinterpret_cast<void*>(0x30008); expect_error(a, Status::invalid_argument, "out = 0x30008 is not 16-byte aligned"); }
    SUBCASE("short packed stride") { a.src.row_stride_bytes = 16; expect_error(a, Status::invalid_argument, "src.row_stride_bytes = 16 is less than k/2 = 32"); }
    SUBCASE("short out stride") { a.out_row_stride = 32; expect_error(a, Status::invalid_argument, "out_row_stride = 32 is less than k = 64"); }
    SUBCASE("unaligned out stride") { a.out_row_stride = 68; expect_error(a, Status::invalid_argument, "out_row_stride = 68 elements"); }
    SUBCASE("nvfp4 output") { a.out_dtype = DType::nvfp4; expect_error(a, Status::unsupported, "out_dtype = nvfp4 is not supported"); }
    SUBCASE("bad dtype") { a.out_dtype = static_cast<DType>(42); expect_error(a, Status::unsupported, "out_dtype = 42"); }
    SUBCASE("bad layout") { a.src.scale_layout = static_cast<ScaleLayout>(7); expect_error(a, Status::invalid_argument, "src.scale_layout = 7"); }
    SUBCASE("per-row scale without pointer") { a.src.global_scale.per_row = true; expect_error(a, Status::invalid_argument, "src.global_scale.per_row is set but src.global_scale.device_ptr is null"); }
    SUBCASE("non-finite scale") { a.src.global_scale.value = INFINITY; expect_error(a, Status::invalid_argument, "src.global_scale.value = inf"); }
    SUBCASE("rows without indices") { a.rows = 3; expect_error(a, Status::invalid_argument, "rows = 3 differs from src_rows = 4"); }
    SUBCASE("gather from nothing") { a.src_rows = 0; a.rows = 2; a.row_indices = reinterpret_cast<const int32_t*>(0x40000); expect_error(a, Status::invalid_argument, "src_rows is 0"); }
    SUBCASE("misaligned indices") { a.rows = 2; a.row_indices = reinterpret_cast<const int32_t*>(0x40002); expect_error(a, Status::invalid_argument, "row_indices = 0x40002 is not 4-byte aligned"); }
  }

  TEST_CASE("zero rows is a no-op that touches nothing") {
    DequantizeArgs a = valid_args();
    a.src_rows = 0;
    CHECK_NOTHROW(dequantize(a, nullptr));
  }

  TEST_CASE("without a driver, valid arguments fail with the no-device status, not a crash") {
    if (nvfp4::jit::detail::driver_available()) return;
    try {
      dequantize(valid_args(), nullptr);
      FAIL("expected an error");
    } catch (const Error& e) {
      CHECK(e.status() == Status::no_device);
      CHECK(std::string(e.what()).find("libcuda.so.1") != std::string::npos);
    }
  }

  TEST_CASE("CPU reference equals the float64 decode, rounded once, for every output type") {
    std::mt19937 rng(std::random_device{}());
    for (ScaleLayout layout : {ScaleLayout::linear, ScaleLayout::swizzled128x4})
      for (DType dt : {DType::fp32, DType::bf16, DType::fp16}) {
        testutil::HostNvfp4 t(37, 96, layout, rng);
        std::vector<uint8_t> out(37 * 96 * 4, 0xAB);
        DequantizeArgs a;
        a.src = {t.packed.data(), 0, t.scales.data(), layout, {0.75f, nullptr, false}};
        a.src_rows = 37;
        a.k = 96;
        a.out = out.data();
        a.out_dtype = dt;
        cpu::dequantize(a);
        for (int64_t r = 0; r < 37; ++r)
          for (int64_t e = 0; e < 96; ++e) {
            const double exact = t.value(r, e) * 0.75;  // exact in double
            const float as_float = float(exact);         // one rounding
            const size_t i = r * 96 + e;
            float got;
            if (dt == DType::fp32) {
              std::memcpy(&got, &out[i * 4], 4);
            } else {
              uint16_t h;
              std::memcpy(&h, &out[i * 2], 2);
              if (dt == DType::bf16) {
                const uint32_t u = uint32_t(h) << 16;
                std::memcpy(&got, &u, 4);
              } else {
                _Float16 f16;
                std::memcpy(&f16, &h, 2);
                got = float(f16);
              }
            }
            const float want = dt == DType::fp32 ? as_float : dt == DType::bf16 ? bf16_round(as_float) : float(_Float16(as_float));
            if (got != want) {
              FAIL_CHECK("rows=37 k=96 first wrong element (" << r << ", " << e << "): got " << got << " want " << want);
              return;
            }
          }
      }
  }

  TEST_CASE("CPU reference gathers rows and fills out-of-range indices with NaN") {
    std::mt19937 rng(std::random_device{}());
    testutil::HostNvfp4 t(5, 32, ScaleLayout::linear, rng);
    const int32_t idx[3] = {4, -1, 0};
    const float row_scale[5] = {1, 2, 3, 4, 5};
    std::vector<float> out(3 * 32);
    DequantizeArgs a;
    a.src = {t.packed.data(), 0, t.scales.data(), ScaleLayout::linear, {1.0f, row_scale, true}};
    a.src_rows = 5;
    a.k = 32;
    a.out = out.data();
    a.out_dtype = DType::fp32;
    a.row_indices = idx;
    a.rows = 3;
    cpu::dequantize(a);
    for (int e = 0; e < 32; ++e) {
      CHECK(out[e] == float(t.value(4, e) * 5));
      CHECK(std::isnan(out[32 + e]));
      CHECK(out[64 + e] == float(t.value(0, e) * 1));
    }
  }
}
