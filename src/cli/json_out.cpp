// The JSON nvfp4-jit prints.
#include "cli/json_out.hpp"

#include <cmath>

namespace nvfp4::jit::cli {

std::string dump(const Json& value) { return value.dump(-1, ' ', false, Json::error_handler_t::replace); }

double rounded(double value, int places) {
  const double scale = std::pow(10.0, places);
  return std::isfinite(value) ? std::round(value * scale) / scale : value;
}

}  // namespace nvfp4::jit::cli
