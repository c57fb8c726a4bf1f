// dequantize on the GPU: bit-exact against the CPU reference (itself checked against a
// float64 decode in the CPU tests) on fresh random data, with poisoned outputs.
#include <doctest/doctest.h>

#include <cstring>

#include "../dequantize_fixture.hpp"
#include "core/gpu_util.hpp"

using namespace nvfp4::jit;
using namespace nvfp4::jit::detail;

namespace {

struct Case {
  int64_t rows, k;
  DType out;
  ScaleLayout layout;
  int gscale;  // 0 host value, 1 device value, 2 device per row
  bool gather;
  int64_t pad_bytes, out_pad;  // extra bytes per packed row, extra elements per output row
};

void run_case(const Case& c, std::mt19937& rng) {
  testutil::HostNvfp4 t(c.rows, c.k, c.layout, rng, c.pad_bytes);
  const int64_t out_rows = c.gather ? c.rows + 3 : c.rows;
  std::vector<int32_t> idx(out_rows);
  for (auto& i : idx) i = int32_t(rng() % c.rows);
  if (c.gather) idx[1] = -5, idx[out_rows - 1] = int32_t(c.rows);  // out of range: NaN rows
  const int esize = c.out == DType::fp32 ? 4 : 2;
  const int64_t out_stride = c.k + c.out_pad;
  const size_t out_bytes = size_t(out_rows * out_stride * esize);

  DeviceBuffer packed = to_device(t.packed), scales = to_device(t.scales), row_scales = to_device(t.row_scales);
  DeviceBuffer d_idx = to_device(idx), out(out_bytes);
  const float one_scale = t.row_scales[0];
  DeviceBuffer scalar = to_device(std::vector<float>{one_scale});
  out.fill(0xEE);  // poison: every element written must differ from it

  DequantizeArgs a;
  a.src = {packed.get(), t.stride_bytes, scales.get(), c.layout, {}};
  if (c.gscale == 0) a.src.global_scale.value = one_scale;
  if (c.gscale == 1) a.src.global_scale.device_ptr = scalar.as<float>();
  if (c.gscale == 2) a.src.global_scale = {1.0f, row_scales.as<float>(), true};
  a.src_rows = c.rows;
  a.k = c.k;
  a.out = out.get();
  a.out_dtype = c.out;
  a.out_row_stride = out_stride;
  if (c.gather) a.row_indices = d_idx.as<int32_t>(), a.rows = out_rows;
  dequantize(a, nullptr);
  check_cu(driver().cuCtxSynchronize(), "kernel");
  std::vector<uint8_t> got(out_bytes);
  out.download(got.data(), out_bytes);

  std::vector<uint8_t> want(out_bytes, 0xEE);
  DequantizeArgs h = a;
  h.src.data = t.packed.data();
  h.src.scales = t.scales.data();
  if (c.gscale == 1) h.src.global_scale.device_ptr = &one_scale;
  if (c.gscale == 2) h.src.global_scale.device_ptr = t.row_scales.data();
  if (c.gather) h.row_indices = idx.data();
  h.out = want.data();
  cpu::dequantize(h);
  for (size_t i = 0; i < out_bytes; i += esize)
    if (std::memcmp(&got[i], &want[i], esize) != 0) {
      const int64_t el = int64_t(i / esize);
      FAIL_CHECK("rows=" << c.rows << " k=" << c.k << " out=" << int(c.out) << " layout=" << int(c.layout)
                         << " gscale=" << c.gscale << " gather=" << c.gather << ": first wrong element (" << el / out_stride
                         << ", " << el % out_stride << ")");
      return;
    }
  // Nothing left unwritten inside rows (the poison would survive), padding left alone.
  for (int64_t r = 0; r < out_rows; ++r)
    for (int64_t e = c.k; e < out_stride; ++e) REQUIRE(got[(r * out_stride + e) * esize] == 0xEE);
}

}  // namespace

TEST_SUITE("gpu_dequantize") {
  TEST_CASE("bit-exact with the CPU reference over shapes, dtypes, layouts, scales, gathers and strides") {
    std::mt19937 rng(std::random_device{}());
    int cases = 0;
    for (auto [rows, k] : {std::pair<int64_t, int64_t>{1, 16}, {7, 48}, {129, 2880}, {100, 8192}, {1000, 4096}, {300, 8192}})
      for (DType out : {DType::bf16, DType::fp16, DType::fp32})
        for (ScaleLayout layout : {ScaleLayout::linear, ScaleLayout::swizzled128x4})
          for (int gscale : {0, 1, 2})
            for (bool gather : {false, true}) {
              const int64_t pad = (cases % 3 == 0) ? 16 : 0, out_pad = (cases % 4 == 1) ? 8 : 0;
              run_case({rows, k, out, layout, gscale, gather, pad, out_pad}, rng);
              ++cases;
            }
    MESSAGE(cases << " dequantize cases bit-exact");
  }

  TEST_CASE("padded source rows (40-byte stride) and a gather stay exact") {
    std::mt19937 rng(std::random_device{}());
    run_case({33, 64, DType::bf16, ScaleLayout::linear, 0, false, 8, 0}, rng);
    run_case({33, 64, DType::fp16, ScaleLayout::swizzled128x4, 2, true, 4, 8}, rng);
  }
}
