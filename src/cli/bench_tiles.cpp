// nvfp4-jit bench gemm's tile sweep: the tuner's candidates (the device's GEMM backend's) on the
// decode shapes, each timed as a forced tile.
#include <cstdio>
#include <random>

#include "cli/bench_util.hpp"
#include "cli/benches.hpp"
#include "core/launcher.hpp"
#include "nvfp4/jit.hpp"
#include "ops/gemm/backend.hpp"
#include "ops/gemm/gemm.hpp"
#include "ops/gemm/m_buckets.hpp"

namespace nvfp4::jit::cli {

using namespace detail;

Json bench_tiles(EventTimer& timer, int runs, std::mt19937& rng) {
  constexpr int64_t kN = 8192, kK = 8192;
  constexpr int kCopies = 6;
  Json tiles = Json::array();
  const DeviceInfo& device = current_device();
  const GemmBackend& backend = gemm_backend(device.arch, "bench gemm");
  const GemmSpec problem = gemm_problem(device.arch, kN, kK, DType::bf16, DType::bf16, ScaleLayout::linear, false, kNoDType);
  if (const std::string why = backend.unsupported(problem); !why.empty()) {
    std::printf("  no tile sweep: W4A16 %s on %s\n", why.c_str(), std::string(to_string(device.arch)).c_str());
    return tiles;
  }
  std::printf("  the tuner's candidate tiles at N = K = %lld on %s (%d SMs), the heuristic's first:\n", (long long)kN,
              std::string(to_string(device.arch)).c_str(), device.sm_count);
  for (int64_t m : {1, 16, 128}) {
    GemmWeights weights(kN, kK, kCopies, false, rng);
    DeviceBuffer a = to_device(random_bf16(size_t(m * kK), rng)), d(size_t(m * kN * 2));
    GemmArgs g;
    g.m = m, g.n = kN, g.k = kK;
    g.a = a.get();
    g.d = d.get();
    for (const GemmTile& tile : backend.candidates(problem, gemm_m_bucket(m), device.sm_count)) {
      const double us = time_us(timer, runs, [&](int i) {
        g.b.data = weights.packed[size_t(i % kCopies)].get();
        g.b.scales = weights.scales[size_t(i % kCopies)].get();
        gemm_with_tile(g, tile, nullptr);
      });
      const std::string name = backend.describe(tile);
      std::printf("    M=%-5lld %-28s %9.2f us\n", (long long)m, name.c_str(), us);
      tiles.push_back({{"m", m}, {"tile", name}, {"us", rounded(us, 3)}});
    }
  }
  return tiles;
}

}  // namespace nvfp4::jit::cli
