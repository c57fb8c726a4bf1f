// Throwing errors with a formatted message, and warnings printed once per process.
#pragma once
#include <fmt/format.h>

#include <string>

#include "nvfp4/jit.hpp"

namespace nvfp4::jit::detail {

template <class... Args>
[[noreturn]] void fail(Status status, fmt::format_string<Args...> format, Args&&... args) {
  throw Error(status, fmt::format(format, std::forward<Args>(args)...));
}

// Prints "nvfp4-jit: warning: <message>" to stderr the first time `topic` is seen.
void warn_once(const std::string& topic, const std::string& message);

}  // namespace nvfp4::jit::detail
