// NVRTC compiles every template for every arch it supports; failures carry the log.
#include <doctest/doctest.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <string_view>
#include <thread>

#include "core/nvrtc_compiler.hpp"
#include "core/prewarm.hpp"
#include "ops/dequantize_op.hpp"
#include "gemm_test_util.hpp"
#include "ops/gemm/m_buckets.hpp"
#include "ops/prepack_op.hpp"
#include "ops/row_quantize_op.hpp"

using namespace nvfp4::jit;
using namespace nvfp4::jit::detail;

namespace {

template <class T>
T read_at(const std::vector<char>& bytes, size_t at) {
  T v{};
  if (at + sizeof v <= bytes.size()) std::memcpy(&v, bytes.data() + at, sizeof v);
  return v;
}

// The largest stack frame of a CUBIN's functions (EIATTR_FRAME_SIZE in the ELF's .nv.info
// section): a kernel that spills registers has one. -1 where the section is missing.
int64_t largest_stack_frame(const std::vector<char>& cubin) {
  const auto section_headers = read_at<uint64_t>(cubin, 0x28);
  const auto header_size = read_at<uint16_t>(cubin, 0x3A), sections = read_at<uint16_t>(cubin, 0x3C);
  const auto names_section = read_at<uint16_t>(cubin, 0x3E);
  auto header = [&](size_t i) { return section_headers + i * header_size; };
  const auto names = read_at<uint64_t>(cubin, header(names_section) + 24);
  for (size_t i = 0; i < sections; ++i) {
    const size_t name_at = names + read_at<uint32_t>(cubin, header(i));
    if (name_at >= cubin.size() || std::string_view(cubin.data() + name_at) != ".nv.info") continue;
    const auto begin = read_at<uint64_t>(cubin, header(i) + 24), end = begin + read_at<uint64_t>(cubin, header(i) + 32);
    int64_t largest = 0;
    // attributes: a format byte, an attribute byte, then by format nothing, a byte (padded to
    // 2), a 16-bit value, or a 16-bit size and that many bytes
    for (size_t at = begin; at + 2 <= end;) {
      const auto format = uint8_t(cubin[at]), attribute = uint8_t(cubin[at + 1]);
      if (format == 0x04) {
        const auto size = read_at<uint16_t>(cubin, at + 2);
        if (attribute == 0x11) largest = std::max<int64_t>(largest, read_at<uint32_t>(cubin, at + 8));  // (function, frame)
        at += 4 + size;
      } else {
        at += format == 0x01 ? 2 : 4;
      }
    }
    return largest;
  }
  return -1;
}

}  // namespace

