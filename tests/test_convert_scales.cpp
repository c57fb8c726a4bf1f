// Scale-layout conversion: the CPU reference, round trips and validation (no GPU needed).
#include <doctest/doctest.h>

#include <random>
#include <vector>

#include "common/scale_layout.cuh"
#include "nvfp4/jit.hpp"

using namespace nvfp4::jit;

TEST_SUITE("convert_scales") {
  TEST_CASE("linear -> swizzled128x4 -> linear is the identity; padding is zero") {
    std::mt19937 rng(std::random_device{}());
    for (auto [rows, k] : {std::pair<int64_t, int64_t>{1, 16}, {129, 80}, {300, 4096}}) {
      CAPTURE(rows);
      CAPTURE(k);
      std::vector<uint8_t> lin(rows * k / 16), back(lin.size(), 0xEE);
      for (auto& b : lin) b = uint8_t(1 + rng() % 0x7E);  // never 0: padding must stand out
      std::vector<uint8_t> sw(scale_bytes(ScaleLayout::swizzled128x4, rows, k), 0xEE);
      cpu::convert_scales({lin.data(), ScaleLayout::linear, sw.data(), ScaleLayout::swizzled128x4, rows, k});
      cpu::convert_scales({sw.data(), ScaleLayout::swizzled128x4, back.data(), ScaleLayout::linear, rows, k});
      CHECK(back == lin);
      size_t zeros = 0;
      for (uint8_t b : sw) zeros += b == 0;
      CHECK(zeros == sw.size() - lin.size());
      const int64_t r = rows - 1, kb = k / 16 - 1;
      CHECK(sw[nvfp4k::scale_offset_swizzled128x4(r, kb, k / 16)] == lin[r * (k / 16) + kb]);
    }
  }

  TEST_CASE("bad arguments get an error naming the argument") {
    ConvertScalesArgs a{reinterpret_cast<void*>(0x1000), ScaleLayout::linear, reinterpret_cast<void*>(0x2000),
                        ScaleLayout::swizzled128x4, 4, 64};
    ConvertScalesArgs b = a;
    b.k = 20;
    CHECK_THROWS_WITH_AS(convert_scales(b, nullptr), doctest::Contains("k = 20"), Error);
    b = a, b.dst = nullptr;
    CHECK_THROWS_WITH_AS(convert_scales(b, nullptr), doctest::Contains("dst is null"), Error);
    b = a, b.src_layout = static_cast<ScaleLayout>(3);
    CHECK_THROWS_WITH_AS(convert_scales(b, nullptr), doctest::Contains("src_layout = 3"), Error);
    b = a, b.rows = -2;
    CHECK_THROWS_WITH_AS(convert_scales(b, nullptr), doctest::Contains("rows = -2 is negative"), Error);
    CHECK(nvfp4_jit_convert_scales(nullptr, nullptr) == NVFP4_INVALID_ARGUMENT);
  }
}
