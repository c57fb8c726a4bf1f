// Compiled kernels: an in-process table in front of the disk cache in front of NVRTC.
// Single-flight: concurrent requests for one spec (threads here, processes through the
// disk cache's per-key lock) compile it once.
#pragma once
#include <cstdint>
#include <memory>
#include <vector>

#include "core/codegen.hpp"
#include "core/disk_cache.hpp"
#include "core/key.hpp"
#include "core/spec.hpp"

namespace nvfp4::jit::detail {

struct CompiledKernel {
  GeneratedKernel kernel;
  CacheKey key;
  std::vector<char> cubin;
};

enum class Origin { memory, disk, compiled };

struct StoreStats {
  uint64_t compiled = 0, disk_hits = 0, memory_hits = 0, failed = 0;
  double compile_seconds = 0;
};

// The key of a spec as it would be compiled here (source, NVRTC, options, arch).
CacheKey key_for(const KernelSpec& spec, const GeneratedKernel& kernel);

class KernelStore {
 public:
  static KernelStore& instance();  // uses CacheRoots::from_env() on first use

  // Throws Error on compile failure; a later call tries again. With `defer_busy`, a kernel that
  // is neither loaded nor on disk and whose key another process is compiling is not waited
  // for: get returns null (a prewarm comes back to it later).
  std::shared_ptr<const CompiledKernel> get(const KernelSpec& spec, Origin* origin = nullptr, bool defer_busy = false);
  DiskCache& disk() { return disk_; }
  StoreStats stats() const;

  explicit KernelStore(CacheRoots roots);
  ~KernelStore();

 private:
  std::shared_ptr<const CompiledKernel> build(const KernelSpec& spec, Origin* origin, bool defer_busy);

  DiskCache disk_;
  struct Table;
  std::unique_ptr<Table> table_;
};

}  // namespace nvfp4::jit::detail
