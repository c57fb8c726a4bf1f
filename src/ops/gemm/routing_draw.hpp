// Simulated MoE routings, drawn as a router's top-k ids land: the tuner's grouped scratch calls
// and `nvfp4-jit bench grouped` time the grouped GEMM on them.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <numeric>
#include <random>
#include <vector>

namespace nvfp4::jit::detail {

enum class RoutingDraw { uniform, zipf };

// The router's top-k ids [tokens, topk]: each token to topk distinct experts of `experts`,
// uniformly or by Zipf popularity (s = 1.2, experts ranked in a random order).
template <class Rng>
std::vector<int32_t> draw_topk_ids(RoutingDraw routing, int64_t tokens, int32_t experts, int topk, Rng& rng) {
  std::vector<int> rank(static_cast<size_t>(experts));
  std::iota(rank.begin(), rank.end(), 0);
  std::shuffle(rank.begin(), rank.end(), rng);
  std::vector<double> popularity(static_cast<size_t>(experts));
  for (int32_t e = 0; e < experts; ++e)
    popularity[size_t(e)] = routing == RoutingDraw::zipf ? std::pow(rank[size_t(e)] + 1.0, -1.2) : 1.0;
  std::discrete_distribution<int> pick(popularity.begin(), popularity.end());
  std::vector<int32_t> ids(static_cast<size_t>(tokens * topk));
  for (int64_t t = 0; t < tokens; ++t)
    for (int j = 0; j < topk; ++j) {
      int32_t e;
      do e = pick(rng);
      while (std::find(&ids[size_t(t * topk)], &ids[size_t(t * topk + j)], e) != &ids[size_t(t * topk + j)]);
      ids[size_t(t * topk + j)] = e;
    }
  return ids;
}

// Each expert's rows: how many of `ids` name it.
inline std::vector<int32_t> rows_per_expert(const std::vector<int32_t>& ids, int32_t experts) {
  std::vector<int32_t> counts(static_cast<size_t>(experts), 0);
  for (int32_t e : ids) ++counts[size_t(e)];
  return counts;
}

}  // namespace nvfp4::jit::detail
