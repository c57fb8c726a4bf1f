// gemm on the GPU against a float64 reference of the decoded values: fresh random data each
// run, poisoned outputs (NaN bytes) so every element must be written, padded strides left
// untouched, every M bucket, ragged M and N, both scale layouts, host and device global
// scales, bias, alpha.
#include <algorithm>

#include "gemm_case.hpp"
#include "on_blackwell_backend.hpp"
#include "ops/gemm/dispatch.hpp"

TEST_SUITE("gpu_gemm") {
  TEST_CASE("gemm W4A16 against a float64 reference") {
    std::mt19937 rng(std::random_device{}());
    const Case cases[] = {
        // every M bucket (8 .. 256, several 256-row tiles), ragged M
        {1, 8192, 8192, DType::bf16, DType::fp32},
        {7, 2880, 2880, DType::bf16, DType::fp32, ScaleLayout::swizzled128x4},
        {16, 4096, 4096, DType::bf16, DType::bf16},
        {33, 2880, 8192, DType::bf16, DType::fp32},
        {64, 8192, 2880, DType::bf16, DType::bf16, ScaleLayout::swizzled128x4},
        {100, 2880, 2880, DType::bf16, DType::fp32},
        {129, 2880, 8192, DType::bf16, DType::fp32, ScaleLayout::swizzled128x4},
        {1000, 2880, 2880, DType::bf16, DType::fp32},
        {4096, 2880, 2880, DType::bf16, DType::bf16, ScaleLayout::swizzled128x4},
        // ragged N, tiny K, K tails (2880 = 22.5 k-tiles)
        {129, 8, 8192, DType::bf16, DType::fp32},
        {1, 8, 32, DType::bf16, DType::fp32},
        {64, 8192, 32, DType::bf16, DType::fp32, ScaleLayout::swizzled128x4},
        {300, 200, 96, DType::bf16, DType::fp32},
        // FP16 activations, FP16 output, device global scale, bias, alpha, padded strides
        {7, 2880, 2880, DType::fp16, DType::fp32, ScaleLayout::linear, true},
        {200, 1000, 2880, DType::fp16, DType::fp16, ScaleLayout::swizzled128x4, true, 2},
        {1, 4096, 4096, DType::bf16, DType::bf16, ScaleLayout::linear, true, 1, 8, 3, 0.5f},
        {129, 2880, 2880, DType::bf16, DType::fp32, ScaleLayout::swizzled128x4, false, 2, 16, 5, -2.0f},
        // subnormal block scales only, and a NaN block scale, through BF16 and FP16 operands
        {16, 2880, 2880, DType::bf16, DType::fp32, ScaleLayout::linear, false, 0, 0, 0, 1.0f, Case::subnormal},
        {200, 1000, 2880, DType::fp16, DType::fp32, ScaleLayout::swizzled128x4, false, 0, 0, 0, 1.0f, Case::subnormal},
        {1, 8192, 8192, DType::bf16, DType::bf16, ScaleLayout::linear, false, 0, 0, 0, 1.0f, Case::nan_row},
        {300, 200, 4096, DType::fp16, DType::fp32, ScaleLayout::swizzled128x4, false, 0, 0, 0, 1.0f, Case::nan_row},
    };
    for (const Case& c : cases) run_case(c, rng);
  }

  TEST_CASE("gemm W4A4 (NVFP4 activations) against a float64 reference") {
    std::mt19937 rng(std::random_device{}());
    const DType fp4 = DType::nvfp4;
    const Case cases[] = {
        {1, 8192, 8192, fp4, DType::fp32, ScaleLayout::linear, false, 0, 0, 0, 1.0f, Case::any, 0, false},
        {7, 2880, 2880, fp4, DType::fp32, ScaleLayout::swizzled128x4, true, 0, 0, 0, 1.0f, Case::any, 1, true},
        {64, 8192, 2880, fp4, DType::bf16, ScaleLayout::linear, false, 1, 0, 0, 0.5f, Case::any, 2, false},
        {129, 2880, 8192, fp4, DType::fp32, ScaleLayout::swizzled128x4, false, 2, 0, 8, 1.0f, Case::any, 2, true},
        {1000, 2880, 2880, fp4, DType::fp32, ScaleLayout::linear, true, 0, 0, 0, 1.0f, Case::any, 1, false},
        {4096, 2880, 2880, fp4, DType::bf16, ScaleLayout::swizzled128x4, false, 0, 0, 0, 1.0f, Case::any, 0, true},
        {300, 8, 96, fp4, DType::fp32, ScaleLayout::linear, false, 0, 0, 0, 1.0f, Case::subnormal, 2, false},
    };
    for (const Case& c : cases) run_case(c, rng);
  }
}

