// The GEMM's fused SwiGLU epilogue (GemmEpilogue::swiglu) on sm_90a against float64 and the
// unfused chain (swiglu_case.hpp: the cases, the reference and its bounds): a gate_up weight
// stored in each row order prepack takes, prepacked into the 8-row interleave, dense and grouped.
#include "swiglu_case.hpp"

TEST_SUITE("gpu_gemm_swiglu") {
  TEST_CASE("gemm with the SwiGLU epilogue: dense, every stored gate / up order, ragged M, W4A16 and W4A4") {
    constexpr DType bf16 = DType::bf16, fp16 = DType::fp16, fp32 = DType::fp32, fp4 = DType::nvfp4;
    std::mt19937 rng(std::random_device{}());
    auto with = [](SwigluCase c, sm90::Tile t) {
      c.tile = t;
      return c;
    };
    const SwigluCase cases[] = {
        {1, 2048, 4096, 0},
        {16, 768, 2048, 8, bf16, bf16, 1},
        {100, 1440, 2880, 1, bf16, bf16, 2},
        {4096, 512, 1024, 0, fp16, fp16, 2, 0, GroupedLayout::contiguous, false, 8},
        {37, 256, 512, 8, bf16, fp32},
        {64, 512, 1024, 0, fp4, bf16, 1},
        {1, 1024, 2048, 1, fp4, bf16},
        // tiles: split-K (partial sums added before the activation), two k slices, three consumers
        with({3, 1024, 4096, 0}, {8, 1, 4, 2, 128}),
        with({3, 72, 2048, 8, bf16, fp32}, {8, 1, 4, 2, 256, 2}),
        with({130, 800, 1024, 1, bf16, bf16, 1}, {128, 3, 4, 1, 128}),
        with({300, 1000, 2880, 0, fp16, bf16}, {128, 2, 5, 2, 128}),
    };
    for (const SwigluCase& c : cases) run_swiglu_case(c, rng);
  }

  TEST_CASE("grouped_gemm with the SwiGLU epilogue: contiguous with empty experts, a row_index gather, masked") {
    constexpr DType bf16 = DType::bf16, fp4 = DType::nvfp4;
    std::mt19937 rng(std::random_device{}());
    const SwigluCase cases[] = {
        {300, 256, 1024, 0, bf16, bf16, 0, 8},
        {1, 768, 2048, 8, bf16, bf16, 1, 16},
        {16, 768, 2048, 0, bf16, bf16, 0, 16, GroupedLayout::contiguous, true},
        {200, 256, 1024, 1, fp4, bf16, 2, 8, GroupedLayout::contiguous, true},
        {40, 384, 1024, 0, bf16, bf16, 0, 4, GroupedLayout::masked},
        {1000, 512, 2048, 0, bf16, bf16, 0, 4},
    };
    for (const SwigluCase& c : cases) run_swiglu_case(c, rng);
  }

  TEST_CASE("a weight prepacked for the other epilogue gives NaN, not another row's products") {
    std::mt19937 rng(std::random_device{}());
    const int64_t m = 5, inter = 64, n = 2 * inter, k = 256;
    testutil::HostNvfp4 w(n, k, ScaleLayout::linear, rng);
    std::vector<uint16_t> a(size_t(m * k));
    std::normal_distribution<float> normal(0.0f, 1.0f);
    for (auto& v : a) v = nvfp4k::float_to_bf16_bits(normal(rng));
    DeviceBuffer d_a = to_device(a), d_w = to_device(w.packed), d_s = to_device(w.scales);
    DeviceBuffer d_pre(size_t(prepacked_bytes(n, k))), d_out(size_t(m * n * 2));
    for (const bool fused : {true, false}) {
      CAPTURE(fused);
      PrepackArgs p;  // prepacked for the other epilogue
      p.weight = {d_w.get(), 0, d_s.get(), ScaleLayout::linear, {}};
      p.n = n, p.k = k, p.out = d_pre.get(), p.swiglu_interleave = fused ? -1 : 0;
      prepack(p, nullptr);
      d_out.fill(0);
      GemmArgs g;
      g.m = m, g.n = n, g.k = k, g.a = d_a.get();
      g.b = {d_pre.get(), 0, nullptr, ScaleLayout::linear, {1.0f, nullptr, false}};
      g.b_prepacked = true, g.d = d_out.get();
      g.epilogue = fused ? GemmEpilogue::swiglu : GemmEpilogue::none;
      gemm(g, nullptr);
      check_cu(driver().cuCtxSynchronize(), "gemm on a weight prepacked for the other epilogue");
      std::vector<uint16_t> got(size_t(m * (fused ? inter : n)));
      d_out.download(got.data(), got.size() * 2);
      const auto number = std::find_if(got.begin(), got.end(), [](uint16_t v) { return (v & 0x7F80) != 0x7F80 || !(v & 0x7F); });
      if (number != got.end())
        FAIL_CHECK("element " << (number - got.begin()) << " is " << nvfp4k::bf16_bits_to_float(*number) << ", not NaN");
    }
  }
}
