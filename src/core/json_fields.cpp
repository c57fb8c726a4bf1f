#include "core/json_fields.hpp"

#include <set>
#include <vector>

#include <fmt/format.h>

namespace nvfp4::jit::detail {

using nlohmann::json;

json parse_json_once(const std::string& text, std::string* duplicate) {
  std::vector<std::set<std::string>> keys;  // of each open object
  const json::parser_callback_t note_keys = [&](int, json::parse_event_t event, json& parsed) {
    if (event == json::parse_event_t::object_start) keys.emplace_back();
    else if (event == json::parse_event_t::object_end && !keys.empty()) keys.pop_back();
    else if (event == json::parse_event_t::key && !keys.empty() && !keys.back().insert(parsed.get<std::string>()).second &&
             duplicate->empty())
      *duplicate = parsed.get<std::string>();
    return true;
  };
  return json::parse(text, note_keys, /*allow_exceptions=*/false);
}

int64_t FieldReader::integer(const char* name, int64_t lo, int64_t hi) {
  const json* v = find(name);
  if (!v) return lo;
  if (!v->is_number_integer()) return bad(fmt::format("{} = {} is not an integer", name, v->dump()), lo);
  // an unsigned value past INT64_MAX would wrap in get<int64_t>
  const bool fits = v->is_number_unsigned() ? v->get<uint64_t>() <= uint64_t(hi) && uint64_t(lo) <= v->get<uint64_t>()
                                            : v->get<int64_t>() >= lo && v->get<int64_t>() <= hi;
  if (!fits) return bad(fmt::format("{} = {} is out of range ({} to {})", name, v->dump(), lo, hi), lo);
  return v->get<int64_t>();
}

double FieldReader::real(const char* name, double lo, double hi) {
  const json* v = find(name);
  if (!v) return lo;
  if (!v->is_number()) return bad(fmt::format("{} = {} is not a number", name, v->dump()), lo);
  const double x = v->get<double>();
  if (!(x >= lo && x <= hi)) return bad(fmt::format("{} = {} is out of range ({} to {})", name, v->dump(), lo, hi), lo);
  return x;
}

std::string FieldReader::text(const char* name) {
  const json* v = find(name);
  if (!v) return {};
  if (!v->is_string()) return bad(fmt::format("{} = {} is not a string", name, v->dump()), std::string{});
  return v->get<std::string>();
}

bool FieldReader::boolean(const char* name) {
  const json* v = find(name);
  if (!v) return false;
  if (!v->is_boolean()) return bad(fmt::format("{} = {} is not true or false", name, v->dump()), false);
  return v->get<bool>();
}

const json* FieldReader::find(const char* name) {
  const auto it = object_.find(name);
  if (it != object_.end()) return &*it;
  bad(fmt::format("{} is missing", name), 0);
  return nullptr;
}

}  // namespace nvfp4::jit::detail