TEST_SUITE("nvrtc") {
  TEST_CASE("every kernel of every template compiles for every arch, in parallel threads") {
    std::vector<KernelSpec> specs;
    for (Arch arch : kAllArchs) {
      REQUIRE_MESSAGE(nvrtc_supports(arch), "NVRTC " << nvrtc_version() << " lacks " << to_string(arch));
      for (const KernelSpec& s : prewarm_specs({parse_shape("1,4096")}, {arch})) specs.push_back(s);
      specs.push_back(dequantize_spec(arch, 48, DType::fp16, ScaleLayout::linear));  // K an odd multiple of 16
      // The fused quantizers' other paths: interleaved SwiGLU groups below and above 16, FP32, MoE staging.
      specs.push_back(row_quantize_spec(Op::swiglu_quantize, arch, 96, DType::fp32, ScaleLayout::linear, 1));
      specs.push_back(row_quantize_spec(Op::swiglu_quantize, arch, 96, DType::fp16, ScaleLayout::swizzled128x4, 32));
      specs.push_back(row_quantize_spec(Op::moe_stage, arch, 65536, DType::bf16, ScaleLayout::swizzled128x4));
      specs.push_back(prepack_spec(arch, 2880, ScaleLayout::swizzled128x4));
    }
    // GEMM paths prewarm leaves out: FP16 activations from a prepacked weight, FP32 out with bias,
    // both the whole-tile (small BM) and step-by-step (large BM) decode.
    for (int bucket : {16, kGemmLargeM})
      specs.push_back(gemm_key(test::sm90_spec(test::sm90_problem(2880, 2880, true, DType::fp16, DType::fp32,
                                                                  ScaleLayout::linear, uint8_t(DType::fp32)),
                                               sm90::bucket_tile(2880, 2880, bucket, 132))));
    // two k slices (a tuner candidate) from both weight layouts, with split-K
    sm90::Tile two_k_slices{16, 2, 4, 2, 256};
    two_k_slices.k_slices = 2;
    for (bool prepacked : {false, true})
      specs.push_back(gemm_key(test::sm90_spec(
          test::sm90_problem(2880, 2880, prepacked, DType::bf16, DType::bf16, ScaleLayout::swizzled128x4), two_k_slices)));
    // grouped layouts: contiguous from the ModelOpt layout, masked from a prepacked weight
    for (bool prepacked : {false, true}) {
      GemmSpec grouped = test::sm90_spec(test::sm90_problem(2880, 2880, prepacked), sm90::bucket_tile(2880, 2880, 16, 132));
      grouped.tile.split_k = 1;
      grouped.groups = 8;
      grouped.flags |= prepacked ? kFlagGroupedMasked : kFlagGroupedContiguous;
      specs.push_back(gemm_key(grouped));
      // batched (3-D TMA maps for A and D, per-row A scales indexed by group)
      grouped.flags = (grouped.flags & ~(kFlagGroupedMasked | kFlagGroupedContiguous)) | kFlagGroupedBatched;
      specs.push_back(gemm_key(grouped));
    }
    std::vector<std::string> failures(specs.size());
    std::vector<std::thread> threads;
    for (int t = 0; t < 2; ++t)
      threads.emplace_back([&, t] {
        for (size_t i = t; i < specs.size(); i += 2) {
          try {
            const auto cubin = nvrtc_compile(generate(specs[i]), specs[i].arch);
            if (cubin.size() < 4 || std::memcmp(cubin.data(), "\x7f" "ELF", 4) != 0) failures[i] = "not an ELF CUBIN";
          } catch (const std::exception& e) {
            failures[i] = e.what();
          }
        }
      });
    for (auto& t : threads) t.join();
    for (size_t i = 0; i < specs.size(); ++i) {
      CAPTURE(specs[i].describe());
      CHECK(failures[i] == "");
    }
  }

  TEST_CASE("the GEMM's largest tiles keep every value in registers (no stack frame)") {
    // Two consumer warpgroups on 256 rows (split or not, either weight layout) and three on
    // 192 need the producer's registers; without them ptxas spilled after the main loop.
    struct Kernel {
      bool prepacked;
      ScaleLayout layout;
      DType a, d;
      uint8_t bias;
      sm90::Tile tile;
    };
    const Kernel kernels[] = {
        {true, ScaleLayout::linear, DType::bf16, DType::bf16, kNoDType, {256, 2, 3, 1, 128}},
        {true, ScaleLayout::linear, DType::fp16, DType::fp32, uint8_t(DType::fp32), {256, 2, 3, 2, 128}},
        {false, ScaleLayout::linear, DType::bf16, DType::bf16, kNoDType, {256, 2, 3, 2, 128}},
        {false, ScaleLayout::swizzled128x4, DType::bf16, DType::fp32, uint8_t(DType::bf16), {256, 2, 3, 1, 128}},
        {true, ScaleLayout::linear, DType::bf16, DType::bf16, kNoDType, {192, 3, 3, 1, 128}},
    };
    for (const Kernel& k : kernels) {
      const KernelSpec spec =
          gemm_key(test::sm90_spec(test::sm90_problem(28672, 4096, k.prepacked, k.a, k.d, k.layout, k.bias), k.tile));
      CAPTURE(spec.describe());
      CHECK(largest_stack_frame(nvrtc_compile(generate(spec), Arch::sm_90a)) == 0);
    }
  }

  TEST_CASE("a compile error reports the kernel, the arch and NVRTC's log") {
    GeneratedKernel bad{"broken_kernel", "extern \"C\" __global__ void broken_kernel() { undefined_symbol(); }\n"};
    try {
      nvrtc_compile(bad, Arch::sm_90a);
      FAIL("compile should fail");
    } catch (const Error& e) {
      CHECK(e.status() == Status::compile_failed);
      const std::string msg = e.what();
      CHECK(msg.find("broken_kernel") != std::string::npos);
      CHECK(msg.find("sm_90a") != std::string::npos);
      CHECK(msg.find("undefined_symbol") != std::string::npos);
    }
  }

  TEST_CASE("options are normalized: fixed order, no paths") {
    const auto options = nvrtc_options(Arch::sm_120a);
    CHECK(options == nvrtc_options(Arch::sm_120a));
    CHECK(options[0] == "--gpu-architecture=sm_120a");
    for (const auto& o : options) CHECK(o.find('/') == std::string::npos);
  }
}
