#include "ops/gemm_op.hpp"

#include <cstring>
#include <string>

#include "common/params.cuh"
#include "common/scale_layout.cuh"
#include "core/driver.hpp"
#include "core/error.hpp"
#include "core/launcher.hpp"
#include "ops/dequantize_op.hpp"
#include "ops/gemm_tune.hpp"
#include "ops/validate.hpp"

namespace nvfp4::jit::detail {

static_assert(sizeof(nvfp4k::TmaDescriptor) == sizeof(CUtensorMap));

namespace {

constexpr const char* kWho = "nvfp4::jit::gemm";

// The wgmma of one k16 step, A (weights) from registers, B (activations) from shared memory:
// its operand list has BM/2 accumulators, so it is generated for the spec's BM.
std::string wgmma_prelude(int bm, bool fp16) {
  std::string acc, outs;
  for (int i = 0; i < bm / 2; ++i) {
    acc += fmt::format("{}%{}", i ? ", " : "", i);
    outs += fmt::format("{}\"+f\"(d[{}])", i ? ", " : "", i);
  }
  const int a0 = bm / 2;
  return fmt::format(
      "struct Mma {{\n"
      "  __device__ __forceinline__ static void mma(float (&d)[{0}], const unsigned (&a)[4], unsigned long long desc) {{\n"
      "    asm volatile(\"{{\\n.reg .pred p;\\nsetp.ne.b32 p, %{6}, 0;\\n\"\n"
      "                 \"wgmma.mma_async.sync.aligned.m64n{1}k16.f32.{2}.{2} {{{3}}}, {{%{4}, %{7}, %{8}, %{9}}}, %{5}, p, 1, 1, 0;\\n}}\\n\"\n"
      "                 : {10}\n"
      "                 : \"r\"(a[0]), \"r\"(a[1]), \"r\"(a[2]), \"r\"(a[3]), \"l\"(desc), \"r\"(1));\n"
      "  }}\n"
      "}};\n\n",
      bm / 2, bm, fp16 ? "f16" : "bf16", acc, a0, a0 + 4, a0 + 5, a0 + 1, a0 + 2, a0 + 3, outs);
}

uint8_t bias_code(const KernelSpec& spec) {
  return spec.flags & kFlagBiasBf16 ? nvfp4k::BIAS_BF16 : spec.flags & kFlagBiasFp32 ? nvfp4k::BIAS_FP32 : nvfp4k::BIAS_NONE;
}

struct Resolved {
  int64_t a_stride, b_stride, d_stride;
  int gscale_mode;
  int a_gscale_mode;  // W4A4: A's global scale (GlobalScaleCode); else GSCALE_HOST with 1
};

// W4A4's A: the checks dequantize would make on it, named as gemm's arguments.
void check_fp4_activations(const Check& check, const GemmArgs& g, Resolved& r) {
  if (g.a) check.fail("a", "a is set but a_dtype = nvfp4: pass the NVFP4 activations in a_fp4");
  check.scale_layout("a_fp4.scale_layout", g.a_fp4.scale_layout);
  r.a_gscale_mode = check.global_scale("a_fp4.global_scale", g.a_fp4.global_scale);
  const int64_t stride = g.a_fp4.row_stride_bytes ? g.a_fp4.row_stride_bytes : g.k / 2;
  if (stride < g.k / 2 || stride % 4)
    check.fail("a_fp4.row_stride_bytes",
               fmt::format("a_fp4.row_stride_bytes = {} must be at least k/2 = {} and a multiple of 4", stride, g.k / 2));
  if (g.m == 0) return;
  check.not_null("a_fp4.data", g.a_fp4.data);
  check.aligned("a_fp4.data", g.a_fp4.data, 4);
  check.not_null("a_fp4.scales", g.a_fp4.scales);
  check.aligned("a_fp4.global_scale.device_ptr", g.a_fp4.global_scale.device_ptr, 4);
  if (g.workspace) {
    check.aligned("workspace", g.workspace, 16);
    if (g.workspace_bytes < g.m * g.k * 2)
      check.fail("workspace_bytes", fmt::format("workspace_bytes = {} is less than the {} bytes W4A4 needs (m * k * 2)",
                                                g.workspace_bytes, g.m * g.k * 2));
  }
}

Resolved resolve(const GemmArgs& g) {
  Check check(kWho);
  check.not_negative("m", g.m);
  check.positive("n", g.n);
  check.positive_multiple("k", g.k, 32, "two NVFP4 blocks, the packed row granule the kernels load");
  check.dtype_in("a_dtype", g.a_dtype, {DType::bf16, DType::fp16, DType::nvfp4});
  check.dtype_in("d_dtype", g.d_dtype, {DType::bf16, DType::fp16, DType::fp32});
  if (g.bias) check.dtype_in("bias_dtype", g.bias_dtype, {DType::bf16, DType::fp32});
  if (!g.b_prepacked) check.scale_layout("b.scale_layout", g.b.scale_layout);
  Resolved r{};
  r.a_stride = g.a_row_stride ? g.a_row_stride : g.k;
  r.b_stride = g.b.row_stride_bytes ? g.b.row_stride_bytes : g.k / 2;
  r.d_stride = g.d_row_stride ? g.d_row_stride : g.n;
  if (r.a_stride < g.k) check.fail("a_row_stride", fmt::format("a_row_stride = {} is less than k = {}", r.a_stride, g.k));
  if (r.a_stride % 8)
    check.fail("a_row_stride", fmt::format("a_row_stride = {} must be a multiple of 8 elements (16 bytes, for TMA)", r.a_stride));
  if (r.b_stride < g.k / 2 && !g.b_prepacked)
    check.fail("b.row_stride_bytes", fmt::format("b.row_stride_bytes = {} is less than k/2 = {}", r.b_stride, g.k / 2));
  if (r.b_stride % 16 && !g.b_prepacked)
    check.fail("b.row_stride_bytes", fmt::format("b.row_stride_bytes = {} must be a multiple of 16 (for TMA)", r.b_stride));
  if (r.d_stride < g.n) check.fail("d_row_stride", fmt::format("d_row_stride = {} is less than n = {}", r.d_stride, g.n));
  r.gscale_mode = check.global_scale("b.global_scale", g.b.global_scale);
  if (r.gscale_mode == nvfp4k::GSCALE_DEVICE_PER_ROW)
    check.fail("b.global_scale", "b.global_scale.per_row is not supported: a weight has one global scale");
  r.a_gscale_mode = nvfp4k::GSCALE_HOST;
  if (g.a_dtype == DType::nvfp4) check_fp4_activations(check, g, r);
  if (g.m > 0) {
    if (g.a_dtype != DType::nvfp4) {
      check.not_null("a", g.a);
      check.aligned("a", g.a, 16);
    }
    check.not_null("b.data", g.b.data);
    check.aligned("b.data", g.b.data, 16);
    if (!g.b_prepacked) {
      check.not_null("b.scales", g.b.scales);
      check.aligned("b.scales", g.b.scales, 16);
    }
    check.not_null("d", g.d);
    check.aligned("d", g.d, g.d_dtype == DType::fp32 ? 4 : 2);
    if (g.bias) check.aligned("bias", g.bias, g.bias_dtype == DType::fp32 ? 4 : 2);
    check.aligned("b.global_scale.device_ptr", g.b.global_scale.device_ptr, 4);
  }
  return r;
}

}  // namespace

ScaleLayout gemm_weight_layout(ScaleLayout scales, bool prepacked) {
  return prepacked ? ScaleLayout(nvfp4k::SCALES_PREPACKED) : scales;
}

KernelSpec gemm_spec(Arch arch, int64_t n, int64_t k, DType a, DType d, ScaleLayout layout, uint8_t bias,
                     const GemmTile& tile) {
  KernelSpec spec = base_spec(Op::gemm, arch, k, uint16_t(gemm_threads(tile)));
  spec.n = n;
  spec.a_dtype = uint8_t(a);
  spec.b_dtype = uint8_t(DType::nvfp4);
  spec.out_dtype = uint8_t(d);
  spec.scale_layout = uint8_t(layout);
  spec.flags = bias == uint8_t(DType::bf16) ? kFlagBiasBf16 : bias == uint8_t(DType::fp32) ? kFlagBiasFp32 : 0;
  spec.tile.block_m = uint16_t(tile.block_m);
  spec.tile.block_n = uint16_t(64 * tile.consumers);
  spec.tile.block_k = uint16_t(tile.block_k);
  spec.tile.stages = uint8_t(tile.stages);
  spec.tile.split_k = uint8_t(tile.split_k);
  return spec;
}

GemmTile gemm_tile_of(const KernelSpec& spec) {
  GemmTile t{spec.tile.block_m, spec.tile.block_n / 64, spec.tile.stages, spec.tile.split_k, spec.tile.block_k};
  // two k groups: more threads than one per row tile has
  t.k_groups = spec.tile.threads > gemm_threads(t) ? 2 : 1;
  return t;
}

GeneratedKernel generate_gemm(const KernelSpec& spec) {
  if (spec.arch != Arch::sm_90a)
    fail(Status::unsupported, "codegen: the NVFP4 GEMM has an sm_90a kernel only (asked for {})", to_string(spec.arch));
  const GemmTile t = gemm_tile_of(spec);
  const uint8_t bias = bias_code(spec);
  const char* layout = spec.scale_layout == nvfp4k::SCALES_PREPACKED       ? "prepacked"
                       : spec.scale_layout == nvfp4k::SCALES_SWIZZLED128X4 ? "sw128x4"
                                                                            : "linear";
  std::string name = fmt::format("nvfp4_gemm_w4a16_n{}_k{}_{}_{}_{}{}_bm{}_bk{}_wg{}{}_s{}_ks{}", spec.n, spec.k,
                                 dtype_name(spec.a_dtype), dtype_name(spec.out_dtype), layout,
                                 bias == nvfp4k::BIAS_BF16 ? "_biasbf16" : bias == nvfp4k::BIAS_FP32 ? "_biasfp32" : "",
                                 t.block_m, t.block_k, t.consumers, t.k_groups > 1 ? fmt::format("_kg{}", t.k_groups) : "",
                                 t.stages, t.split_k);
  return entry_point(spec, std::move(name), "sm90/gemm_w4a16.cuh", "GemmParams",
                     fmt::format("nvfp4k::sm90::gemm_w4a16<nvfp4k::sm90::GemmConfig<{}, {}, {}, {}LL, {}LL, {}, {}, {}, {}, {}, {}, "
                                 "{}>, Mma>(p)",
                                 spec.a_dtype, spec.out_dtype, bias, spec.n, spec.k, spec.scale_layout, t.consumers,
                                 t.block_m, t.block_k, t.stages, t.split_k, t.k_groups),
                     wgmma_prelude(t.block_m, spec.a_dtype == uint8_t(DType::fp16)));
}

std::vector<KernelSpec> gemm_prewarm_specs(Arch arch, int64_t n, int64_t k, int sm_count) {
  std::vector<KernelSpec> specs;
  if (arch != Arch::sm_90a || n <= 0 || k <= 0 || k % 32) return specs;
  for (int bucket : kGemmMBuckets)
    for (ScaleLayout layout : {ScaleLayout::linear, ScaleLayout::swizzled128x4, gemm_weight_layout({}, true)})
      for (const GemmTile& t : gemm_bucket_tiles(arch, n, k, bucket, sm_count, layout == gemm_weight_layout({}, true)))
        specs.push_back(gemm_spec(arch, n, k, DType::bf16, DType::bf16, layout, kNoDType, t));
  return specs;
}

namespace {

const DeviceInfo& gemm_device() {
  const DeviceInfo& device = current_device();
  if (device.arch != Arch::sm_90a)
    Check(kWho).fail("device", fmt::format("the NVFP4 GEMM runs on sm_90a (Hopper) devices; this device is {}",
                                           to_string(device.arch)),
                     Status::unsupported);
  return device;
}

std::string prewarm_hint(const GemmArgs& args, const DeviceInfo& device) {
  return fmt::format("nvfp4-jit prewarm --shape {},{} --arch {}", args.n, args.k, to_string(device.arch));
}

CUfunction gemm_kernel(const GemmArgs& args, const DeviceInfo& device, const GemmTile& tile, CUstream stream) {
  const KernelSpec spec = gemm_spec(device.arch, args.n, args.k, args.a_dtype, args.d_dtype,
                                    gemm_weight_layout(args.b.scale_layout, args.b_prepacked),
                                    args.bias ? uint8_t(args.bias_dtype) : kNoDType, tile);
  return kernel_for(device, spec, gemm_shared_bytes(tile), stream, [&] { return prewarm_hint(args, device); });
}

// D's TMA descriptor, boxes of a row tile's m_step rows x 128 bytes, where the tile's kernel
// stores through TMA and TMA can address D's rows (16-byte aligned): the kernel then stores a
// tile at a time from shared memory, else element by element. Returns whether it made one.
bool output_tensor_map(const GemmArgs& args, const GemmTile& tile, int64_t d_stride, int64_t m_step,
                       nvfp4k::TmaDescriptor& out) {
  const int d_bytes = args.d_dtype == DType::fp32 ? 4 : 2;
  if (!gemm_stores_through_tma(tile, d_bytes) || reinterpret_cast<uintptr_t>(args.d) % 16 != 0 ||
      d_stride * d_bytes % 16 != 0)
    return false;
  const CUtensorMapDataType type = args.d_dtype == DType::fp32   ? CU_TENSOR_MAP_DATA_TYPE_FLOAT32
                                   : args.d_dtype == DType::fp16 ? CU_TENSOR_MAP_DATA_TYPE_FLOAT16
                                                                 : CU_TENSOR_MAP_DATA_TYPE_BFLOAT16;
  const CUtensorMap map = make_tensor_map_2d(args.d, type, uint64_t(args.m), uint64_t(args.n),
                                             uint64_t(d_stride) * d_bytes, uint32_t(m_step), uint32_t(128 / d_bytes),
                                             CU_TENSOR_MAP_SWIZZLE_128B);
  std::memcpy(&out, &map, sizeof map);
  return true;
}

// `a_scale`: A's global scale (W4A4), applied in the epilogue.
void launch_gemm(const GemmArgs& args, const Resolved& r, const DeviceInfo& device, const GemmTile& tile,
                 CUstream stream, const GlobalScale& a_scale = {}) {
  Check check(kWho);
  const int64_t m_step = gemm_row_step(args.m, tile.block_m);
  const int64_t m_tiles = (args.m + m_step - 1) / m_step;
  const int64_t n_tiles = (args.n + 64 * tile.consumers - 1) / (64 * tile.consumers);
  if (m_tiles * n_tiles > INT32_MAX)
    check.fail("m", fmt::format("m = {} at n = {} is more tiles than one launch covers ({})", args.m, args.n, INT32_MAX));
  const unsigned shared = gemm_shared_bytes(tile);
  const CUfunction function = gemm_kernel(args, device, tile, stream);

  nvfp4k::GemmParams p{};
  const CUtensorMap map_a = make_tensor_map_2d(
      args.a, args.a_dtype == DType::fp16 ? CU_TENSOR_MAP_DATA_TYPE_FLOAT16 : CU_TENSOR_MAP_DATA_TYPE_BFLOAT16,
      uint64_t(args.m), uint64_t(args.k), uint64_t(r.a_stride) * 2, uint32_t(tile.block_m), 64,
      CU_TENSOR_MAP_SWIZZLE_128B);
  std::memcpy(&p.tma_a, &map_a, sizeof map_a);
  if (args.b_prepacked) {
    p.w_scales = static_cast<const unsigned char*>(args.b.data);  // values and scales, one bulk copy per stage
  } else {
    const CUtensorMap map_w = make_tensor_map_2d(
        args.b.data, CU_TENSOR_MAP_DATA_TYPE_UINT8, uint64_t(args.n), uint64_t(args.k / 2), uint64_t(r.b_stride),
        uint32_t(64 * tile.consumers), uint32_t(tile.block_k / 2),
        tile.block_k == 256 ? CU_TENSOR_MAP_SWIZZLE_128B : CU_TENSOR_MAP_SWIZZLE_64B);
    std::memcpy(&p.tma_w, &map_w, sizeof map_w);
    p.w_scales = static_cast<const unsigned char*>(args.b.scales);
  }
  p.w_gscale_ptr = args.b.global_scale.device_ptr;
  p.w_gscale_value = args.b.global_scale.value;
  p.w_gscale_mode = r.gscale_mode;
  p.alpha = args.alpha;
  p.a_gscale_ptr = a_scale.device_ptr;
  p.a_gscale_value = a_scale.value;
  p.a_gscale_mode = r.a_gscale_mode;
  p.bias = args.bias;
  p.d = args.d;
  p.d_stride = r.d_stride;
  p.d_tma = output_tensor_map(args, tile, r.d_stride, m_step, p.tma_d);
  p.m = args.m;
  p.m_step = m_step;
  p.m_tiles = int(m_tiles);
  p.tile_group = gemm_tile_group(args.m, args.k, tile);
  void* params[] = {&p};
  LaunchShape shape;
  // clusters of split_k CTAs (one CTA: a tile each), whole tiles first, then the split ones
  const int64_t split_tiles = gemm_split_tiles(n_tiles * m_tiles, tile.split_k, device.sm_count);
  p.whole_clusters = int((n_tiles * m_tiles - split_tiles) / tile.split_k);
  shape.grid[0] = unsigned(p.whole_clusters + split_tiles);
  shape.grid[2] = unsigned(tile.split_k);
  shape.block[0] = unsigned(gemm_threads(tile));
  shape.shared_bytes = shared;
  if (tile.split_k > 1) {
    shape.cluster[0] = 1;
    shape.cluster[1] = 1;
    shape.cluster[2] = unsigned(tile.split_k);
  }
  // Starting early pays where the previous kernel's tail is a large part of this one: grids of
  // up to four waves. Longer ones ran 3-10% slower launched early (8192^2, M = 2049-8192).
  shape.programmatic = args.weights_static && int64_t(shape.grid[0]) * shape.grid[2] <= 4 * int64_t(device.sm_count);
  launch(function, shape, stream, params);
}

}  // namespace

void gemm_with_tile(const GemmArgs& args, const GemmTile& tile, CUstream stream) {
  const Resolved r = resolve(args);
  if (args.a_dtype == DType::nvfp4)  // W4A4 runs the BF16 kernel on dequantized A, with gemm's own tile
    Check(kWho).fail("a_dtype", "a_dtype = nvfp4: a given tile runs BF16 or FP16 activations only", Status::unsupported);
  if (tile.consumers == 3 && !args.b_prepacked)
    Check(kWho).fail("b_prepacked", "b_prepacked = false: a tile of 3 consumer warpgroups runs on a prepacked weight only",
                     Status::unsupported);
  if (args.m == 0) return;
  launch_gemm(args, r, gemm_device(), tile, stream);
}

}  // namespace nvfp4::jit::detail