TEST_SUITE("gpu_gemm") {
  TEST_CASE("gemm on a prepacked weight: the same bits as on the weight as stored") {
    std::mt19937 rng(std::random_device{}());
    const DType bf16 = DType::bf16, fp16 = DType::fp16, fp32 = DType::fp32;
    const ScaleLayout lin = ScaleLayout::linear, sw = ScaleLayout::swizzled128x4;
    auto pre = [](Case c) {
      c.prepacked = true;
      return c;
    };
    const Case cases[] = {
        // every M bucket, both decode paths (whole tile for M <= 64, step by step above), split K
        pre({1, 8192, 8192, bf16, fp32}),
        pre({16, 4096, 4096, bf16, bf16, sw}),
        pre({64, 8192, 2880, bf16, bf16, sw}),
        pre({129, 2880, 8192, bf16, fp32, lin}),
        pre({1000, 2880, 2880, bf16, fp32, sw}),
        pre({4096, 4096, 4096, bf16, bf16}),
        // ragged N and K (rows padded to 128, k to 256), tiny K
        pre({7, 200, 2880, bf16, fp32, sw}),
        pre({300, 200, 96, bf16, fp32}),
        pre({1, 8, 32, bf16, fp32}),
        // FP16 operands, device global scale, bias, alpha, padded strides
        pre({7, 2880, 2880, fp16, fp32, lin, true}),
        pre({200, 1000, 2880, fp16, fp16, sw, true, 2, 0, 3, 0.5f}),
        // subnormal-only and NaN block scales, W4A4
        pre({16, 2880, 2880, bf16, fp32, lin, false, 0, 0, 0, 1.0f, Case::subnormal}),
        pre({200, 1000, 2880, fp16, fp32, sw, false, 0, 0, 0, 1.0f, Case::subnormal}),
        pre({1, 8192, 8192, bf16, bf16, lin, false, 0, 0, 0, 1.0f, Case::nan_row}),
        pre({300, 200, 4096, fp16, fp32, sw, false, 0, 0, 0, 1.0f, Case::nan_row}),
        pre({129, 2880, 8192, DType::nvfp4, fp32, sw, false, 2, 0, 8, 1.0f, Case::any, 2, true}),
    };
    for (const Case& c : cases) run_case(c, rng);
  }
}

