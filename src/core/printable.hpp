// Text from files and archives (a sidecar's fields, a manifest's line) shown on a terminal:
// bytes that would act there (escape sequences, carriage returns) or that are not UTF-8 are
// written as \xNN, so what is printed is what the file holds.
#pragma once
#include <cstddef>
#include <string>
#include <string_view>

namespace nvfp4::jit::detail {

// Length of the well-formed UTF-8 sequence at text[i] (0: not one; overlong forms and
// surrogates are not).
size_t utf8_length(std::string_view text, size_t i);

// `text` with every byte below 0x20, 0x7f and every byte not in a well-formed UTF-8 sequence as
// \xNN; at most `max_bytes` of `text` are shown, then "...".
std::string printable(std::string_view text, size_t max_bytes = std::string_view::npos);

}  // namespace nvfp4::jit::detail
