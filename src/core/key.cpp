#include "core/key.hpp"

#include <fmt/format.h>

#define XXH_INLINE_ALL
#include <xxhash.h>

#include "core/embedded.hpp"

namespace nvfp4::jit::detail {

std::string CacheKey::hex() const { return fmt::format("{:016x}{:016x}", hi, lo); }

namespace {
// Each field goes in with its length first, so no two field lists hash alike.
void feed(XXH3_state_t* state, std::string_view field) {
  const uint64_t n = field.size();
  XXH3_128bits_update(state, &n, sizeof n);
  XXH3_128bits_update(state, field.data(), field.size());
}
}  // namespace

CacheKey compute_key(const KeyInputs& in) {
  XXH3_state_t state;
  XXH3_128bits_reset(&state);
  feed(&state, fmt::format("nvfp4-jit-abi-{}", kCacheAbiVersion));
  feed(&state, in.templates_hash);
  feed(&state, in.source);
  feed(&state, in.nvrtc_version);
  for (const std::string& option : in.options) feed(&state, option);
  feed(&state, to_string(in.arch));
  const XXH128_hash_t h = XXH3_128bits_digest(&state);
  return CacheKey{h.high64, h.low64};
}

const std::string& templates_hash() {
  static const std::string hash = [] {
    XXH3_state_t state;
    XXH3_128bits_reset(&state);
    for (const EmbeddedFile& file : embedded_templates()) {
      feed(&state, file.name);
      feed(&state, std::string_view(file.data, file.size));
    }
    const XXH128_hash_t h = XXH3_128bits_digest(&state);
    return fmt::format("{:016x}{:016x}", h.high64, h.low64);
  }();
  return hash;
}

}  // namespace nvfp4::jit::detail
