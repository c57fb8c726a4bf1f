// Codegen determinism and a golden generated source.
#include <doctest/doctest.h>
#include <unistd.h>

#include <cstdlib>

#include "core/codegen.hpp"
#include "ops/dequantize_op.hpp"

using namespace nvfp4::jit;
using namespace nvfp4::jit::detail;

TEST_SUITE("codegen") {
  TEST_CASE("the same spec gives the same source, different specs different names") {
    const KernelSpec a = dequantize_spec(Arch::sm_90a, 4096, DType::bf16, ScaleLayout::linear);
    const KernelSpec b = dequantize_spec(Arch::sm_90a, 4096, DType::fp16, ScaleLayout::linear);
    CHECK(generate(a).source == generate(a).source);
    CHECK(generate(a).name != generate(b).name);
    CHECK(KernelSpecHash{}(a) == KernelSpecHash{}(dequantize_spec(Arch::sm_90a, 4096, DType::bf16, ScaleLayout::linear)));
  }

  TEST_CASE("golden dequantize source") {
    const KernelSpec spec = dequantize_spec(Arch::sm_90a, 4096, DType::bf16, ScaleLayout::swizzled128x4);
    const GeneratedKernel g = generate(spec);
    CHECK(g.name == "nvfp4_dequantize_k4096_bf16_sw128x4");
    CHECK(g.source ==
          "// nvfp4-jit generated: dequantize arch=sm_90a k=4096 out_dtype=bf16 scale_layout=sw128x4 threads=256 "
          "loads_per_thread=4\n"
          "#include \"dequantize.cuh\"\n\n"
          "extern \"C\" __global__ void __launch_bounds__(256) nvfp4_dequantize_k4096_bf16_sw128x4("
          "const __grid_constant__ nvfp4k::DequantizeParams p) {\n"
          "  nvfp4k::dequantize<0, 4096LL, 1, 256, 4>(p);\n"
          "}\n");
  }

  TEST_CASE("generated sources hold no paths, user or host names") {
    char host[256] = {};
    ::gethostname(host, sizeof host);
    const char* user = std::getenv("USER");
    for (Arch arch : kAllArchs)
      for (const KernelSpec& spec : dequantize_prewarm_specs(arch, 2880)) {
        const std::string src = generate(spec).source;
        CAPTURE(src);
        CHECK(src.find("#include \"/") == std::string::npos);
        CHECK(src.find(host) == std::string::npos);
        if (user && *user) CHECK(src.find(std::string("/") + user) == std::string::npos);
      }
  }
}