namespace nvfp4::jit {

namespace {

// W4A4: A decoded exactly to BF16 without its global scale (e2m1 x e4m3 has at most 6
// significant bits and lies in [2^-10, 2688]), then the BF16 kernel, with A's global scale
// in the epilogue. Both kernels are loaded before anything is enqueued, so a capture error
// leaves the stream untouched.
void gemm_w4a4(const GemmArgs& args, const detail::Resolved& r, const detail::DeviceInfo& device, CUstream stream) {
  using namespace detail;
  GemmArgs inner = args;
  inner.a_dtype = DType::bf16;
  inner.a_row_stride = args.k;
  const GemmTile tile = gemm_tile_for(device, inner, stream);
  gemm_kernel(inner, device, tile, stream);
  kernel_for(device, dequantize_spec(device.arch, args.k, DType::bf16, args.a_fp4.scale_layout), 0, stream,
             [&] { return prewarm_hint(args, device); });

  CUdeviceptr owned = 0;
  if (args.workspace) {
    inner.a = args.workspace;
  } else {
    check_cu(driver().cuMemAllocAsync(&owned, size_t(args.m * args.k * 2), stream), "cuMemAllocAsync(W4A4 workspace)");
    inner.a = reinterpret_cast<void*>(owned);
  }
  DequantizeArgs decode;
  decode.src = args.a_fp4;
  decode.src.global_scale = GlobalScale{};  // 1: applied in the GEMM's epilogue instead
  decode.src_rows = args.m;
  decode.k = args.k;
  decode.out = const_cast<void*>(inner.a);
  decode.out_dtype = DType::bf16;
  try {
    dequantize(decode, stream);
    Resolved inner_r = r;
    inner_r.a_stride = args.k;
    launch_gemm(inner, inner_r, device, tile, stream, args.a_fp4.global_scale);
  } catch (...) {
    if (owned) driver().cuMemFreeAsync(owned, stream);
    throw;
  }
  if (owned) check_cu(driver().cuMemFreeAsync(owned, stream), "cuMemFreeAsync(W4A4 workspace)");
}

}  // namespace

int64_t gemm_workspace_bytes(const GemmArgs& args) {
  const detail::Check check("nvfp4::jit::gemm_workspace_bytes");
  check.not_negative("m", args.m);
  check.positive_multiple("k", args.k, 32, "two NVFP4 blocks, the packed row granule the kernels load");
  return args.a_dtype == DType::nvfp4 ? args.m * args.k * 2 : 0;
}

void gemm(const GemmArgs& args, CUstream stream) {
  using namespace detail;
  const Resolved r = resolve(args);
  if (args.m == 0) return;
  const DeviceInfo& device = gemm_device();
  if (args.a_dtype == DType::nvfp4) return gemm_w4a4(args, r, device, stream);
  launch_gemm(args, r, device, gemm_tile_for(device, args, stream), stream);
}

}  // namespace nvfp4::jit
