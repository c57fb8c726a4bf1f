#include "ops/gemm/backend.hpp"

#include <algorithm>
#include <cstdlib>
#include <iterator>
#include <mutex>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "core/error.hpp"
#include "core/op_registry.hpp"
#include "ops/gemm/m_buckets.hpp"

namespace nvfp4::jit::detail {

namespace {

struct Backends {
  std::mutex mutex;
  std::vector<const GemmBackend*> all;  // the newest last
};

Backends& backends() {
  static Backends* b = new Backends;  // leaked: kernels may be launched during static destruction
  return *b;
}

// A spec its arch's backend cannot build (a tile of another backend's, say) is refused here,
// before it becomes a kernel.
GeneratedKernel generate_gemm(const KernelSpec& key) {
  const GemmSpec spec = gemm_spec_of(key);
  const GemmBackend& backend = gemm_backend(spec.arch, "codegen");
  std::string why = backend.unsupported(spec);
  if (why.empty()) why = backend.tile_problem(spec);
  if (!why.empty()) fail(Status::unsupported, "codegen: {} on {}: {}", key.describe(), to_string(spec.arch), why);
  return backend.generate(spec);
}
std::string gemm_kernel_name(const KernelSpec& key) { return gemm_backend(key.arch, "codegen").kernel_name(gemm_spec_of(key)); }

nlohmann::ordered_json gemm_json(const KernelSpec& key) { return gemm_spec_json(gemm_spec_of(key)); }

// (a backend's kernel_spec keeps what its shared memory depends on: the tile, K, the layout)
unsigned gemm_shared_bytes(const KernelSpec& key) {
  return gemm_backend(key.arch, "nvfp4::jit::gemm").shared_bytes(gemm_spec_of(key));
}

std::pair<int64_t, int64_t> gemm_weight_shape(const KernelSpec& key) {
  const GemmSpec spec = gemm_spec_of(key);
  return {spec.n, spec.k};
}

KernelSpec gemm_tuned_problem(const KernelSpec& tuned) { return gemm_key(gemm_spec(gemm_spec_of(tuned), GemmTile{})); }

std::string gemm_from_json(const nlohmann::json& object, Arch arch, KernelSpec* key) {
  GemmSpec spec;
  std::string why = gemm_spec_from_json(object, arch, &spec);
  if (why.empty()) *key = gemm_key(spec);
  return why;
}

std::string gemm_tuned_problem_why(const KernelSpec& tuned, int m_bucket) {
  const GemmSpec spec = gemm_spec_of(tuned);
  if (std::find(std::begin(kGemmMBuckets), std::end(kGemmMBuckets), m_bucket) == std::end(kGemmMBuckets))
    return fmt::format("M bucket {} does not exist", m_bucket);
  const GemmBackend* backend = find_gemm_backend(spec.arch);
  if (!backend) return fmt::format("no GEMM backend for {}", to_string(spec.arch));
  if (std::string why = backend->unsupported(gemm_spec(spec, GemmTile{})); !why.empty()) return why;
  return backend->tile_problem(spec);
}

const bool registered =
    register_op(Op::gemm, {.generate = generate_gemm, .kernel_name = gemm_kernel_name, .to_json = gemm_json,
                           .shared_bytes = gemm_shared_bytes, .weight_shape = gemm_weight_shape, .tuned_problem = gemm_tuned_problem,
                           .from_json = gemm_from_json, .tuned_problem_why = gemm_tuned_problem_why});

}  // namespace

std::string GemmBackend::tile_problem(const GemmSpec& spec) const {
  if (spec.tile.split_k > 1 && gemm_problem_grouped(spec)) return "a grouped GEMM runs unsplit";  // no backend's grouped kernel splits K
  return arch_tile_problem(spec);
}

bool register_gemm_backend(const GemmBackend* backend) {
  Backends& b = backends();
  std::lock_guard lock(b.mutex);
  b.all.push_back(backend);
  return true;
}

void unregister_gemm_backend(const GemmBackend* backend) {
  Backends& b = backends();
  std::lock_guard lock(b.mutex);
  b.all.erase(std::remove(b.all.begin(), b.all.end(), backend), b.all.end());
}

const GemmBackend* find_gemm_backend(Arch arch) {
  Backends& b = backends();
  std::lock_guard lock(b.mutex);
  for (const GemmBackend* backend : b.all)
    if (backend->emulates(arch)) return backend;
  for (auto it = b.all.rbegin(); it != b.all.rend(); ++it)
    if ((*it)->serves(arch)) return *it;
  return nullptr;
}

const GemmBackend& gemm_backend(Arch arch, const char* who) {
  if (const GemmBackend* backend = find_gemm_backend(arch)) return *backend;
  fail(Status::unsupported, "{}: the NVFP4 GEMM has no kernels for {} yet", who, to_string(arch));
}

bool emulation_requested(std::initializer_list<Arch> archs) {
  const char* v = std::getenv("NVFP4_JIT_EMULATE_ARCH");
  if (!v) return false;
  for (Arch a : archs)
    if (to_string(a) == v) return true;
  return false;
}

GemmSpec gemm_kernel_spec(const GemmBackend& backend, const GemmSpec& problem, const GemmTile& tile) {
  return backend.kernel_spec(gemm_spec(problem, tile));
}

}  // namespace nvfp4::jit::detail
