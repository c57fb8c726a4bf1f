// Reading JSON written by this library back with every field checked: a key given twice is
// named (the parser would keep the last silently), and each field is range-checked before it
// is narrowed to the field it fills.
#pragma once
#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

namespace nvfp4::jit::detail {

// `text` as one JSON value, or discarded. A key given twice in an object (which the parser would
// take the last of, silently) is named in `duplicate`.
nlohmann::json parse_json_once(const std::string& text, std::string* duplicate);

// Reads the fields of one JSON object, each checked against its range before it is narrowed to
// the field it fills; the first field that is missing, of another type or out of range is `why`.
class FieldReader {
 public:
  explicit FieldReader(const nlohmann::json& object) : object_(object) {}

  int64_t integer(const char* name, int64_t lo, int64_t hi);
  double real(const char* name, double lo, double hi);
  std::string text(const char* name);
  bool boolean(const char* name);
  const std::string& why() const { return why_; }

 private:
  const nlohmann::json* find(const char* name);
  template <class T>
  T bad(const std::string& why, T fallback) {
    if (why_.empty()) why_ = why;
    return fallback;
  }
  const nlohmann::json& object_;
  std::string why_;
};

}  // namespace nvfp4::jit::detail
