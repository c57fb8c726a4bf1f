// The tensor-map key and cache (src/core/tensor_map.cpp) with a stand-in encoder; the driver's
// encode in tests/gpu/test_gpu_capture.cpp.
#include <doctest/doctest.h>

#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "core/tensor_map.hpp"
#include "nvfp4/jit.hpp"

using namespace nvfp4::jit;
using namespace nvfp4::jit::detail;

namespace {

// The stand-in encoder: counts its calls, remembers the keys it was given and writes a map that
// is a function of the key (its bytes, repeated), so a map from another key differs.
std::vector<TensorMapKey> encoded;
CUresult refuse = CUDA_SUCCESS;  // what the encoder answers

CUresult fake_encode(CUtensorMap* map, const TensorMapKey& key) {
  if (refuse != CUDA_SUCCESS) return refuse;
  encoded.push_back(key);
  unsigned char* out = reinterpret_cast<unsigned char*>(map);
  const unsigned char* in = reinterpret_cast<const unsigned char*>(&key);
  for (size_t i = 0; i < sizeof(CUtensorMap); ++i) out[i] = in[i % sizeof key] ^ uint8_t(i / sizeof key);
  return CUDA_SUCCESS;
}

CUtensorMap fake_map(const TensorMapKey& key) {
  CUtensorMap map{};
  const auto saved = encoded;
  fake_encode(&map, key);
  encoded = saved;
  return map;
}

bool same(const CUtensorMap& a, const CUtensorMap& b) { return std::memcmp(&a, &b, sizeof a) == 0; }

void reset() {
  encoded.clear();
  refuse = CUDA_SUCCESS;
}

// A weight as the sm_90a backend reads it: 4096 rows of 2048 packed bytes, boxes of 128 x 128.
TensorMapKey weight_key(const void* base, uint64_t rows = 4096) {
  return tensor_map_2d(base, CU_TENSOR_MAP_DATA_TYPE_UINT8, rows, 2048, 2048, 128, 128, CU_TENSOR_MAP_SWIZZLE_128B);
}

const void* address(uintptr_t a) { return reinterpret_cast<const void*>(a); }

}  // namespace