TEST_SUITE("gpu_gemm") {
  // Tiles the tuner may pick that the heuristic does not: two k slices (each 64 rows decoded by
  // two warpgroups, half of every stage each) with and without split-K, both stage depths, both
  // weight layouts (prepacked ones checked bit for bit against the weight as stored).
  TEST_CASE("gemm with two k slices against a float64 reference") {
    std::mt19937 rng(std::random_device{}());
    const DType bf16 = DType::bf16, fp32 = DType::fp32;
    auto with = [](Case c, sm90::Tile t) {
      t.k_slices = 2;
      c.tile = t;
      return c;
    };
    const Case cases[] = {
        with({1, 8192, 8192, bf16, fp32, ScaleLayout::linear, false, 0, 0, 0, 1.0f, Case::any, 0, false, true},
             {8, 2, 4, 2, 256}),
        with({5, 200, 2880, bf16, fp32, ScaleLayout::swizzled128x4, true, 2, 0, 0, 1.0f, Case::nan_row, 0, false, true},
             {8, 1, 4, 1, 128}),
        with({16, 4096, 4096, DType::fp16, DType::bf16, ScaleLayout::linear, false, 1, 8, 3, 0.5f, Case::subnormal, 0,
              false, true},
             {16, 1, 6, 4, 256}),
        with({64, 1000, 2048, bf16, fp32, ScaleLayout::swizzled128x4}, {64, 2, 4, 1, 128}),
    };
    for (const Case& c : cases) run_case(c, rng);
  }

  TEST_CASE("gemm on 128-, 192- and 256-row tiles sharing M evenly, against a float64 reference") {
    std::mt19937 rng(std::random_device{}());
    const DType bf16 = DType::bf16, fp32 = DType::fp32;
    auto with = [](Case c, sm90::Tile t) {
      c.tile = t;
      return c;
    };
    const Case cases[] = {
        // the heuristic's tiles for M = 129..768 (160 to 224 rows, split or not; two of 128)
        {257, 2880, 4096, bf16, fp32},
        {440, 8192, 2880, bf16, DType::bf16, ScaleLayout::linear, false, 2},
        {513, 1000, 2880, bf16, fp32, ScaleLayout::swizzled128x4, false, 1},
        {200, 2880, 2880, DType::fp16, DType::bf16, ScaleLayout::linear, true, 0, 0, 0, 1.0f, Case::any, 0, false, true},
        // 257 rows as 136 + 121 on 256-row tiles, 300 as 3 x 100 on 128-row ones, split-K, prepacked
        with({257, 1000, 2880, bf16, fp32}, {256, 2, 3, 1, 128}),
        with({300, 2880, 2880, bf16, fp32, ScaleLayout::linear, false, 2, 8, 3, 0.5f, Case::any, 0, false, true},
             {128, 2, 5, 2, 128}),
        with({769, 200, 2880, bf16, fp32, ScaleLayout::swizzled128x4, false, 0, 0, 0, 1.0f, Case::nan_row},
             {192, 1, 3, 1, 128}),
        // the tile order both ways (gemm_tile_group): 6 row tiles of 224 rows at K = 8192 (21 MB
        // of activations: one row tile at a time), and 4 of 184 at K = 2880 (all together)
        with({1300, 200, 8192, bf16, fp32}, {256, 2, 3, 1, 128}),
        with({730, 1000, 2880, bf16, fp32, ScaleLayout::swizzled128x4}, {192, 2, 3, 1, 128}),
        // a split tail (gemm_split_tiles): 3 x 64 tiles of 100 x 128, on 132 SMs 132 whole
        // (66 clusters) and the last 60 split in two, the ragged weight tile among them
        with({300, 8100, 2880, bf16, fp32, ScaleLayout::swizzled128x4, true, 2}, {128, 2, 5, 2, 128}),
        with({300, 8100, 2880, DType::fp16, DType::bf16, ScaleLayout::linear, false, 0, 0, 0, 1.0f, Case::nan_row, 0,
              false, true},
             {128, 2, 5, 2, 128}),
        // D through TMA with padded rows (16-byte aligned strides): the boxes stop at N = 1000
        // (a part slab) and at each row tile's end; the padding stays untouched
        {300, 1000, 2880, bf16, DType::bf16, ScaleLayout::linear, false, 0, 0, 8},
        {257, 1000, 2880, DType::fp16, fp32, ScaleLayout::swizzled128x4, false, 2, 0, 4},
        // W4A4 with a global scale per row of A: each tile reads its own rows' scales
        {257, 1000, 2880, DType::nvfp4, fp32, ScaleLayout::linear, false, 0, 0, 0, 1.0f, Case::any, 2, true},
        // three consumers (192 weight rows a CTA) on a prepacked weight: 1000 = 5 x 192 + 40
        with({520, 1000, 2880, bf16, fp32, ScaleLayout::swizzled128x4, false, 2, 0, 0, 1.0f, Case::nan_row, 0, false, true},
             {192, 3, 3, 1, 128}),
        with({300, 2880, 4096, DType::fp16, DType::bf16, ScaleLayout::linear, true, 1, 8, 3, 0.5f, Case::any, 0, false,
              true},
             {160, 3, 4, 1, 128}),
    };
    for (const Case& c : cases) run_case(c, rng);
  }
}

