// The GEMM's per-arch backends. The front (validation, M buckets, tile choice, tuner, prewarm,
// dispatch) is written once against this interface; an arch adds a folder with one backend
// and registers it. A backend's tiles travel through the front as GemmTile, which only the
// backend interprets.
#pragma once
#include <cstddef>
#include <initializer_list>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "core/codegen.hpp"
#include "core/launcher.hpp"
#include "core/tensor_map.hpp"
#include "ops/gemm/gemm_spec.hpp"
#include "ops/gemm/call.hpp"

namespace nvfp4::jit::detail {

// A launch of one kernel on m rows, with what depends on the spec and M only: grid, block,
// cluster, shared memory, the parameter block's shape fields, and what the backend's bind needs
// of the spec. A call binds its pointers into a copy of `params`.
struct GemmPlan {
  static constexpr size_t kMaxParamBytes = 768;
  static constexpr size_t kMaxBindingBytes = 64;
  LaunchShape shape;          // shape.programmatic: set by the front where the caller allows it
  bool early_launch = false;  // worth launching early when the weights are static
  alignas(64) unsigned char params[kMaxParamBytes] = {};
  // the backend's own struct (plan_binding): tensor-map boxes and the like, so a call's bind
  // reads them instead of working them out of the tile again
  alignas(8) unsigned char binding[kMaxBindingBytes] = {};
};

template <class Binding>
Binding& plan_binding(GemmPlan& plan) {
  static_assert(sizeof(Binding) <= GemmPlan::kMaxBindingBytes && alignof(Binding) <= 8 &&
                std::is_trivially_copyable_v<Binding>);
  return *reinterpret_cast<Binding*>(plan.binding);
}
template <class Binding>
const Binding& plan_binding(const GemmPlan& plan) {
  return plan_binding<Binding>(const_cast<GemmPlan&>(plan));
}

class GemmBackend {
 public:
  virtual ~GemmBackend() = default;
  virtual std::string_view name() const = 0;
  virtual bool serves(Arch arch) const = 0;
  // Whether its kernels take NVFP4 activations as they are (an FP4 MMA); else the front decodes
  // them to BF16 first and runs the BF16 kernel.
  virtual bool native_fp4_activations() const { return false; }
  // Whether its 16-bit kernels decode NVFP4 activations as they load them (a problem with
  // a_dtype nvfp4, whose kernel's producers decode A's stages): the front then runs W4A4 calls
  // of few rows a tile (w4a4_runs_one_launch) in one launch, and decodes A first for the rest.
  virtual bool decodes_fp4_activations() const { return false; }
  // Whether `call` (W4A4 or not) runs on its NVFP4 activations as they are: a_dtype nvfp4 in
  // its kernel's problem, no decode launch first.
  bool runs_fp4_activations(const GemmCall& call) const {
    return call.args.a_dtype == DType::nvfp4 &&
           (native_fp4_activations() || (decodes_fp4_activations() && w4a4_runs_one_launch(call)));
  }
  // A test facility: whether it runs its kernels on a device of `arch` in emulation now
  // (NVFP4_JIT_EMULATE_ARCH); such a backend takes precedence over the one serving `arch`.
  virtual bool emulates(Arch) const { return false; }
  // Why `problem` (a spec without tile) cannot run on this backend; empty when it can.
  virtual std::string unsupported(const GemmSpec& problem) const = 0;
  // The tile of a bucket's untuned calls with m rows (m is the bucket's largest for the
  // bucket's tile; a grouped call's m is rows per group): what the tuner starts from.
  virtual GemmTile heuristic(const GemmSpec& problem, int64_t m, int sm_count) const = 0;
  // The tile an untuned `call` with m rows runs: the heuristic's, or one the backend fits to
  // more of the call than its rows.
  virtual GemmTile call_heuristic(const GemmSpec& problem, const GemmCall& /*call*/, int64_t m, int sm_count) const {
    return heuristic(problem, m, sm_count);
  }
  // Every tile call_heuristic gives the calls with m rows, the heuristic's first: what prewarm
  // compiles, so no call meets a kernel it lacks.
  virtual std::vector<GemmTile> heuristic_tiles(const GemmSpec& problem, int64_t m, int sm_count) const {
    return {heuristic(problem, m, sm_count)};
  }
  // The tile a call with m rows runs where `tile` won m's bucket in the tuner: `tile` itself, or
  // one the backend fits to m's rows (sm_90a trims its row height).
  virtual GemmTile for_rows(const GemmTile& tile, int64_t /*m*/) const { return tile; }
  // The tuner's search space for a bucket, the heuristic's tile first.
  virtual std::vector<GemmTile> candidates(const GemmSpec& problem, int bucket, int sm_count) const = 0;
  // Why `spec`'s tile cannot be built or launched here; empty when it can: the rules of every
  // arch (a grouped GEMM runs unsplit), then the backend's own (arch_tile_problem).
  std::string tile_problem(const GemmSpec& spec) const;
  virtual std::string arch_tile_problem(const GemmSpec& spec) const = 0;
  // A tile in messages and tuning reports ("bm128 bk128 wg2 s4 ks1").
  virtual std::string describe(const GemmTile& tile) const = 0;
  // The spec of the kernel that runs `spec` (a problem with its tile): `spec` with the fields its
  // kernel takes as run-time arguments cleared, so problems differing only there share one
  // kernel. plan and bind take `spec` itself; kernel_name, generate and the cache this one.
  virtual GemmSpec kernel_spec(const GemmSpec& spec) const { return spec; }
  virtual std::string kernel_name(const GemmSpec& spec) const = 0;
  virtual GeneratedKernel generate(const GemmSpec& spec) const = 0;
  // Dynamic shared memory the kernel of `spec` needs.
  virtual unsigned shared_bytes(const GemmSpec& spec) const = 0;
  // Throws Error(invalid_argument) where m rows are more than one launch covers.
  virtual GemmPlan plan(const GemmSpec& spec, int64_t m, int sm_count) const = 0;
  // Writes the call's pointers into `params` (a copy of plan.params) and adds the tensor maps
  // they take to `maps` (the launch encodes each key once per thread). Per call: reads `plan`,
  // not the spec, and checks nothing the front checked.
  virtual void bind(const GemmPlan& plan, const GemmCall& call, void* params, TensorMapList& maps) const = 0;
};

// One line in the backend's own source file, e.g.
//   const bool registered = register_gemm_backend(&backend);
// A backend registered later for an arch takes precedence (a test's fake, say).
bool register_gemm_backend(const GemmBackend* backend);
void unregister_gemm_backend(const GemmBackend* backend);
// The backend that serves `arch`, or null.
const GemmBackend* find_gemm_backend(Arch arch);
// Whether NVFP4_JIT_EMULATE_ARCH names one of `archs` (a backend's emulates()).
bool emulation_requested(std::initializer_list<Arch> archs);
// Throws Error(unsupported) naming `who` and the arch where none serves it.
const GemmBackend& gemm_backend(Arch arch, const char* who);
// The kernel `problem` runs on `tile`: backend.kernel_spec(gemm_spec(problem, tile)).
GemmSpec gemm_kernel_spec(const GemmBackend& backend, const GemmSpec& problem, const GemmTile& tile);

}  // namespace nvfp4::jit::detail
