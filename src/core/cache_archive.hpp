// Shipping a prewarmed cache: `cache export FILE` writes the primary root's verified kernels
// and tuning tables into one tar file; `cache import FILE` checks every member and adds what
// is new to the primary root (or serve the file's contents unpacked as a read-only root
// through NVFP4_JIT_CACHE_PATH). Plain ustar, so `tar -tf` lists it.
#pragma once
#include <cstddef>
#include <string>
#include <vector>

#include "core/disk_cache.hpp"

namespace nvfp4::jit::detail {

struct ArchiveSummary {
  size_t kernels = 0, tables = 0;  // exported, or imported as new
  size_t already_present = 0;      // import: identical entries the root had
  std::vector<std::string> skipped;  // members left out, with why
};

// FILE: a regular file (new, or replaced) or `-`, standard output (core/archive_io.hpp).
// Throws Error(invalid_argument) when FILE is something else, Error(cache_error) when it
// cannot be written.
ArchiveSummary export_cache(const DiskCache& cache, const std::string& file);
// FILE: a regular file or `-`, standard input; at most 1 GiB. Throws Error when FILE cannot be
// read or is not a tar file, or the root is not writable.
ArchiveSummary import_cache(DiskCache& cache, const std::string& file);

}  // namespace nvfp4::jit::detail
