// The prepacked GEMM weight (sm90/prepacked_weight.cuh): its bit layout decodes to exactly
// what the ModelOpt layout decodes to, the CPU prepack puts every value and scale where the
// kernel's threads look for them, and bad arguments are named. tests/gpu/ runs the GPU
// prepack and the GEMM on it.
#include <doctest/doctest.h>

#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "common/mma_operand.cuh"
#include "common/nvfp4_format.cuh"
#include "sm90/prepacked_weight.cuh"
#include "nvfp4/jit.hpp"

using namespace nvfp4::jit;
namespace pp = nvfp4k::prepacked;

namespace {

using Bf16 = nvfp4k::Fp4Operand<nvfp4k::DTYPE_BF16>;
using Fp16 = nvfp4k::Fp4Operand<nvfp4k::DTYPE_FP16>;

// The kernel's decode of one thread's four words: pair f of step s, placed for BF16.
unsigned decoded(const unsigned (&w)[4], int s, int f) {
  const unsigned z = pp::leftover_word(w[s / 2 * 2], w[s / 2 * 2 + 1]);
  return pp::place_pair(w[s], z, s, f);
}

struct Shape {
  int64_t n, k, stride;
};

void check_error(const PrepackArgs& a, const std::string& part) {
  try {
    cpu::prepack(a);
    FAIL("accepted; expected: " << part);
  } catch (const Error& e) {
    CAPTURE(e.what());
    CHECK(e.status() == Status::invalid_argument);
    CHECK(std::string(e.what()).find("nvfp4::jit::prepack: " + part) == 0);
  }
}

}  // namespace

