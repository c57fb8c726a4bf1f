// from_modelopt and load_modelopt: a ModelOpt layer's tensors described for gemm, and their
// checks (no GPU needed; tests/gpu/ runs the swizzled and prepacked paths and the GEMMs).
#include <doctest/doctest.h>

#include <string>

#include "nvfp4/jit.hpp"

using namespace nvfp4::jit;

namespace {

alignas(64) unsigned char buffer[256];

ModelOptLinear layer() {
  ModelOptLinear l;
  l.n = 64, l.k = 256;
  l.weight = buffer;
  l.weight_scale = buffer + 64;
  l.weight_scale_2.value = 0.25f;
  l.input_scale.device_ptr = reinterpret_cast<const float*>(buffer + 128);
  return l;
}

void check_error(const ModelOptLinear& l, const std::string& part, ScaleLayout layout = ScaleLayout::linear) {
  try {
    from_modelopt(l, layout);
    FAIL("accepted; expected: " << part);
  } catch (const Error& e) {
    CAPTURE(e.what());
    CHECK(e.status() == Status::invalid_argument);
    CHECK(std::string(e.what()).find("nvfp4::jit::from_modelopt: " + part) == 0);
  }
}

}  // namespace

TEST_SUITE("modelopt") {
  TEST_CASE("linear scales: the checkpoint's tensors as they are") {
    const Nvfp4Linear out = from_modelopt(layer());
    CHECK(out.weight.data == buffer);
    CHECK(out.weight.row_stride_bytes == 128);
    CHECK(out.weight.scales == buffer + 64);
    CHECK(out.weight.scale_layout == ScaleLayout::linear);
    CHECK(out.weight.global_scale.value == 0.25f);
    CHECK(out.weight.global_scale.device_ptr == nullptr);
    CHECK(out.input_scale.device_ptr == reinterpret_cast<const float*>(buffer + 128));
  }

  TEST_CASE("bad layers get an error naming the tensor") {
    ModelOptLinear l = layer();
    l.k = 48;
    check_error(l, "k = 48 must be a positive multiple of 32");
    l = layer(), l.n = 0;
    check_error(l, "n = 0");
    l = layer(), l.weight = nullptr;
    check_error(l, "weight is null");
    l = layer(), l.weight = buffer + 4;
    check_error(l, "weight = ");
    l = layer(), l.weight_scale = nullptr;
    check_error(l, "weight_scale is null");
    l = layer(), l.weight_scale_2.value = 0.0f;
    check_error(l, "weight_scale_2.value = 0 must be positive");
    l = layer(), l.input_scale.per_row = true;
    check_error(l, "input_scale.per_row is set");
    l = layer(), l.input_scale.device_ptr = reinterpret_cast<const float*>(buffer + 2);
    check_error(l, "input_scale.device_ptr = ");
    check_error(layer(), "swizzled_scales is null", ScaleLayout::swizzled128x4);
  }

  TEST_CASE("load_modelopt checks the layer first, by its own name") {
    ModelOptLinear l = layer();
    l.k = 48;
    try {
      load_modelopt(l, buffer, nullptr);
      FAIL("accepted k = 48");
    } catch (const Error& e) {
      CAPTURE(e.what());
      CHECK(e.status() == Status::invalid_argument);
      CHECK(std::string(e.what()).find("nvfp4::jit::load_modelopt: k = 48 must be a positive multiple of 32") == 0);
    }
  }
}
