// Kernels are keyed by the NVRTC version that compiles them, so a cache prewarmed with one
// NVRTC is a silent miss for a process that loads another. This says so, once, on a process's
// first disk-cache miss (a miss is followed by a compile anyway; hits never look).
#pragma once
#include <map>
#include <string>
#include <vector>

#include "core/disk_cache.hpp"

namespace nvfp4::jit::detail {

// root -> NVRTC version (a sidecar's "nvrtc") -> entries.
using NvrtcCounts = std::map<std::string, std::map<std::string, size_t>>;
NvrtcCounts count_by_nvrtc(const std::vector<CacheEntryInfo>& entries);

// The warning for roots holding entries built by an NVRTC other than `ours`, "" when none does
// (entries whose sidecar names no NVRTC are left out). `our_line`: this NVRTC in words (path
// and how it was found); `our_path`: what NVFP4_JIT_NVRTC is set to in the fix.
std::string other_nvrtc_warning(const NvrtcCounts& counts, const std::string& ours, const std::string& our_line,
                                const std::string& our_path);

// Lists `disk`'s roots and prints other_nvrtc_warning once per set of roots (no throw; nothing
// when no NVRTC is loaded).
void warn_if_built_by_other_nvrtc(const DiskCache& disk);

}  // namespace nvfp4::jit::detail