TEST_SUITE("gpu_gemm") {
  // Small enough for compute-sanitizer (tools/gpu_check.sh runs memcheck and racecheck on it):
  // a one-step-group tile, a split-K cluster (n = 64, k = 2048 at M = 3), ragged K and N.
  TEST_CASE("gemm small shapes for the sanitizers") {
    std::mt19937 rng(std::random_device{}());
    const Case cases[] = {
        {3, 64, 2048, DType::bf16, DType::fp32},
        {7, 200, 96, DType::bf16, DType::fp32, ScaleLayout::swizzled128x4},
        {130, 72, 160, DType::fp16, DType::bf16, ScaleLayout::linear, true, 2},
        {9, 72, 160, DType::nvfp4, DType::fp32, ScaleLayout::swizzled128x4, false, 0, 0, 0, 1.0f, Case::any, 2, false},
        {3, 72, 2048, DType::bf16, DType::fp32, ScaleLayout::linear, false, 0, 0, 0, 1.0f, Case::any, 0, false, true},
        {130, 72, 160, DType::fp16, DType::bf16, ScaleLayout::swizzled128x4, true, 2, 0, 0, 1.0f, Case::any, 0, false, true},
        // a split tail: 140 tiles of 64 x 8 on 132 SMs, 66 clusters of two whole tiles, then
        // the last 8 split (ragged N among them)
        {3, 8900, 512, DType::bf16, DType::fp32, ScaleLayout::linear, false, 0, 0, 0, 1.0f, Case::any, 0, false, false,
         {8, 1, 4, 2, 128}},
        // two k slices (their partial sums meet in shared memory), with and without split-K
        {3, 72, 2048, DType::bf16, DType::fp32, ScaleLayout::linear, false, 0, 0, 0, 1.0f, Case::any, 0, false, true,
         {8, 1, 4, 2, 256, 2}},
        {9, 72, 160, DType::bf16, DType::fp32, ScaleLayout::swizzled128x4, false, 0, 0, 0, 1.0f, Case::any, 0, false,
         false, {16, 1, 4, 1, 128, 2}},
        // three 128-row tiles sharing 270 rows (96 each; the last box reads past M)
        {270, 72, 160, DType::bf16, DType::fp32, ScaleLayout::linear, false, 0, 0, 0, 1.0f, Case::any, 0, false, false,
         {128, 1, 4, 1, 128}},
        // three consumers on a prepacked weight, N = 200: a second CTA with 8 rows of it
        {130, 200, 160, DType::bf16, DType::fp32, ScaleLayout::linear, false, 0, 0, 0, 1.0f, Case::any, 0, false, true,
         {128, 3, 4, 1, 128}},
        // one consumer on 80 rows, 256-deep stages, a prepacked weight (a grouped test's tile)
        {130, 384, 1024, DType::bf16, DType::bf16, ScaleLayout::swizzled128x4, false, 0, 0, 0, 1.0f, Case::any, 0, false,
         true, {80, 1, 3, 1, 256}},
    };
    for (const Case& c : cases) run_case(c, rng);
  }
}

