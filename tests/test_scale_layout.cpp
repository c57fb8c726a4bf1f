#include <doctest/doctest.h>

#include <vector>

#include "common/scale_layout.cuh"

using namespace nvfp4k;

TEST_SUITE("scale_layout") {
  TEST_CASE("swizzled128x4 follows the cuBLASLt formula and is a bijection onto the padded buffer") {
    for (auto [rows, kblocks] : {std::pair{1, 1}, {7, 3}, {128, 4}, {129, 5}, {300, 16}, {256, 180}}) {
      CAPTURE(rows);
      CAPTURE(kblocks);
      const long long bytes = scale_bytes(SCALES_SWIZZLED128X4, rows, kblocks);
      CHECK(bytes == ((rows + 127) / 128) * 128 * ((kblocks + 3) / 4) * 4);
      std::vector<int> hits(bytes, 0);
      const int prows = (rows + 127) / 128 * 128, pk = (kblocks + 3) / 4 * 4;
      for (int r = 0; r < prows; ++r)
        for (int kb = 0; kb < pk; ++kb) {
          const long long off = scale_offset_swizzled128x4(r, kb, kblocks);
          REQUIRE(off >= 0);
          REQUIRE(off < bytes);
          hits[off]++;
        }
      for (long long i = 0; i < bytes; ++i) REQUIRE(hits[i] == 1);
    }
    // Spot values of the documented formula.
    CHECK(scale_offset_swizzled128x4(0, 0, 8) == 0);
    CHECK(scale_offset_swizzled128x4(1, 0, 8) == 16);
    CHECK(scale_offset_swizzled128x4(32, 0, 8) == 4);
    CHECK(scale_offset_swizzled128x4(0, 3, 8) == 3);
    CHECK(scale_offset_swizzled128x4(0, 4, 8) == 512);
    CHECK(scale_offset_swizzled128x4(128, 0, 8) == 1024);
  }

  TEST_CASE("linear is row-major") {
    CHECK(scale_offset_linear(3, 5, 16) == 53);
    CHECK(scale_bytes(SCALES_LINEAR, 3, 16) == 48);
  }
}
