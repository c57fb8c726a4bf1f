// Cache keys: xxh3-128 over everything that decides the bytes of a CUBIN.
#pragma once
#include <cstdint>
#include <span>
#include <string>
#include <string_view>

#include "core/spec.hpp"

namespace nvfp4::jit::detail {

// Bump when the kernel parameter blocks or the key scheme change.
inline constexpr int kCacheAbiVersion = 1;

struct CacheKey {
  uint64_t hi = 0, lo = 0;
  std::string hex() const;  // 32 lowercase hex digits
  bool operator==(const CacheKey&) const = default;
};

struct KeyInputs {
  std::string_view templates_hash;
  std::string_view source;
  std::string_view nvrtc_version;
  std::span<const std::string> options;
  Arch arch;
};

CacheKey compute_key(const KeyInputs& in);

}  // namespace nvfp4::jit::detail