TEST_SUITE("gpu_gemm") {
  TEST_CASE("tune a small shape: the winner is recorded and the next gemm runs it, correctly") {
    std::mt19937 rng(std::random_device{}());
    GemmProblem problem;
    problem.n = 1000, problem.k = 4096;
    problem.d_dtype = DType::fp32;
    const TunedBucket tuned = tune_bucket_of_m5(problem);
    // the tile gemm's warm path now runs (the pointers only pass validation: nothing is launched)
    alignas(16) static unsigned char dummy[16];
    GemmArgs probe;
    probe.m = 5, probe.n = problem.n, probe.k = problem.k, probe.d_dtype = DType::fp32;
    probe.a = probe.b.data = probe.b.scales = probe.d = dummy;
    auto tile_of = [&](const GemmArgs& g) {
      return sm90::from_config(gemm_dispatch(current_device(), gemm_call(g, "test"), nullptr).spec.tile);
    };
    CHECK(sm90::describe(tile_of(probe)) == tuned.winner);
    run_case({5, 1000, 4096, DType::bf16, DType::fp32}, rng);
    // other buckets of the problem are untouched: still the heuristic's, trimmed to M's rows
    probe.m = 100;
    CHECK(tile_of(probe) == sm90::heuristic_tile(1000, 4096, 100, current_device().sm_count, false));
  }
}

