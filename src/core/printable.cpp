#include "core/printable.hpp"

#include <fmt/format.h>

namespace nvfp4::jit::detail {

size_t utf8_length(std::string_view text, size_t i) {
  const auto byte = [&](size_t k) { return k < text.size() ? static_cast<unsigned char>(text[k]) : 0u; };
  const unsigned c = byte(i);
  const auto cont = [&](size_t k) { return (byte(k) & 0xC0) == 0x80; };
  if (c >= 0xC2 && c <= 0xDF) return cont(i + 1) ? 2 : 0;
  if (c >= 0xE0 && c <= 0xEF) {
    const unsigned c1 = byte(i + 1);
    if ((c == 0xE0 && c1 < 0xA0) || (c == 0xED && c1 > 0x9F)) return 0;  // overlong, surrogate
    return cont(i + 1) && cont(i + 2) ? 3 : 0;
  }
  if (c >= 0xF0 && c <= 0xF4) {
    const unsigned c1 = byte(i + 1);
    if ((c == 0xF0 && c1 < 0x90) || (c == 0xF4 && c1 > 0x8F)) return 0;
    return cont(i + 1) && cont(i + 2) && cont(i + 3) ? 4 : 0;
  }
  return 0;
}

std::string printable(std::string_view text, size_t max_bytes) {
  std::string out;
  const size_t shown = std::min(text.size(), max_bytes);
  for (size_t i = 0; i < shown;) {
    const unsigned char c = static_cast<unsigned char>(text[i]);
    if (c >= 0x20 && c < 0x7f) out += char(c), ++i;
    else if (const size_t n = c >= 0x80 ? utf8_length(text, i) : 0; n && i + n <= shown) out.append(text, i, n), i += n;
    else out += fmt::format("\\x{:02x}", unsigned(c)), ++i;
  }
  if (shown < text.size()) out += "...";
  return out;
}

}  // namespace nvfp4::jit::detail
