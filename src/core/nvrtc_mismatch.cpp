#include "core/nvrtc_mismatch.hpp"

#include "core/error.hpp"
#include "core/nvrtc_library.hpp"

namespace nvfp4::jit::detail {

NvrtcCounts count_by_nvrtc(const std::vector<CacheEntryInfo>& entries) {
  NvrtcCounts counts;
  for (const CacheEntryInfo& e : entries) ++counts[e.root][e.nvrtc];
  return counts;
}

std::string other_nvrtc_warning(const NvrtcCounts& counts, const std::string& ours, const std::string& our_line,
                                const std::string& our_path) {
  std::string roots;
  for (const auto& [root, versions] : counts) {
    std::string others;
    for (const auto& [version, entries] : versions)
      if (!version.empty() && version != ours)
        others += fmt::format("{}{} by NVRTC {}", others.empty() ? "" : ", ", entries, version);
    if (!others.empty()) roots += fmt::format("{}{}: {}", roots.empty() ? "" : "; ", root, others);
  }
  if (roots.empty()) return {};
  return fmt::format(
      "this process compiles with NVRTC {} ({}), but the cache holds kernels built by another NVRTC ({}): a kernel is looked up under the "
      "version of the NVRTC that compiles it, so those are not used here and are compiled again. Prewarm with "
      "this process's NVRTC: {}={} nvfp4-jit prewarm ... (or run this process with the NVRTC that built them: "
      "{}=<its libnvrtc.so>)",
      ours, our_line, roots, kNvrtcEnv, our_path, kNvrtcEnv);
}

void warn_if_built_by_other_nvrtc(const DiskCache& disk) {
  const NvrtcLoaded& nvrtc = nvrtc_loaded();
  if (!nvrtc.error.empty()) return;
  try {
    const NvrtcCounts counts = count_by_nvrtc(disk.list(false));
    const std::string line = fmt::format("{}, {}", nvrtc.path, describe(nvrtc.source));
    const std::string message = other_nvrtc_warning(counts, nvrtc.version, line, nvrtc.path);
    if (message.empty()) return;
    std::string topic = "other-nvrtc";
    for (const auto& entry : counts) topic += ":" + entry.first;
    warn_once(topic, message);
  } catch (const std::exception&) {
    // A root that cannot be listed now is one that cannot be read: its own warning says so.
  }
}

}  // namespace nvfp4::jit::detail
