// nvfp4-jit info: what this machine offers the library.
#include <cstdio>

#include <fmt/format.h>

#include "cli/cli.hpp"
#include "cli/json_out.hpp"
#include "core/driver.hpp"
#include "core/embedded.hpp"
#include "core/kernel_store.hpp"
#include "core/manifest.hpp"
#include "core/nvrtc_compiler.hpp"
#include "nvfp4/jit.hpp"

namespace nvfp4::jit::cli {

using namespace detail;

namespace {

struct DeviceLine {
  std::string name, arch;
  int major = 0, minor = 0, sms = 0;
};

std::vector<DeviceLine> devices() {
  std::vector<DeviceLine> out;
  if (!driver_available()) return out;
  const Driver& d = driver();
  int count = 0;
  if (d.cuDeviceGetCount(&count) != CUDA_SUCCESS) return out;
  for (int i = 0; i < count; ++i) {
    CUdevice dev = 0;
    if (d.cuDeviceGet(&dev, i) != CUDA_SUCCESS) continue;
    DeviceLine line;
    char name[256] = {};
    d.cuDeviceGetName(name, sizeof name, dev);
    line.name = name;
    d.cuDeviceGetAttribute(&line.major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, dev);
    d.cuDeviceGetAttribute(&line.minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, dev);
    d.cuDeviceGetAttribute(&line.sms, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, dev);
    const auto arch = arch_for_compute_capability(line.major, line.minor);
    line.arch = arch ? std::string(to_string(*arch)) : "unsupported";
    out.push_back(line);
  }
  return out;
}

}  // namespace

int cmd_info(const Args& args) {
  std::string why;
  const bool have_driver = driver_available(&why);
  int driver_version = 0;
  if (have_driver) driver().cuDriverGetVersion(&driver_version);
  std::vector<std::string> targets;  // none without an NVRTC: info still reports the rest
  if (nvrtc_info().error.empty())
    for (Arch a : kAllArchs)
      if (nvrtc_supports(a)) targets.emplace_back(to_string(a));
  const auto devs = devices();
  CacheRoots roots = CacheRoots::from_env();
  roots.create_primary = false;  // info makes nothing on the cache's path
  const DiskCache cache(std::move(roots));
  const bool writable = cache.writable() || cache.primary_absent();  // an absent root is made by the first store
  const auto manifests = builtin_manifest_names();
  const std::string driver_text =
      have_driver ? fmt::format("{}.{}", driver_version / 1000, driver_version % 1000 / 10) : "none (" + why + ")";

  if (args.has("--json")) {
    Json devices = Json::array();
    for (const auto& d : devs)
      devices.push_back({{"name", d.name}, {"compute_capability", fmt::format("{}.{}", d.major, d.minor)}, {"sms", d.sms},
                         {"arch", d.arch}});
    Json out = {{"library", version()}};
    add_nvrtc_fields(out);
    out["nvrtc_targets"] = targets;
    out["driver"] = driver_text;
    out["devices"] = devices;
    out["cache_root"] = cache.roots().primary;
    out["cache_writable"] = writable;
    out["read_only_roots"] = cache.roots().read_only;
    out["templates_hash"] = templates_hash();
    out["manifests"] = manifests;
    std::printf("%s\n", dump(out).c_str());
    return kOk;
  }
  std::printf("nvfp4-jit   %s (templates %s)\n", version(), templates_hash().substr(0, 16).c_str());
  std::string tl;
  for (const auto& t : targets) tl += " " + t;
  std::printf("NVRTC       %s\n", nvrtc_line().c_str());
  if (!targets.empty()) std::printf("targets    %s\n", tl.c_str());
  std::printf("driver      %s\n", driver_text.c_str());
  if (devs.empty()) std::printf("devices     none\n");
  for (size_t i = 0; i < devs.size(); ++i)
    std::printf("device %zu    %s, compute capability %d.%d, %d SMs, kernels for %s\n", i, devs[i].name.c_str(),
                devs[i].major, devs[i].minor, devs[i].sms, devs[i].arch.c_str());
  std::printf("cache root  %s (%s)\n", cache.roots().primary.c_str(), writable ? "writable" : "memory-only");
  for (const auto& r : cache.roots().read_only) std::printf("read-only   %s\n", r.c_str());
  std::string ml;
  for (const auto& m : manifests) ml += " " + m;
  std::printf("manifests  %s\n", ml.c_str());
  return kOk;
}

}  // namespace nvfp4::jit::cli
