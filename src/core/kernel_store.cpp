#include "core/kernel_store.hpp"

#include <atomic>
#include <chrono>
#include <future>
#include <mutex>
#include <unordered_map>

#include "core/error.hpp"
#include "core/nvrtc_compiler.hpp"
#include "core/nvrtc_mismatch.hpp"
#include "core/embedded.hpp"

namespace nvfp4::jit::detail {

using Future = std::shared_future<std::shared_ptr<const CompiledKernel>>;

struct KernelStore::Table {
  mutable std::mutex mutex;
  std::unordered_map<KernelSpec, Future, KernelSpecHash> entries;
  std::atomic<uint64_t> compiled{0}, disk_hits{0}, memory_hits{0}, failed{0}, compile_us{0};
  std::atomic<bool> missed{false};  // a disk miss was seen (the NVRTC mismatch check ran)
};

CacheKey key_for(const KernelSpec& spec, const GeneratedKernel& kernel) {
  const std::vector<std::string> options = nvrtc_options(spec.arch);
  return compute_key({templates_hash(), kernel.source, nvrtc_version(), options, spec.arch});
}

KernelStore& KernelStore::instance() {
  static KernelStore store(CacheRoots::from_env());
  return store;
}

KernelStore::KernelStore(CacheRoots roots) : disk_(std::move(roots)), table_(std::make_unique<Table>()) {}
KernelStore::~KernelStore() = default;

StoreStats KernelStore::stats() const {
  return {table_->compiled, table_->disk_hits, table_->memory_hits, table_->failed, table_->compile_us * 1e-6};
}

namespace {
// build() found the key locked by another process and was asked not to wait.
struct KeyBusy {};
}  // namespace

std::shared_ptr<const CompiledKernel> KernelStore::get(const KernelSpec& spec, Origin* origin, bool defer_busy) {
  std::promise<std::shared_ptr<const CompiledKernel>> promise;
  Future future;
  {
    std::lock_guard lock(table_->mutex);
    auto [it, inserted] = table_->entries.try_emplace(spec);
    if (!inserted) {
      future = it->second;
    } else {
      it->second = promise.get_future().share();
    }
  }
  if (future.valid()) {  // someone else has it, or is building it
    try {
      auto found = future.get();
      ++table_->memory_hits;
      if (origin) *origin = Origin::memory;
      return found;
    } catch (const KeyBusy&) {  // that thread deferred it: ours to build or defer
      return get(spec, origin, defer_busy);
    }
  }
  try {
    auto compiled = build(spec, origin, defer_busy);
    promise.set_value(compiled);
    return compiled;
  } catch (const KeyBusy&) {
    {
      std::lock_guard lock(table_->mutex);
      table_->entries.erase(spec);  // before waiters retry
    }
    promise.set_exception(std::current_exception());
    return nullptr;
  } catch (...) {
    ++table_->failed;
    promise.set_exception(std::current_exception());
    std::lock_guard lock(table_->mutex);
    table_->entries.erase(spec);  // let a later call try again
    throw;
  }
}

std::shared_ptr<const CompiledKernel> KernelStore::build(const KernelSpec& spec, Origin* origin, bool defer_busy) {
  auto result = std::make_shared<CompiledKernel>();
  result->kernel = generate(spec);
  result->key = key_for(spec, result->kernel);
  auto from_disk = [&] {
    if (auto cubin = disk_.load(result->key, spec.arch, result->kernel.name)) {
      result->cubin = std::move(*cubin);
      ++table_->disk_hits;
      if (origin) *origin = Origin::disk;
      return true;
    }
    return false;
  };
  if (from_disk()) return result;
  if (!table_->missed.exchange(true)) warn_if_built_by_other_nvrtc(disk_);
  bool busy = false;
  const DiskCache::Lock lock = defer_busy ? disk_.try_lock(result->key, spec.arch, &busy) : disk_.lock(result->key, spec.arch);
  if (busy) throw KeyBusy{};
  if (from_disk()) return result;  // another process compiled it while we waited
  const auto start = std::chrono::steady_clock::now();
  result->cubin = nvrtc_compile(result->kernel, spec.arch);
  table_->compile_us += std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::steady_clock::now() - start).count();
  ++table_->compiled;
  if (origin) *origin = Origin::compiled;
  disk_.store(result->key, spec.arch, result->cubin, spec.to_json(), result->kernel.name);
  return result;
}

}  // namespace nvfp4::jit::detail
