#include <algorithm>
#include <charconv>
#include <fmt/format.h>

#include "cli/cli.hpp"
#include "core/printable.hpp"

namespace nvfp4::jit::cli {

Args::Args(std::vector<std::string> argv, const std::vector<std::string>& valued_flags) {
  auto valued = [&](const std::string& f) { return std::find(valued_flags.begin(), valued_flags.end(), f) != valued_flags.end(); };
  for (size_t i = 0; i < argv.size(); ++i) {
    const std::string& a = argv[i];
    if (a.size() > 1 && a[0] == '-') {
      std::string flag = a, value;
      if (const size_t eq = a.find('='); eq != std::string::npos) {
        flag = a.substr(0, eq);
        value = a.substr(eq + 1);
      } else if (a.size() > 2 && a[1] != '-' && valued(a.substr(0, 2))) {  // make's `-j2`
        flag = a.substr(0, 2);
        value = a.substr(2);
      } else if (valued(flag)) {
        if (i + 1 >= argv.size()) throw UsageError(fmt::format("{} needs a value", flag));
        value = argv[++i];
      }
      values_[flag].push_back(value);
    } else {
      positional_.push_back(a);
    }
  }
}

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

void Args::allow_only(const std::vector<std::string>& known) const {
  for (const auto& [flag, _] : values_)
    if (std::find(known.begin(), known.end(), flag) == known.end()) throw UsageError(fmt::format("unknown option {}", flag));
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

// Escaped for a JSON string whatever `text` holds: bytes that are not UTF-8 (a file name, a
// sidecar, a device name can hold any) become U+FFFD, so the output always parses.
std::string json_escape(const std::string& text) {
  std::string out;
  for (size_t i = 0; i < text.size();) {
    const unsigned char c = static_cast<unsigned char>(text[i]);
    if (c == '"' || c == '\\') out += '\\', out += char(c), ++i;
    else if (c == '\n') out += "\\n", ++i;
    else if (c < 0x20 || c == 0x7f) out += fmt::format("\\u{:04x}", unsigned(c)), ++i;
    else if (c < 0x80) out += char(c), ++i;
    else if (const size_t n = detail::utf8_length(text, i)) out.append(text, i, n), i += n;
    else out += "\\ufffd", ++i;
  }
  return out;
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
