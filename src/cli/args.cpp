#include <algorithm>
#include <charconv>
#include <fmt/format.h>

#include "cli/cli.hpp"

namespace nvfp4::jit::cli {

std::string Args::get(const std::string& flag, const std::string& fallback) const {
  auto it = values_.find(flag);
  return it == values_.end() ? fallback : it->second.back();
}

std::vector<std::string> Args::all(const std::string& flag) const {
  auto it = values_.find(flag);
  return it == values_.end() ? std::vector<std::string>{} : it->second;
}

int Args::get_int(const std::string& flag, int fallback, int lo, int hi) const {
  if (!has(flag)) return fallback;
  const std::string text = get(flag);
  int v = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec == std::errc{} && end == text.data() + text.size() && v >= lo && v <= hi) return v;
  throw UsageError(fmt::format("{}: expects an integer from {} to {}, got `{}`", flag, lo, hi, text));
}

std::vector<std::string> split(const std::string& text, char sep) {
  std::vector<std::string> parts;
  for (size_t start = 0; start <= text.size();) {
    const size_t end = std::min(text.find(sep, start), text.size());
    if (end > start) parts.push_back(text.substr(start, end - start));
    start = end + 1;
  }
  return parts;
}

namespace {
// Levenshtein distance: the fewest letters inserted, deleted or replaced to turn a into b.
size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diagonal = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t above = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diagonal = above;
    }
  }
  return row[b.size()];
}
}  // namespace

std::string did_you_mean(const std::string& given, const std::vector<std::string>& known) {
  const std::string* best = nullptr;
  size_t best_distance = 0;
  for (const std::string& name : known)
    if (const size_t d = edit_distance(given, name); !best || d < best_distance) best = &name, best_distance = d;
  if (!best || best_distance == 0 || best_distance > std::max<size_t>(1, best->size() / 3)) return "";
  return fmt::format(" (did you mean `{}`?)", *best);
}

std::vector<detail::WeightShape> shapes_from(const Args& args, const detail::PrewarmVariants& variants) {
  std::vector<detail::WeightShape> shapes;
  for (const std::string& m : args.all("--manifest")) {
    auto more = detail::load_manifest(m, variants);
    shapes.insert(shapes.end(), more.begin(), more.end());
  }
  for (const std::string& s : args.all("--shape")) shapes.push_back(detail::parse_shape(s, variants));
  if (shapes.empty()) throw UsageError("give at least one --manifest or --shape");
  return detail::merge_duplicate_shapes(std::move(shapes));
}

}  // namespace nvfp4::jit::cli
