#include <doctest/doctest.h>

#include <random>

#include "core/gpu_util.hpp"
#include "nvfp4/jit.hpp"

using namespace nvfp4::jit;
using namespace nvfp4::jit::detail;

TEST_SUITE("gpu_convert_scales") {
  TEST_CASE("both directions bit-identical with the CPU reference, padding included") {
    std::mt19937 rng(std::random_device{}());
    for (auto [rows, k] : {std::pair<int64_t, int64_t>{1, 16}, {129, 80}, {300, 7168}})
      for (ScaleLayout src_layout : {ScaleLayout::linear, ScaleLayout::swizzled128x4}) {
        const ScaleLayout dst_layout = src_layout == ScaleLayout::linear ? ScaleLayout::swizzled128x4 : ScaleLayout::linear;
        std::vector<uint8_t> src(scale_bytes(src_layout, rows, k));
        for (auto& b : src) b = uint8_t(rng() % 0x7F);
        const size_t dst_bytes = size_t(scale_bytes(dst_layout, rows, k));
        DeviceBuffer d_src = to_device(src), d_dst(dst_bytes);
        d_dst.fill(0xEE);
        convert_scales({d_src.get(), src_layout, d_dst.get(), dst_layout, rows, k}, nullptr);
        std::vector<uint8_t> got(dst_bytes), want(dst_bytes);
        d_dst.download(got.data(), dst_bytes);
        cpu::convert_scales({src.data(), src_layout, want.data(), dst_layout, rows, k});
        for (size_t i = 0; i < dst_bytes; ++i)
          if (got[i] != want[i]) {
            FAIL_CHECK("rows=" << rows << " k=" << k << " to layout " << int(dst_layout) << ": first wrong byte at " << i);
            break;
          }
      }
  }
}
