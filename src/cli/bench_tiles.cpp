// nvfp4-jit bench gemm's tile sweep: the tiles around the heuristic's on the decode shapes.
#include <cstdio>
#include <random>

#include "cli/bench_util.hpp"
#include "cli/benches.hpp"
#include "nvfp4/jit.hpp"
#include "ops/gemm/gemm.hpp"
#include "ops/gemm/m_buckets.hpp"
#include "ops/gemm/sm90/tiles.hpp"

namespace nvfp4::jit::cli {

using namespace detail;

Json bench_tiles(EventTimer& timer, int runs, std::mt19937& rng) {
  std::printf("  tiles at N = K = 8192 (block_m / block_k / consumer warpgroups / stages / split-K):\n");
  Json tiles = Json::array();
  for (int64_t m : {1, 16, 128}) {
    GemmWeights weights(8192, 8192, 6, false, rng);
    DeviceBuffer a = to_device(random_bf16(size_t(m * 8192), rng)), d(size_t(m * 8192 * 2));
    GemmArgs g;
    g.m = m, g.n = 8192, g.k = 8192;
    g.a = a.get();
    g.d = d.get();
    const int bm = gemm_m_bucket(m);
    for (int bk : {128, 256})
      for (int stages : {4, 8})
        for (int ks : {1, 2, 4, 8}) {
          const int wg = bm >= 128 ? 2 : 1;
          if ((bm >= 128 && (stages > 4 || bk > 128)) || (bk == 256 && stages > 4 && bm > 16)) continue;
          const sm90::Tile tile{bm, wg, stages, ks, bk};
          const double us = time_us(timer, runs, [&](int i) {
            g.b.data = weights.packed[size_t(i % 6)].get();
            g.b.scales = weights.scales[size_t(i % 6)].get();
            gemm_with_tile(g, sm90::to_config(tile), nullptr);
          });
          std::printf("    M=%-5lld %3d/%d/%d/%d/%d %9.2f us\n", (long long)m, bm, bk, wg, stages, ks, us);
          tiles.push_back({{"m", m}, {"block_m", bm}, {"block_k", bk}, {"consumers", wg}, {"stages", stages},
                           {"split_k", ks}, {"us", rounded(us, 3)}});
        }
  }
  return tiles;
}

}  // namespace nvfp4::jit::cli
