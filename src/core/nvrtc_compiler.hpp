// NVRTC: generated source -> CUBIN for one arch. Thread-safe; compiles run in parallel.
#pragma once
#include <string>
#include <vector>

#include "core/codegen.hpp"
#include "core/spec.hpp"

namespace nvfp4::jit::detail {

// "13.0": part of every key.
const std::string& nvrtc_version();
// The options a kernel for `arch` is compiled with, in a fixed order, with no paths.
std::vector<std::string> nvrtc_options(Arch arch);
// Whether this NVRTC can target `arch`.
bool nvrtc_supports(Arch arch);
// Throws Error(compile_failed) carrying the compile log.
std::vector<char> nvrtc_compile(const GeneratedKernel& kernel, Arch arch);

}  // namespace nvfp4::jit::detail
