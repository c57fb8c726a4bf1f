// How the command names the NVRTC it uses (nvfp4-jit info, cache stats).
#include <fmt/format.h>

#include "cli/cli.hpp"
#include "cli/json_out.hpp"
#include "core/nvrtc_library.hpp"

namespace nvfp4::jit::cli {

std::string nvrtc_line() {
  const detail::NvrtcLoaded& n = detail::nvrtc_loaded();
  if (!n.error.empty()) return "none: " + n.error;
  return fmt::format("{}, {} ({})", n.version, n.path, detail::describe(n.source));
}

void add_nvrtc_fields(Json& out) {
  const detail::NvrtcLoaded& n = detail::nvrtc_loaded();
  out["nvrtc"] = n.version;
  out["nvrtc_path"] = n.path;
  out["nvrtc_source"] = n.error.empty() ? detail::to_string(n.source) : "";
  out["nvrtc_error"] = n.error;
}

}  // namespace nvfp4::jit::cli
