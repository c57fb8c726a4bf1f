// The JSON nvfp4-jit prints (--json, bench --out): nlohmann-json objects in insertion order.
#pragma once
#include <string>

#include <nlohmann/json.hpp>

namespace nvfp4::jit::cli {

using Json = nlohmann::ordered_json;

// Compact, one line; bytes that are not UTF-8 (a file name, a sidecar, a device name can hold
// any) become U+FFFD, so the output always parses.
std::string dump(const Json& value);

// `value` to `places` decimals: a measurement's figures, not the double's noise.
double rounded(double value, int places);

// The NVRTC in use as fields of `out`: "nvrtc", "nvrtc_path", "nvrtc_source", "nvrtc_error"
// (nvrtc_report.cpp, beside nvrtc_line).
void add_nvrtc_fields(Json& out);

}  // namespace nvfp4::jit::cli
