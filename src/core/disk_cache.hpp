// The on-disk CUBIN cache (DESIGN.md section 4).
//
//   <root>/v1/<arch>/<kk>/<key>.cubin   the CUBIN, kk = first two hex digits of the key
//   <root>/v1/<arch>/<kk>/<key>.json    sidecar: key, arch, size, xxh3-64 checksum, spec, versions
//   <root>/v1/<arch>/<kk>/<key>.lock    flock'ed while a process compiles that key
//
// Writes go to a temp file in the same directory, fsync, rename. Reads verify the sidecar and
// checksum: anything that does not verify is a miss (and is replaced by the next store). A root
// that cannot be written degrades the process to memory-only, with one warning.
#pragma once
#include <chrono>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "core/key.hpp"
#include "core/spec.hpp"

namespace nvfp4::jit::detail {

struct CacheRoots {
  std::string primary;                 // writable; empty: memory-only
  std::vector<std::string> read_only;  // NVFP4_JIT_CACHE_PATH
  static CacheRoots from_env();
};

struct CacheEntryInfo {
  std::string root, arch, key, path;
  uint64_t size = 0;
  std::string created, spec_json;
  std::string problem;  // empty when the entry verifies
};

class DiskCache {
 public:
  explicit DiskCache(CacheRoots roots);

  std::optional<std::vector<char>> load(const CacheKey& key, Arch arch);
  // Stores atomically; on failure the cache turns memory-only (one warning) and returns false.
  bool store(const CacheKey& key, Arch arch, std::span<const char> cubin, const std::string& spec_json);

  // Exclusive across processes while alive; inert when memory-only.
  class Lock {
   public:
    explicit Lock(int fd = -1) : fd_(fd) {}
    Lock(Lock&& o) noexcept : fd_(o.fd_) { o.fd_ = -1; }
    Lock& operator=(Lock&&) = delete;
    ~Lock();

   private:
    int fd_;
  };
  Lock lock(const CacheKey& key, Arch arch);

  bool writable() const { return writable_; }
  const CacheRoots& roots() const { return roots_; }

  // For the command-line tools: every entry of every root, verified when `verify`.
  std::vector<CacheEntryInfo> list(bool verify) const;
  // Removes every entry (and stray temp/lock file) of the primary root; returns files removed.
  size_t clear();
  // Removes one entry's files from the primary root.
  bool remove(const CacheEntryInfo& entry);
  // Removes the primary root's entries written more than `age` ago; returns entries removed.
  size_t prune(std::chrono::seconds age);

 private:
  std::string entry_dir(const std::string& root, const CacheKey& key, Arch arch) const;
  bool ensure_dir(const std::string& dir);
  void degrade(const std::string& why);

  CacheRoots roots_;
  bool writable_ = false;
};

// The value of "name": in a flat sidecar JSON object ("" when absent; strings unquoted).
std::string sidecar_field(const std::string& json, std::string_view name);

// Why a cubin + sidecar pair does not verify against `key` and `arch` (empty: it verifies).
std::string verify_entry(const std::vector<char>& cubin, const std::string& sidecar, const std::string& key_hex,
                         std::string_view arch);

}  // namespace nvfp4::jit::detail
