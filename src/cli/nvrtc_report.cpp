// How the command names the NVRTC it uses (nvfp4-jit info, cache stats).
#include <fmt/format.h>

#include "cli/cli.hpp"
#include "core/nvrtc_library.hpp"

namespace nvfp4::jit::cli {

std::string nvrtc_line() {
  const detail::NvrtcLoaded& n = detail::nvrtc_loaded();
  if (!n.error.empty()) return "none: " + n.error;
  return fmt::format("{}, {} ({})", n.version, n.path, detail::describe(n.source));
}

std::string nvrtc_json_fields() {
  const detail::NvrtcLoaded& n = detail::nvrtc_loaded();
  const bool ok = n.error.empty();
  return fmt::format(R"("nvrtc":"{}","nvrtc_path":"{}","nvrtc_source":"{}","nvrtc_error":"{}")", json_escape(n.version),
                     json_escape(n.path), ok ? detail::to_string(n.source) : "", json_escape(n.error));
}

}  // namespace nvfp4::jit::cli