TEST_SUITE("prepack") {
  TEST_CASE("every pair of a thread's words decodes to its byte placed for BF16, and for FP16") {
    // Each byte value in each of the 16 positions, with random bytes around it: a bit that
    // two pairs share, or one the decode drops, shows up as a wrong pair.
    std::mt19937 rng(std::random_device{}());
    for (int pos = 0; pos < 16; ++pos)
      for (unsigned v = 0; v < 256; ++v) {
        unsigned char bytes[4][4];
        for (auto& step : bytes)
          for (auto& b : step) b = (unsigned char)rng();
        bytes[pos / 4][pos % 4] = (unsigned char)v;
        unsigned w[4];
        pp::pack_words(bytes, w);
        for (int s = 0; s < 4; ++s)
          for (int f = 0; f < 4; ++f) {
            if (decoded(w, s, f) != Bf16::place(bytes[s][f]))
              FAIL("byte " << v << " at step " << pos / 4 << " pair " << pos % 4 << ": step " << s << " pair " << f
                            << " decodes wrong");
          }
      }
    for (unsigned b = 0; b < 256; ++b) {
      CAPTURE(b);
      CHECK(pp::bf16_to_fp16_placed(Bf16::place(b)) == Fp16::place(b));
    }
  }

  TEST_CASE("the CPU prepack puts every value and scale where the kernel's thread reads it") {
    std::mt19937 rng(std::random_device{}());
    // interleave -1: rows as stored; else a gate_up weight stored in that order (swiglu_interleave)
    struct Case {
      Shape shape;
      int64_t interleave;
    };
    for (ScaleLayout layout : {ScaleLayout::linear, ScaleLayout::swizzled128x4})
      for (const Case& c : {Case{{200, 2880, 1440}, -1}, Case{{8, 32, 32}, -1}, Case{{128, 256, 128}, -1},
                            Case{{208, 2880, 1440}, 0}, Case{{208, 512, 256}, 1}, Case{{208, 512, 256}, 8},
                            Case{{16, 64, 32}, 0}, Case{{192, 256, 128}, 4}}) {
        const int64_t n = c.shape.n, k = c.shape.k, stride = c.shape.stride, interleave = c.interleave;
        CAPTURE(n);
        CAPTURE(k);
        CAPTURE(int(layout));
        CAPTURE(interleave);
        // The stored row each prepacked row must hold: gate and up rows listed from the stored
        // order, then laid out as the 8-row interleave (gate 8j..8j+7, up 8j..8j+7).
        std::vector<int64_t> source(size_t(pp::padded_rows(n)));
        for (int64_t row = 0; row < int64_t(source.size()); ++row) source[size_t(row)] = row;
        if (interleave >= 0) {
          std::vector<int64_t> gate, up;
          for (int64_t row = 0; row < n; ++row) {
            const bool is_up = interleave == 0 ? row >= n / 2 : row % (2 * interleave) >= interleave;
            (is_up ? up : gate).push_back(row);
          }
          for (int64_t row = 0; row < n; ++row)
            source[size_t(row)] = (row % 16 < 8 ? gate : up)[size_t(row / 16 * 8 + row % 8)];
        }
        std::vector<unsigned char> packed(size_t(n * stride)), scales(size_t(scale_bytes(layout, n, k)));
        for (auto& b : packed) b = (unsigned char)rng();
        for (auto& b : scales) b = (unsigned char)rng();
        std::vector<unsigned char> out(size_t(prepacked_bytes(n, k)), 0xA5);  // poisoned
        PrepackArgs a;
        a.weight.data = packed.data(), a.weight.row_stride_bytes = stride;
        a.weight.scales = scales.data(), a.weight.scale_layout = layout;
        a.n = n, a.k = k, a.out = out.data(), a.swiglu_interleave = interleave;
        cpu::prepack(a);
        // Read back through the thread mapping of the wgmma A fragment, independently of
        // source_row / source_byte: (row r, k) of a chunk belongs to thread
        // (r/16)*32 + (r%8)*4 + (k%8)/2, step k/16, pair (k%16 >= 8 ? 2 : 0) + (r%16 >= 8).
        const int64_t chunks = pp::padded_k(k) / 64;
        int wrong = 0;
        for (int64_t row = 0; row < pp::padded_rows(n); ++row)
          for (int64_t kk = 0; kk < pp::padded_k(k); kk += 2) {
            const int r = int(row % 64), c = int(kk % 64);
            const int tid = (r / 16) * 32 + (r % 8) * 4 + (c % 8) / 2, s = c / 16, f = (c % 16 >= 8 ? 2 : 0) + (r % 16 >= 8);
            const unsigned char* chunk = out.data() + (row / 64 * chunks + kk / 64) * pp::CHUNK_BYTES;
            unsigned w[4];
            for (int i = 0; i < 4; ++i)
              w[i] = chunk[tid * 16 + 4 * i] | chunk[tid * 16 + 4 * i + 1] << 8 | chunk[tid * 16 + 4 * i + 2] << 16 |
                     unsigned(chunk[tid * 16 + 4 * i + 3]) << 24;
            const bool inside = row < n && kk < k;
            const int64_t src = source[size_t(row)];
            const unsigned char raw_scale =
                !inside ? 0
                : layout == ScaleLayout::linear
                    ? scales[size_t(nvfp4k::scale_offset_linear(src, kk / 16, k / 16))]
                    : scales[size_t(nvfp4k::scale_offset_swizzled128x4(src, kk / 16, k / 16))];
            // a zero block scale: the block's values are stored as zeros
            const unsigned char byte = inside && (raw_scale & 0x7F) ? packed[size_t(src * stride + kk / 2)] : 0;
            bool nan = false;
            const unsigned char scale = pp::scale_code(raw_scale, nan);
            const unsigned char got_scale = chunk[pp::VALUE_BYTES + tid / 4 * 8 + 4 * (r % 16 >= 8) + s];
            if ((decoded(w, s, f) != Bf16::place(byte) || got_scale != scale) && wrong++ == 0)
              FAIL_CHECK("first wrong element: row " << row << ", k " << kk << " (value byte " << int(byte) << ", scale "
                                                    << int(scale) << ", read scale " << int(got_scale) << ")");
          }
        CHECK(wrong == 0);
        // the row bytes: 1 where a row has a NaN block scale, + 2 for every row of a gate_up
        // weight in the SwiGLU order
        for (int64_t row = 0; row < pp::padded_rows(n); ++row) {
          bool nan = false;
          for (int64_t kb = 0; kb < k / 16; ++kb)
            pp::scale_code(pp::block_scale(scales.data(), int(layout), n, k, source[size_t(row)], kb), nan);
          if (out[size_t(pp::nan_rows_offset(n, k) + row)] != (nan ? 1 : 0) + (interleave >= 0 ? 2 : 0)) {
            FAIL_CHECK("NaN byte of row " << row << " is " << int(out[size_t(pp::nan_rows_offset(n, k) + row)]));
            break;
          }
        }
        // the fold exponent bytes (W4A8), the stored row's: the least e with 6 * (the row's largest finite scale) <=
        // 448 * 2^e, 0 for a row without a nonzero finite scale, from the format's definition
        for (int64_t row = 0; row < pp::padded_rows(n); ++row) {
          double max_scale = 0;
          for (int64_t kb = 0; kb < k / 16; ++kb) {
            const unsigned s = pp::block_scale(scales.data(), int(layout), n, k, source[size_t(row)], kb) & 0x7F;
            const int ex = int(s >> 3), m = int(s & 7);
            if (s != 0x7F) max_scale = std::max(max_scale, ex ? std::ldexp(1 + m / 8.0, ex - 7) : std::ldexp(m / 8.0, -6));
          }
          int e = 0;
          if (max_scale > 0) {
            e = -40;
            while (6 * max_scale > 448 * std::ldexp(1.0, e)) ++e;
          }
          const int got = int(static_cast<signed char>(out[size_t(pp::fold_exponents_offset(n, k) + row)]));
          if (got != e) {
            FAIL_CHECK("fold exponent byte of row " << row << " is " << got << ", not " << e << " (largest scale " << max_scale << ")");
            break;
          }
        }
      }
  }

  TEST_CASE("scale codes place as scale * 2^(BIAS - SHIFT) in BF16 and FP16, every E4M3 scale in every lane") {
    for (unsigned v = 0; v < 256; ++v) {
      bool nan = false;
      const unsigned code = pp::scale_code((unsigned char)v, nan);
      CHECK(nan == ((v & 0x7F) == 0x7F));
      if ((v & 0x7F) == 0 || nan) {
        CHECK(code == 0);  // its block's values are zeros, or its row is NaN
        continue;
      }
      const double scale = nvfp4k::e4m3_to_float(v & 0x7F);
      for (int at = 0; at < 4; ++at) {
        const unsigned word = 0x5A3C9E71u & ~(0xFFu << (8 * at)) | code << (8 * at);  // other lanes: noise
        const unsigned shift = 16 * (at / 2);
        const unsigned bf16 = (pp::scale_pair<nvfp4k::DTYPE_BF16>(word, at % 2) >> shift) & 0xFFFF;
        const unsigned fp16 = (pp::scale_pair<nvfp4k::DTYPE_FP16>(word, at % 2) >> shift) & 0xFFFF;
        CAPTURE(v);
        CAPTURE(at);
        CHECK(double(nvfp4k::bf16_bits_to_float(bf16)) == std::ldexp(scale, Bf16::BIAS - Bf16::SHIFT));
        CHECK(double(nvfp4k::fp16_bits_to_float(fp16)) == std::ldexp(scale, Fp16::BIAS - Fp16::SHIFT));
      }
    }
  }

  TEST_CASE("sizes: rows padded to 128, k to 256, 2304 bytes per 64 x 64 chunk, a NaN byte and a fold exponent byte per row") {
    CHECK(prepacked_bytes(8192, 8192) == 128LL * 128 * 2304 + 2 * 8192);
    CHECK(prepacked_bytes(1, 32) == 2LL * 4 * 2304 + 2 * 128);
    CHECK(prepacked_bytes(2880, 2880) == (2944LL / 64) * (3072 / 64) * 2304 + 2 * 2944);
    CHECK_THROWS_AS(prepacked_bytes(0, 64), Error);
    CHECK_THROWS_AS(prepacked_bytes(64, 48), Error);
  }

  TEST_CASE("bad arguments get an error naming them") {
    alignas(64) static unsigned char buffer[4096];
    PrepackArgs good;
    good.weight.data = buffer, good.weight.scales = buffer, good.n = 8, good.k = 64, good.out = buffer;
    PrepackArgs a = good;
    a.n = 0;
    check_error(a, "n = 0 must be positive");
    a = good, a.k = 48;
    check_error(a, "k = 48 must be a positive multiple of 32");
    a = good, a.weight.data = nullptr;
    check_error(a, "weight.data is null");
    a = good, a.weight.scales = nullptr;
    check_error(a, "weight.scales is null");
    a = good, a.out = buffer + 8;
    check_error(a, "out = ");
    a = good, a.weight.row_stride_bytes = 16;
    check_error(a, "weight.row_stride_bytes = 16 is less than k/2 = 32");
    a = good, a.weight.scale_layout = ScaleLayout(7);
    check_error(a, "weight.scale_layout");
    a = good, a.n = 24, a.swiglu_interleave = 0;
    check_error(a, "n = 24 with swiglu_interleave: a gate_up weight's 2 x I rows need I = n/2 a multiple of 8");
    a = good, a.n = 32, a.swiglu_interleave = 3;
    check_error(a, "swiglu_interleave = 3 does not divide I = n/2 = 16");
    a = good, a.swiglu_interleave = -2;
    check_error(a, "swiglu_interleave = -2 is not -1 (none)");
  }
}
