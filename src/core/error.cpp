#include "core/error.hpp"

#include <cstdio>
#include <mutex>
#include <set>

namespace nvfp4::jit::detail {

void warn_once(const std::string& topic, const std::string& message) {
  static std::mutex mutex;
  static std::set<std::string> seen;
  std::lock_guard lock(mutex);
  if (!seen.insert(topic).second) return;
  std::fprintf(stderr, "nvfp4-jit: warning: %s\n", message.c_str());
}

}  // namespace nvfp4::jit::detail