TEST_SUITE("gpu_gemm") {
  // A ModelOpt layer served W4A4: activations quantized with input_scale, the weight as stored
  // (linear scales) or with its scales swizzled once by from_modelopt: the same GEMM bits,
  // and close to the W4A16 GEMM of the unquantized activations.
  TEST_CASE("ModelOpt layer: quantize with input_scale, W4A4 gemm; linear and swizzled scales agree bit for bit") {
    std::mt19937 rng(std::random_device{}());
    const int64_t m = 33, n = 1000, k = 2880;
    testutil::HostNvfp4 w(n, k, ScaleLayout::linear, rng);
    std::vector<uint16_t> x(size_t(m * k));
    std::normal_distribution<float> normal(0.0f, 1.0f);
    for (auto& h : x) h = nvfp4k::float_to_bf16_bits(normal(rng));
    float amax = 0;
    for (uint16_t h : x) amax = std::max(amax, std::fabs(nvfp4k::bf16_bits_to_float(h)));
    const float input_scale = amax / 2688.0f, weight_scale_2 = 1.0f / 512;

    DeviceBuffer d_w = to_device(w.packed), d_ws = to_device(w.scales), d_x = to_device(x),
                 d_in_scale = to_device(std::vector<float>{input_scale}),
                 d_sw(size_t(scale_bytes(ScaleLayout::swizzled128x4, n, k))), d_xq(size_t(m * k / 2)),
                 d_xs(size_t(scale_bytes(ScaleLayout::linear, m, k))), d_out1(size_t(m * n * 4)), d_out2(size_t(m * n * 4)),
                 d_out16(size_t(m * n * 4));
    ModelOptLinear layer;
    layer.n = n, layer.k = k, layer.weight = d_w.get(), layer.weight_scale = d_ws.get();
    layer.weight_scale_2.value = weight_scale_2;
    layer.input_scale.device_ptr = d_in_scale.as<float>();
    const Nvfp4Linear linear = from_modelopt(layer), swizzled = from_modelopt(layer, ScaleLayout::swizzled128x4, d_sw.get());

    QuantizeArgs q;
    q.in = d_x.get(), q.rows = m, q.k = k, q.out = d_xq.get(), q.scales = d_xs.get();
    q.global_scale = linear.input_scale;
    quantize(q, nullptr);

    GemmArgs g;
    g.m = m, g.n = n, g.k = k, g.a_dtype = DType::nvfp4, g.d_dtype = DType::fp32;
    g.a_fp4 = {d_xq.get(), 0, d_xs.get(), ScaleLayout::linear, linear.input_scale};
    g.b = linear.weight, g.d = d_out1.get();
    gemm(g, nullptr);
    g.b = swizzled.weight, g.d = d_out2.get();
    gemm(g, nullptr);
    GemmArgs g16 = g;
    g16.a_dtype = DType::bf16, g16.a = d_x.get(), g16.a_fp4 = {}, g16.d = d_out16.get();
    gemm(g16, nullptr);
    check_cu(driver().cuCtxSynchronize(), "ModelOpt pipeline");
    std::vector<float> o1(size_t(m * n)), o2(size_t(m * n)), o16(size_t(m * n));
    d_out1.download(o1.data(), o1.size() * 4);
    d_out2.download(o2.data(), o2.size() * 4);
    d_out16.download(o16.data(), o16.size() * 4);
    CHECK(std::memcmp(o1.data(), o2.data(), o1.size() * 4) == 0);
    double err2 = 0, ref2 = 0;
    for (size_t i = 0; i < o1.size(); ++i) {
      REQUIRE_MESSAGE(std::isfinite(o1[i]), "m=33 n=1000 k=2880: element " << i << " = " << o1[i]);
      err2 += double(o1[i] - o16[i]) * (o1[i] - o16[i]);
      ref2 += double(o16[i]) * o16[i];
    }
    // NVFP4 activations carry about 2^-3 relative rounding per element; summed over k with
    // random signs the GEMM's relative error stays near 0.1
    const double rel = std::sqrt(err2 / ref2);
    MESSAGE("W4A4 vs W4A16 on the same layer: relative Frobenius difference " << rel);
    CHECK(rel < 0.2);
  }

  // The loader's default on sm_90a: the weight prepacked at load (prepack's bytes, the CPU
  // reference's), the GEMM on it the same products as on the weight as stored (fp32 sums in
  // another order: a relative difference of fp32 rounding); elsewhere the weight as stored.
  TEST_CASE("load_modelopt: prepacked at load on sm_90a, the GEMM as on the weight as stored; a null buffer refused") {
    std::mt19937 rng(std::random_device{}());
    const int64_t n = 1000, k = 2880;
    testutil::HostNvfp4 w(n, k, ScaleLayout::linear, rng);
    DeviceBuffer d_w = to_device(w.packed), d_ws = to_device(w.scales), d_pp(size_t(prepacked_bytes(n, k)));
    d_pp.fill(0xFF);
    ModelOptLinear layer;
    layer.n = n, layer.k = k, layer.weight = d_w.get(), layer.weight_scale = d_ws.get();
    layer.weight_scale_2.value = 1.0f / 256;
    const bool hopper = current_device().arch == Arch::sm_90a;
    const Nvfp4Linear stored = from_modelopt(layer), loaded = load_modelopt(layer, d_pp.get(), nullptr);
    check_cu(driver().cuCtxSynchronize(), "load_modelopt");
    CHECK(loaded.prepacked == hopper);
    CHECK(loaded.weight.data == (hopper ? d_pp.get() : d_w.get()));
    CHECK(loaded.weight.global_scale.value == layer.weight_scale_2.value);
    if (hopper) {
      std::vector<uint8_t> got(size_t(prepacked_bytes(n, k))), want(got.size());
      d_pp.download(got.data(), got.size());
      PrepackArgs pa;
      pa.weight = stored.weight, pa.weight.data = w.packed.data(), pa.weight.scales = w.scales.data();
      pa.n = n, pa.k = k, pa.out = want.data();
      cpu::prepack(pa);
      CHECK(got == want);
      try {
        load_modelopt(layer, nullptr, nullptr);
        FAIL("accepted a null prepacked buffer");
      } catch (const Error& e) {
        CHECK(std::string(e.what()).find("nvfp4::jit::load_modelopt: prepacked is null") == 0);
      }
    }
    for (int64_t m : {1, 40}) {
      CAPTURE(m);
      std::vector<uint16_t> x(size_t(m * k));
      std::normal_distribution<float> normal(0.0f, 1.0f);
      for (auto& h : x) h = nvfp4k::float_to_bf16_bits(normal(rng));
      DeviceBuffer d_x = to_device(x), d_stored(size_t(m * n * 4)), d_loaded(size_t(m * n * 4));
      d_loaded.fill(0xFF);
      GemmArgs g;
      g.m = m, g.n = n, g.k = k, g.a = d_x.get(), g.d_dtype = DType::fp32;
      g.b = stored.weight, g.d = d_stored.get();
      gemm(g, nullptr);
      g.b = loaded.weight, g.b_prepacked = loaded.prepacked, g.d = d_loaded.get();
      gemm(g, nullptr);
      check_cu(driver().cuCtxSynchronize(), "load_modelopt gemm");
      std::vector<float> a(size_t(m * n)), b(a.size());
      d_stored.download(a.data(), a.size() * 4);
      d_loaded.download(b.data(), b.size() * 4);
      double diff2 = 0, ref2 = 0;
      for (size_t i = 0; i < a.size(); ++i) {
        REQUIRE_MESSAGE(std::isfinite(b[i]), "m=" << m << " n=1000 k=2880: element " << i << " = " << b[i]);
        diff2 += double(a[i] - b[i]) * (a[i] - b[i]);
        ref2 += double(a[i]) * a[i];
      }
      CHECK(std::sqrt(diff2 / ref2) < 1e-5);
    }
    // the Blackwell backends (on sm_90a in emulation) read the weight as stored: the buffer untouched
    auto as_stored_on = [&](const detail::test::OnBlackwellBackend& on) {
      if (!on.ready()) return;
      d_pp.fill(0xA5);
      const Nvfp4Linear blackwell = load_modelopt(layer, d_pp.get(), nullptr);
      CHECK(!blackwell.prepacked);
      CHECK(blackwell.weight.data == d_w.get());
      CHECK(blackwell.weight.scales == d_ws.get());
      std::vector<uint8_t> untouched(size_t(prepacked_bytes(n, k)));
      d_pp.download(untouched.data(), untouched.size());
      CHECK(std::all_of(untouched.begin(), untouched.end(), [](uint8_t b) { return b == 0xA5; }));
    };
    as_stored_on(detail::test::OnSm100Backend{});
    as_stored_on(detail::test::OnSm120Backend{});
  }
}