TEST_SUITE("tensor_map") {
  TEST_CASE("the builders state a tensor as cuTensorMapEncodeTiled takes it: innermost dimension first") {
    const TensorMapKey k2 = tensor_map_2d(address(0x1000), CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 16, 4096, 8192, 64, 64,
                                          CU_TENSOR_MAP_SWIZZLE_128B);
    CHECK(k2.rank == 2);
    CHECK(k2.base == address(0x1000));
    CHECK(k2.type == CU_TENSOR_MAP_DATA_TYPE_BFLOAT16);
    CHECK(k2.dims[0] == 4096);  // cols
    CHECK(k2.dims[1] == 16);    // rows
    CHECK(k2.dims[2] == 1);
    CHECK(k2.strides[0] == 8192);
    CHECK(k2.strides[1] == 0);
    CHECK(k2.box[0] == 64);
    CHECK(k2.box[1] == 64);
    CHECK(k2.box[2] == 1);
    CHECK(k2.swizzle == CU_TENSOR_MAP_SWIZZLE_128B);
    CHECK(k2.element_strides[0] == 1);
    CHECK(k2.interleave == CU_TENSOR_MAP_INTERLEAVE_NONE);
    CHECK(k2.l2_promotion == CU_TENSOR_MAP_L2_PROMOTION_L2_128B);
    CHECK(k2.oob_fill == CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);

    const TensorMapKey k3 = tensor_map_3d(address(0x2000), CU_TENSOR_MAP_DATA_TYPE_FLOAT16, 8, 32, 512, 8192, 1024, 64,
                                          64, CU_TENSOR_MAP_SWIZZLE_128B);
    CHECK(k3.rank == 3);
    CHECK(k3.dims[0] == 512);
    CHECK(k3.dims[1] == 32);
    CHECK(k3.dims[2] == 8);  // groups
    CHECK(k3.strides[0] == 8192);
    CHECK(k3.strides[1] == 1024);
    CHECK(k3.box[2] == 1);  // one group's rows a box
  }

  TEST_CASE("a key is encoded once: the same weights, or a buffer freed and allocated again at its address, reuse it") {
    reset();
    TensorMapCache cache(fake_encode);
    const TensorMapKey w = weight_key(address(0x7f0000000000));
    const CUtensorMap first = cache.get(w);
    CHECK(encoded.size() == 1);
    CHECK(same(first, fake_map(w)));
    // the next call on the same weights, and one on a buffer at the same address and shape
    // (its contents are no part of a descriptor)
    CHECK(same(cache.get(w), first));
    CHECK(same(cache.get(weight_key(address(0x7f0000000000))), first));
    CHECK(encoded.size() == 1);
    CHECK(cache.size() == 1);
  }

  TEST_CASE("any field that differs is another key, encoded anew") {
    reset();
    TensorMapCache cache(fake_encode);
    const TensorMapKey base = tensor_map_3d(address(0x10000), CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 4, 64, 1024, 4096,
                                            262144, 64, 64, CU_TENSOR_MAP_SWIZZLE_128B);
    const CUtensorMap base_map = cache.get(base);
    struct Change {
      const char* field;
      std::function<void(TensorMapKey&)> apply;
    };
    const Change changes[] = {
        {"base (another buffer)", [](TensorMapKey& k) { k.base = address(0x20000); }},
        {"dims[0]", [](TensorMapKey& k) { k.dims[0] = 2048; }},
        {"dims[1] (a reallocated buffer of other rows)", [](TensorMapKey& k) { k.dims[1] = 128; }},
        {"dims[2]", [](TensorMapKey& k) { k.dims[2] = 8; }},
        {"strides[0]", [](TensorMapKey& k) { k.strides[0] = 8192; }},
        {"strides[1]", [](TensorMapKey& k) { k.strides[1] = 524288; }},
        {"box[0]", [](TensorMapKey& k) { k.box[0] = 32; }},
        {"box[1]", [](TensorMapKey& k) { k.box[1] = 128; }},
        {"box[2]", [](TensorMapKey& k) { k.box[2] = 2; }},
        {"element_strides[0]", [](TensorMapKey& k) { k.element_strides[0] = 2; }},
        {"element_strides[1]", [](TensorMapKey& k) { k.element_strides[1] = 2; }},
        {"element_strides[2]", [](TensorMapKey& k) { k.element_strides[2] = 2; }},
        {"rank", [](TensorMapKey& k) { k.rank = 2; }},
        {"type", [](TensorMapKey& k) { k.type = CU_TENSOR_MAP_DATA_TYPE_FLOAT16; }},
        {"interleave", [](TensorMapKey& k) { k.interleave = CU_TENSOR_MAP_INTERLEAVE_16B; }},
        {"swizzle", [](TensorMapKey& k) { k.swizzle = CU_TENSOR_MAP_SWIZZLE_64B; }},
        {"l2_promotion", [](TensorMapKey& k) { k.l2_promotion = CU_TENSOR_MAP_L2_PROMOTION_L2_256B; }},
        {"oob_fill", [](TensorMapKey& k) { k.oob_fill = CU_TENSOR_MAP_FLOAT_OOB_FILL_NAN_REQUEST_ZERO_FMA; }},
    };
    size_t encodes = encoded.size();
    for (const Change& c : changes) {
      INFO("changed: " << c.field);
      TensorMapKey key = base;
      c.apply(key);
      REQUIRE(!(key == base));
      const CUtensorMap map = cache.get(key);
      CHECK(encoded.size() == encodes + 1);
      CHECK(encoded.back() == key);  // the encoder is given exactly the key
      CHECK(same(map, fake_map(key)));
      CHECK(!same(map, base_map));
      encodes = encoded.size();
    }
    CHECK(same(cache.get(base), base_map));  // the first key's still there
    CHECK(encoded.size() == encodes);
  }

  TEST_CASE("a key the encoder refuses throws naming the encode and the tensor, and is not kept") {
    reset();
    TensorMapCache cache(fake_encode);
    refuse = CUDA_ERROR_INVALID_VALUE;
    const TensorMapKey w = weight_key(address(0x30000));
    try {
      cache.get(w);
      FAIL("a refused encode returned a map");
    } catch (const Error& e) {
      const std::string what = e.what();
      CHECK(e.status() == Status::cuda_error);
      CHECK_MESSAGE(what.find("cuTensorMapEncodeTiled failed") != std::string::npos, what);
      CHECK_MESSAGE(what.find("dims 2048x4096x1") != std::string::npos, what);
      CHECK_MESSAGE(what.find("box 128x128x1") != std::string::npos, what);
    }
    CHECK(cache.size() == 0);
    refuse = CUDA_SUCCESS;
    cache.get(w);  // asked again, encoded now
    CHECK(encoded.size() == 1);
  }

  TEST_CASE("a cache past its capacity starts over") {
    reset();
    TensorMapCache cache(fake_encode, 2);
    cache.get(weight_key(address(0x1000)));
    cache.get(weight_key(address(0x2000)));
    CHECK(cache.size() == 2);
    cache.get(weight_key(address(0x3000)));
    CHECK(cache.size() == 1);
    CHECK(encoded.size() == 3);
    cache.get(weight_key(address(0x1000)));  // dropped with the rest: encoded again
    CHECK(encoded.size() == 4);
  }

  TEST_CASE("write puts each listed descriptor where its entry says") {
    reset();
    TensorMapCache cache(fake_encode);
    CUtensorMap slots[3]{};
    TensorMapList maps;
    const TensorMapKey a = weight_key(address(0x1000), 16), w = weight_key(address(0x2000));
    maps.add(&slots[0], a);
    maps.add(&slots[2], w);
    CHECK(maps.size() == 2);
    cache.write(maps);
    CHECK(same(slots[0], fake_map(a)));
    CHECK(same(slots[1], CUtensorMap{}));  // not listed: untouched
    CHECK(same(slots[2], fake_map(w)));
    cache.write(maps);
    CHECK(encoded.size() == 2);
  }

  TEST_CASE("a list holds at most kMaxMaps descriptors") {
    CUtensorMap slot{};
    TensorMapList maps;
    for (int i = 0; i < TensorMapList::kMaxMaps; ++i) maps.add(&slot, weight_key(address(0x1000)));
    CHECK_THROWS_AS(maps.add(&slot, weight_key(address(0x1000))), Error);
  }
}
