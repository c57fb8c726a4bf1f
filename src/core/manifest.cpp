#include "core/manifest.hpp"

#include <charconv>
#include <cstdint>
#include <map>
#include <sstream>
#include <tuple>

#include "core/embedded.hpp"
#include "core/error.hpp"
#include "core/fs_util.hpp"
#include "core/printable.hpp"

namespace nvfp4::jit::detail {

namespace {

bool parse_int(std::string_view s, int64_t& out) {
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
  return ec == std::errc{} && end == s.data() + s.size();
}

// N and K are what the kernels are specialized on (32-bit in the kernels); a group count is
// an expert count.
constexpr int64_t kMaxDim = INT32_MAX, kMaxGroups = 1 << 16;
// A line quoted in an error: enough to find it, never a whole binary file.
constexpr size_t kQuotedLineBytes = 120;

}  // namespace

std::string weight_shape_problem(int64_t n, int64_t k, int64_t groups) {
  if (n <= 0 || n > kMaxDim) return fmt::format("N = {} must be 1 to {}", n, kMaxDim);
  if (k <= 0 || k % 16 || k > kMaxDim) return fmt::format("K = {} must be a positive multiple of 16, at most {}", k, kMaxDim);
  if (groups <= 0 || groups > kMaxGroups) return fmt::format("groups = {} must be 1 to {}", groups, kMaxGroups);
  return {};
}

std::vector<WeightShape> parse_manifest(std::string_view text, std::string_view origin, const PrewarmVariants& base) {
  std::vector<WeightShape> shapes;
  std::istringstream in{std::string(text)};
  std::string line;
  for (int number = 1; std::getline(in, line); ++number) {
    if (const size_t hash = line.find('#'); hash != std::string::npos) line.resize(hash);
    std::istringstream fields(line);
    std::vector<std::string> f;
    for (std::string word; fields >> word;) f.push_back(word);
    if (f.empty()) continue;
    WeightShape s;
    s.variants = base;
    int64_t groups = 1;
    // the numbers, then the variant fields (key=value)
    size_t numbers = 1;
    while (numbers < f.size() && f[numbers].find('=') == std::string::npos) ++numbers;
    if (numbers < 3 || numbers > 4 || !parse_int(f[1], s.n) || !parse_int(f[2], s.k) ||
        (numbers == 4 && !parse_int(f[3], groups)))
      fail(Status::invalid_argument, "{}:{}: expected `<name> <N> <K> [groups] [key=value...]`, got `{}`", origin, number,
           printable(line, kQuotedLineBytes));
    for (size_t i = numbers; i < f.size(); ++i)
      if (std::string why = set_prewarm_variants(s.variants, f[i]); !why.empty())
        fail(Status::invalid_argument, "{}:{}: {}", origin, number, why);
    s.name = f[0];
    s.origin = fmt::format("{}:{}", origin, number);
    if (const std::string why = weight_shape_problem(s.n, s.k, groups); !why.empty())
      fail(Status::invalid_argument, "{}:{}: {}", origin, number, why);
    s.groups = static_cast<int32_t>(groups);
    shapes.push_back(std::move(s));
  }
  if (shapes.empty()) fail(Status::invalid_argument, "{}: no weight shapes (every line is blank or a comment)", origin);
  return merge_duplicate_shapes(std::move(shapes));
}

std::vector<WeightShape> merge_duplicate_shapes(std::vector<WeightShape> shapes) {
  std::vector<WeightShape> kept;
  // (N, K, groups) -> the kept shapes of those numbers: their variants tell them apart
  std::map<std::tuple<int64_t, int64_t, int32_t>, std::vector<size_t>> by_numbers;
  for (WeightShape& s : shapes) {
    std::vector<size_t>& same_numbers = by_numbers[{s.n, s.k, s.groups}];
    bool duplicate = false;
    for (size_t i : same_numbers) duplicate = duplicate || kept[i].variants == s.variants;
    if (duplicate) continue;
    same_numbers.push_back(kept.size());
    kept.push_back(std::move(s));
  }
  return kept;
}

std::vector<std::string> builtin_manifest_names() {
  std::vector<std::string> names;
  for (const EmbeddedFile& f : embedded_manifests()) {
    std::string name = f.name;
    names.push_back(name.substr(0, name.rfind('.')));
  }
  return names;
}

std::vector<WeightShape> load_manifest(const std::string& name_or_path, const PrewarmVariants& base) {
  for (const EmbeddedFile& f : embedded_manifests())
    if (name_or_path + ".txt" == f.name) return parse_manifest(std::string_view(f.data, f.size), f.name, base);
  std::string why;
  const auto text = read_file_following(name_or_path, kMaxManifestBytes, &why);
  if (!text) {
    if (!why.empty()) fail(Status::invalid_argument, "manifest: {}", why);
    std::string names;
    for (const std::string& n : builtin_manifest_names()) names += " " + n;
    fail(Status::invalid_argument, "manifest `{}` is neither a built-in manifest ({} ) nor a file", name_or_path, names);
  }
  return parse_manifest(std::string_view(text->data(), text->size()), name_or_path, base);
}

WeightShape parse_shape(std::string_view text, const PrewarmVariants& base) {
  WeightShape s;
  s.name = std::string(text);
  s.variants = base;
  std::vector<int64_t> v;
  for (size_t start = 0; start <= text.size();) {
    const size_t end = std::min(text.find(',', start), text.size());
    int64_t x = 0;
    if (!parse_int(text.substr(start, end - start), x))
      fail(Status::invalid_argument, "--shape `{}`: expected N,K or N,K,G with integers", text);
    v.push_back(x);
    start = end + 1;
  }
  if (v.size() < 2 || v.size() > 3) fail(Status::invalid_argument, "--shape `{}`: expected N,K or N,K,G", text);
  s.n = v[0];
  s.k = v[1];
  const int64_t groups = v.size() == 3 ? v[2] : 1;
  if (const std::string why = weight_shape_problem(s.n, s.k, groups); !why.empty())
    fail(Status::invalid_argument, "--shape `{}`: {}", text, why);
  s.groups = static_cast<int32_t>(groups);
  return s;
}

}  // namespace nvfp4::jit::detail
