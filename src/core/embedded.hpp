// Files embedded into the library at build time: the kernel templates (templates/) and
// the model shape manifests (cache/manifests/).
#pragma once
#include <cstddef>
#include <span>
#include <string>

namespace nvfp4::jit::detail {

struct EmbeddedFile {
  const char* name;  // path relative to its folder, e.g. "common/nvfp4_format.cuh"
  const char* data;
  size_t size;
};

std::span<const EmbeddedFile> embedded_templates();
std::span<const EmbeddedFile> embedded_manifests();
// xxh3-128 (hex) over every template's name and content; part of every cache key.
const std::string& templates_hash();

}  // namespace nvfp4::jit::detail