TEST_SUITE("gpu_gemm") {
  // weights_static launches each gemm as a programmatic dependent launch: it may start while
  // the gemm before it runs and reads its weights early, but must read its activations (the
  // previous gemm's output here) only after that gemm is done. A chain of gemms, each on the
  // last one's output, must give the same bits with and without the early launch.
  TEST_CASE("gemm chain with weights_static: each reads the previous output, same bits as without") {
    std::mt19937 rng(std::random_device{}());
    struct Chain {
      int64_t m, nk;
      bool prepacked;
      ScaleLayout layout;
    };
    for (const Chain& c : {Chain{1, 4096, true, ScaleLayout::linear}, Chain{16, 2048, false, ScaleLayout::swizzled128x4},
                           Chain{300, 2048, true, ScaleLayout::linear}}) {
      CAPTURE(c.m);
      CAPTURE(c.nk);
      constexpr int kLinks = 8;
      testutil::HostNvfp4 w(c.nk, c.nk, c.layout, rng);
      double w2 = 0;  // the chain's values stay near 1 with the global scale 1 / |w row 0|
      for (int64_t k = 0; k < c.nk; ++k) w2 += w.value(0, k) * w.value(0, k);
      const float gw = float(1.0 / std::sqrt(std::max(w2, 1.0)));
      std::normal_distribution<float> normal(0.0f, 1.0f);
      std::vector<uint16_t> a0(size_t(c.m * c.nk));
      for (auto& h : a0) h = nvfp4k::float_to_bf16_bits(normal(rng));
      DeviceBuffer d_w = to_device(w.packed), d_s = to_device(w.scales), d_a0 = to_device(a0);
      DeviceBuffer d_pre(size_t(prepacked_bytes(c.nk, c.nk)));
      Nvfp4Tensor b{d_w.get(), 0, d_s.get(), c.layout, {gw, nullptr, false}};
      if (c.prepacked) {
        prepack({b, c.nk, c.nk, d_pre.get()}, nullptr);
        b = {d_pre.get(), 0, nullptr, ScaleLayout::linear, b.global_scale};
      }
      const size_t bytes = size_t(c.m * c.nk * 2);
      auto run_chain = [&](bool early) {
        std::vector<DeviceBuffer> links;
        for (int i = 0; i < kLinks; ++i) links.emplace_back(bytes);
        for (auto& l : links)  // NaN, on the stream: after every earlier gemm
          check_cu(driver().cuMemsetD32Async(reinterpret_cast<CUdeviceptr>(l.get()), ~0u, bytes / 4, nullptr), "poison");
        for (int i = 0; i < kLinks; ++i) {
          GemmArgs g;
          g.m = c.m, g.n = c.nk, g.k = c.nk;
          g.a = i == 0 ? d_a0.get() : links[size_t(i - 1)].get();
          g.b = b, g.b_prepacked = c.prepacked, g.weights_static = early;
          g.d = links[size_t(i)].get();
          gemm(g, nullptr);
        }
        check_cu(driver().cuCtxSynchronize(), "gemm chain");
        std::vector<uint16_t> out(size_t(c.m * c.nk));
        links.back().download(out.data(), bytes);
        return out;
      };
      const std::vector<uint16_t> plain = run_chain(false), early = run_chain(true);
      const auto bad = std::find_if(plain.begin(), plain.end(), [](uint16_t h) { return (h & 0x7F80) == 0x7F80; });
      REQUIRE_MESSAGE(bad == plain.end(), "m=" << c.m << " n=k=" << c.nk << ": the chain without early launch gave a "
                                               "non-finite element at " << (bad - plain.begin()));
      const auto diff = std::mismatch(early.begin(), early.end(), plain.begin());
      CHECK_MESSAGE(diff.first == early.end(), "m=" << c.m << " n=k=" << c.nk << ": with weights_static the chain's "
                                               "output differs first at element " << (diff.first - early.begin()));
    }
  }
}

