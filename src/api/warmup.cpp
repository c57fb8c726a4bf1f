// Warming up through the public API: ensure_loaded (a call in load-only mode) and prewarm.
#include <algorithm>
#include <optional>
#include <thread>
#include <unordered_set>

#include "core/driver.hpp"
#include "core/launcher.hpp"
#include "core/manifest.hpp"
#include "core/model_shapes.hpp"
#include "core/prewarm.hpp"
#include "nvfp4/jit.hpp"
#include "ops/validate.hpp"

namespace nvfp4::jit {

namespace {

// The call itself in load-only mode: it validates, chooses and loads exactly what it would
// launch. The null stream: nothing is enqueued, and it is never capturing.
template <class Args>
void load_only_call(void (*call)(const Args&, CUstream), const Args& args) {
  const detail::LoadOnlyScope scope;
  call(args, nullptr);
}

// The model's shapes; its errors name the file and field, after the entry point.
std::vector<detail::WeightShape> model_shapes_checked(const detail::Check& check, const std::string& dir, int tp, int ep,
                                                      const detail::PrewarmVariants& variants) {
  try {
    return detail::derive_model_shapes(dir, tp, ep, variants).shapes;
  } catch (const Error& e) {
    check.fail("model", e.what(), e.status());
  }
}

}  // namespace

void ensure_loaded(const DequantizeArgs& args) { load_only_call(&dequantize, args); }
void ensure_loaded(const QuantizeArgs& args) { load_only_call(&quantize, args); }
void ensure_loaded(const RmsNormQuantizeArgs& args) { load_only_call(&rmsnorm_quantize, args); }
void ensure_loaded(const MhcRmsNormQuantizeArgs& args) { load_only_call(&mhc_rmsnorm_quantize, args); }
void ensure_loaded(const SwigluQuantizeArgs& args) { load_only_call(&swiglu_quantize, args); }
void ensure_loaded(const MoeStageArgs& args) { load_only_call(&moe_stage, args); }
void ensure_loaded(const ConvertScalesArgs& args) { load_only_call(&convert_scales, args); }
void ensure_loaded(const GemmArgs& args) { load_only_call(&gemm, args); }
void ensure_loaded(const GroupedGemmArgs& args) { load_only_call(&grouped_gemm, args); }
void ensure_loaded(const PrepackArgs& args) { load_only_call(&prepack, args); }
void ensure_loaded(const MoeRouteArgs& args) { load_only_call(&moe_route, args); }
void ensure_loaded(const MoeCombineArgs& args) { load_only_call(&moe_combine, args); }

PrewarmResult prewarm(const PrewarmOptions& options) {
  using namespace detail;
  const Check check("nvfp4::jit::prewarm");
  PrewarmVariants variants;
  if (const std::string why = set_prewarm_variants(variants, options.variants); !why.empty())
    check.fail("variants", "variants: " + why);
  std::vector<WeightShape> shapes;
  if (options.tp < 1) check.fail("tp", fmt::format("tp = {} is not a parallel size (1 or more)", options.tp));
  if (options.ep < 1) check.fail("ep", fmt::format("ep = {} is not a parallel size (1 or more)", options.ep));
  if (options.model.empty() && (options.tp != 1 || options.ep != 1))
    check.fail(options.tp != 1 ? "tp" : "ep", fmt::format("tp = {}, ep = {} without a model", options.tp, options.ep));
  if (!options.model.empty()) shapes = model_shapes_checked(check, options.model, options.tp, options.ep, variants);
  if (!options.manifest.empty()) {
    std::vector<WeightShape> more = load_manifest(options.manifest, variants);
    shapes.insert(shapes.end(), more.begin(), more.end());
  }
  for (size_t i = 0; i < options.shapes.size(); ++i) {
    const PrewarmShape& s = options.shapes[i];
    if (const std::string why = weight_shape_problem(s.n, s.k, s.groups); !why.empty())
      check.fail("shapes", fmt::format("shapes[{}]: {}", i, why));
    shapes.push_back({fmt::format("shapes[{}]", i), s.n, s.k, s.groups, variants, {}});
  }
  if (shapes.empty()) check.fail("manifest", "no weight shapes: give a model, a manifest or shapes");
  shapes = merge_duplicate_shapes(std::move(shapes));
  if (options.sm_count < 0 || options.sm_count > 1024)
    check.fail("sm_count", fmt::format("sm_count = {} is not 0 (the device's) or an SM count 1 to 1024", options.sm_count));
  if (options.threads < 0 || options.threads > kMaxPrewarmThreads)
    check.fail("threads", fmt::format("threads = {} is not 0 (one per core) or 1 to {}", options.threads, kMaxPrewarmThreads));

  std::vector<Arch> archs;
  for (size_t i = 0; i < options.archs.size(); ++i) {
    const std::string& name = options.archs[i];
    // an empty name is a mistake in the list, not "the current device" (that is no archs at all)
    if (name.empty()) check.fail("archs", fmt::format("archs[{}] is empty: name an arch ({}) or give no archs", i, arch_names()));
    const auto arch = parse_arch(name);
    if (!arch) check.fail("archs", fmt::format("archs: `{}` is not one of {}", name, arch_names()));
    archs.push_back(*arch);
  }
  int sm_count = options.sm_count;
  // The device a call on the legacy stream from this thread runs on (CallDevice's rule): what
  // load loads into, and the arch when none is given (no_device without a GPU).
  std::optional<CallDevice> target;
  if (options.load || archs.empty()) target.emplace(nullptr, nullptr, "nvfp4::jit::prewarm");
  if (archs.empty() || sm_count == 0) {
    const DeviceInfo* device = target ? &target->info : nullptr;
    if (!device && driver_available()) {
      try {
        device = &current_device();
      } catch (const Error&) {  // no current context: the default SM count
      }
    }
    if (archs.empty()) archs.push_back(device->arch);
    if (sm_count == 0) sm_count = device ? device->sm_count : kDefaultSmCount;
  }

  if (options.load) {
    const DeviceInfo& device = target->info;
    if (std::find(archs.begin(), archs.end(), device.arch) == archs.end())
      check.fail("archs", fmt::format("archs: load = true loads into the current device, an {}: name it too", to_string(device.arch)));
    if (sm_count != device.sm_count)
      check.fail("sm_count", fmt::format("sm_count = {}: load = true loads the tiles the current device's calls choose, "
                                         "for its {} SMs: give 0", sm_count, device.sm_count));
  }

  const std::vector<KernelSpec> specs = prewarm_specs(shapes, archs, sm_count);
  PrewarmResult result;
  result.notes = prewarm_gaps(shapes, archs, specs);
  const int threads = options.threads ? options.threads : int(std::max(1u, std::thread::hardware_concurrency()));
  const uint64_t not_stored_before = KernelStore::instance().disk().not_stored();
  std::unordered_set<KernelSpec, KernelSpecHash> failed;
  const PrewarmSummary summary = detail::prewarm(specs, threads, [&](const PrewarmEvent& e) {
    if (e.error.empty()) return;
    result.errors.push_back(e.error);
    failed.insert(*e.spec);
  });
  if (options.load) result.loaded = int64_t(load_prewarmed(target->info, specs, failed));
  result.kernels = int64_t(summary.total);
  result.compiled = int64_t(summary.compiled);
  result.cached = int64_t(summary.cached);
  result.failed = int64_t(summary.failed);
  result.deferred = int64_t(summary.deferred);
  result.seconds = summary.seconds;
  result.not_stored = int64_t(KernelStore::instance().disk().not_stored() - not_stored_before);
  return result;
}

std::vector<ModelShape> model_shapes(const std::string& model_dir, int tp, int ep) {
  const detail::Check check("nvfp4::jit::model_shapes");
  if (model_dir.empty()) check.fail("model_dir", "model_dir is empty");
  if (tp < 1) check.fail("tp", fmt::format("tp = {} is not a parallel size (1 or more)", tp));
  if (ep < 1) check.fail("ep", fmt::format("ep = {} is not a parallel size (1 or more)", ep));
  std::vector<ModelShape> out;
  for (const detail::WeightShape& s : model_shapes_checked(check, model_dir, tp, ep, {})) out.push_back({s.name, s.n, s.k, s.groups});
  return out;
}

}  // namespace nvfp4::jit