TEST_SUITE("gpu_gemm") {
  TEST_CASE("a given tile with NVFP4 activations: refused where W4A4 decodes A first (past kW4A4OneLaunchRows rows a tile), naming a_dtype and the arch") {
    const Arch arch = current_device().arch;
    if (gemm_backend(arch, "test").native_fp4_activations()) return;  // there the tile is the FP4 kernel's
    alignas(16) static unsigned char buffer[1 << 16];
    GemmArgs w4a4;
    w4a4.m = kW4A4OneLaunchRows + 1, w4a4.n = 64, w4a4.k = 64, w4a4.a_dtype = DType::nvfp4;
    w4a4.a_fp4 = {buffer, 0, buffer, ScaleLayout::linear, {}};
    w4a4.b.data = w4a4.b.scales = w4a4.d = buffer;
    try {
      gemm_with_tile(w4a4, sm90::to_config({128, 2, 4, 1, 128}), nullptr);
      FAIL("no error");
    } catch (const Error& e) {
      CHECK(e.status() == Status::unsupported);
      CHECK(std::string(e.what()).find("a_dtype") != std::string::npos);
      CHECK(std::string(e.what()).find(to_string(arch)) != std::string::npos);
    }
  }
}

TEST_SUITE("gpu_gemm") {
  TEST_CASE("gemm on weights freed and allocated again at one address: each call reads its own weight") {
    std::mt19937 rng(std::random_device{}());
    const DType fp4 = DType::nvfp4, bf16 = DType::bf16, fp32 = DType::fp32;
    run_at_one_address({{16, 1024, 4096, bf16, fp32},
                        {16, 4096, 4096, bf16, fp32},  // more rows at the same address
                        {16, 4096, 2048, bf16, fp32},  // shorter rows: another row stride
                        {16, 1024, 4096, bf16, fp32},  // the first shape, new contents: its descriptor reused
                        {16, 1024, 4096, bf16, fp32, ScaleLayout::swizzled128x4},
                        {7, 2048, 4096, fp4, fp32},  // W4A4
                        {7, 4096, 4096, fp4, fp32}},
                       rng);
  }
}
