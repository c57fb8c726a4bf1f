// A whole mixture-of-experts layer on the GPU, captured once in a CUDA graph and replayed with
// new routing (uniform, skewed onto one expert, and fewer real tokens than the graph's, the
// rest padded with id -1), without host code between its kernels:
//
//   moe_stage        tokens -> NVFP4 (the layer's input_scale) + the router's ids and weights copied
//   moe_route        ids -> per-expert group_ends, the expert-sorted row_index, each (t, j)'s row
//   grouped_gemm     gate_up, W4A4: the tokens' rows read through row_index (no sorted copy),
//                    per-expert weights and global scales
//   swiglu_quantize  silu(gate) * up -> NVFP4, a global scale per row computed on the device
//   grouped_gemm     down, W4A4 (A's global scale per row)
//   moe_combine      out[t] = sum_j w[t, j] * y[row(t, j)]
//
// Experts are quantized on the CPU first (as an offline checkpoint step would). Checks, every
// replay: the routing equals the CPU reference, gate_up and down are within BF16 output rounding
// of float64 products of the decoded operands (down from the GPU's own quantized hidden rows,
// which must equal swiglu_quantize's CPU reference bit for bit), padding tokens give 0. The
// error of the whole layer against float64 without quantizing the hidden activations is printed
// too (it is the NVFP4 quantization of those activations). Public API + CUDA runtime.
//
//   moe_layer_example [tokens experts topk hidden intermediate]
//   exit 0: checks pass; 1: a check failed; 2: no GPU / error
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <vector>

#include "example_util.hpp"
#include "nvfp4/jit.hpp"

using example::from_bf16;
using example::to_bf16;
using example::upload;
using namespace nvfp4::jit;

namespace {

// G experts' NVFP4 weights [rows, cols] each, quantized on the CPU with a global scale per
// expert (ModelOpt's per-expert weight_scale_2), and their values decoded without it (exact).
struct Experts {
  long rows, cols;
  std::vector<uint8_t> packed, scales;
  std::vector<float> gscale, decoded;
  Experts(int g, long r, long c, float sigma, std::mt19937& rng) : rows(r), cols(c) {
    std::normal_distribution<float> normal(0.0f, 1.0f);
    const long sb = long(scale_bytes(ScaleLayout::linear, r, c));
    packed.resize(size_t(g * r * c / 2)), scales.resize(size_t(g * sb)), gscale.resize(size_t(g)), decoded.resize(size_t(g * r * c));
    std::vector<uint16_t> w(static_cast<size_t>(r * c));
    for (int e = 0; e < g; ++e) {
      const float s = sigma * (1.0f + e % 4);  // experts of different ranges: different global scales
      for (auto& x : w) x = to_bf16(s * normal(rng));
      QuantizeArgs q;
      q.in = w.data(), q.rows = r, q.k = c, q.out = &packed[size_t(e * r * c / 2)], q.scales = &scales[size_t(e * sb)];
      q.scale_mode = GlobalScaleMode::compute_per_tensor, q.global_scale_out = &gscale[size_t(e)];
      cpu::quantize(q);
      DequantizeArgs d;
      d.src = {q.out, 0, q.scales, ScaleLayout::linear, {1.0f, nullptr, false}};
      d.src_rows = r, d.k = c, d.out = &decoded[size_t(e * r * c)], d.out_dtype = DType::fp32;
      cpu::dequantize(d);
    }
  }
  double dot(int e, long row, const double* x) const {  // row `row` of expert e (its global scale applied) . x
    const float* w = &decoded[size_t((e * rows + row) * cols)];
    double s = 0;
    for (long c = 0; c < cols; ++c) s += double(w[c]) * x[c];
    return s * gscale[size_t(e)];
  }
};

struct Error2 {
  double err2 = 0, ref2 = 0;
  void add(double got, double want) { err2 += (got - want) * (got - want), ref2 += want * want; }
  double rel() const { return std::sqrt(err2 / std::max(ref2, 1e-300)); }
};

double silu(double g) { return g / (1.0 + std::exp(-g)); }

}  // namespace

int main(int argc, char** argv) {
  const bool given = argc > 5;
  const long T = given ? std::atol(argv[1]) : 64, G = given ? std::atol(argv[2]) : 16, topk = given ? std::atol(argv[3]) : 4,
             H = given ? std::atol(argv[4]) : 1024, I = given ? std::atol(argv[5]) : 512;
  const long R = T * topk;  // routed rows at most
  if (T < 1 || topk < 1 || G < topk || H % 32 || I % 32) {
    std::fprintf(stderr, "need tokens >= 1, experts >= topk >= 1, hidden and intermediate multiples of 32\n");
    return 2;
  }
  if (!example::first_gpu()) return 2;
  std::mt19937 rng(std::random_device{}());
  std::normal_distribution<float> normal(0.0f, 1.0f);

  const Experts gate_up(int(G), 2 * I, H, 0.03f, rng), down(int(G), H, I, 0.03f, rng);
  const float input_scale = 5.0f / 2688.0f;  // tokens ~ N(0, 1): amax about 5 (calibration)

  const int esz = 2;
  void *d_gu = upload(gate_up.packed), *d_gus = upload(gate_up.scales), *d_gug = upload(gate_up.gscale),
       *d_dn = upload(down.packed), *d_dns = upload(down.scales), *d_dng = upload(down.gscale);
  if (!d_gu || !d_gus || !d_gug || !d_dn || !d_dns || !d_dng) return 2;
  void *d_tokens, *d_router_ids, *d_router_w, *d_x, *d_xs, *d_ids, *d_w, *d_ends, *d_rows, *d_pos, *d_h, *d_hq, *d_hqs,
      *d_hg, *d_y, *d_out, *d_ws;
  GroupedGemmArgs gu, dn;  // W4A4 both: their workspace (A decoded to BF16) first; the two run in turn and share it
  gu.groups = dn.groups = int32_t(G);
  gu.gemm.m = R, gu.gemm.n = 2 * I, gu.gemm.k = H, gu.gemm.a_dtype = DType::nvfp4;
  dn.gemm.m = R, dn.gemm.n = H, dn.gemm.k = I, dn.gemm.a_dtype = DType::nvfp4;
  const int64_t ws_bytes = std::max(grouped_gemm_workspace_bytes(gu), grouped_gemm_workspace_bytes(dn));
  CUDA_OK(cudaMalloc(&d_tokens, T * H * esz));
  CUDA_OK(cudaMalloc(&d_router_ids, R * 4));
  CUDA_OK(cudaMalloc(&d_router_w, R * 4));
  CUDA_OK(cudaMalloc(&d_x, T * H / 2));
  CUDA_OK(cudaMalloc(&d_xs, scale_bytes(ScaleLayout::linear, T, H)));
  CUDA_OK(cudaMalloc(&d_ids, R * 4));
  CUDA_OK(cudaMalloc(&d_w, R * 4));
  CUDA_OK(cudaMalloc(&d_ends, G * 4));
  CUDA_OK(cudaMalloc(&d_rows, R * 4));
  CUDA_OK(cudaMalloc(&d_pos, R * 4));
  CUDA_OK(cudaMalloc(&d_h, R * 2 * I * esz));
  CUDA_OK(cudaMalloc(&d_hq, R * I / 2));
  CUDA_OK(cudaMalloc(&d_hqs, scale_bytes(ScaleLayout::linear, R, I)));
  CUDA_OK(cudaMalloc(&d_hg, R * 4));
  CUDA_OK(cudaMalloc(&d_y, R * H * esz));
  CUDA_OK(cudaMalloc(&d_out, T * H * esz));
  CUDA_OK(cudaMalloc(&d_ws, ws_bytes));
  CUDA_OK(cudaMemset(d_h, 0, R * 2 * I * esz));  // rows past the routed ones are quantized too: keep them finite
  cudaStream_t stream;
  CUDA_OK(cudaStreamCreate(&stream));

  // The layer, as the graph records it.
  MoeStageArgs st;
  st.tokens = d_tokens, st.rows = T, st.k = H;
  st.out.data = d_x, st.out.scales = d_xs, st.out.global_scale.value = input_scale;
  st.topk = topk, st.topk_ids = static_cast<const int32_t*>(d_router_ids), st.topk_weights = static_cast<const float*>(d_router_w);
  st.topk_ids_out = static_cast<int32_t*>(d_ids), st.topk_weights_out = static_cast<float*>(d_w);
  MoeRouteArgs rt;
  rt.topk_ids = d_ids, rt.tokens = T, rt.topk = topk, rt.groups = int32_t(G);
  rt.group_ends = static_cast<int32_t*>(d_ends), rt.row_index = static_cast<int32_t*>(d_rows), rt.positions = static_cast<int32_t*>(d_pos);
  gu.group_ends = static_cast<const int32_t*>(d_ends);
  gu.row_index = rt.row_index, gu.a_rows = T;  // sorted row r is token row_index[r]
  gu.gemm.a_fp4 = {d_x, 0, d_xs, ScaleLayout::linear, {input_scale, nullptr, false}};
  gu.gemm.b = {d_gu, 0, d_gus, ScaleLayout::linear, {1.0f, static_cast<const float*>(d_gug), true}};
  gu.gemm.d = d_h, gu.gemm.workspace = d_ws, gu.gemm.workspace_bytes = ws_bytes, gu.gemm.weights_static = true;
  SwigluQuantizeArgs sw;
  sw.in = d_h, sw.rows = R, sw.k = I;
  sw.out.data = d_hq, sw.out.scales = d_hqs;
  sw.out.scale_mode = GlobalScaleMode::compute_per_row, sw.out.global_scale_out = static_cast<float*>(d_hg);
  dn.group_ends = gu.group_ends;
  dn.gemm.a_fp4 = {d_hq, 0, d_hqs, ScaleLayout::linear, {1.0f, static_cast<const float*>(d_hg), true}};
  dn.gemm.b = {d_dn, 0, d_dns, ScaleLayout::linear, {1.0f, static_cast<const float*>(d_dng), true}};
  dn.gemm.d = d_y, dn.gemm.workspace = d_ws, dn.gemm.workspace_bytes = ws_bytes, dn.gemm.weights_static = true;
  MoeCombineArgs cb;
  cb.d = d_y, cb.d_rows = R, cb.positions = rt.positions, cb.weights = d_w, cb.tokens = T, cb.topk = topk, cb.n = H;
  cb.out = d_out;
  auto layer = [&] {
    moe_stage(st, stream);
    moe_route(rt, stream);
    grouped_gemm(gu, stream);
    swiglu_quantize(sw, stream);
    grouped_gemm(dn, stream);
    moe_combine(cb, stream);
  };

  std::vector<uint16_t> tokens(static_cast<size_t>(T * H));
  std::vector<int32_t> ids(static_cast<size_t>(R));
  std::vector<float> weights(static_cast<size_t>(R));
  cudaGraph_t graph = nullptr;
  cudaGraphExec_t exec = nullptr;
  bool ok = true;
  const char* routing[] = {"uniform", "skewed onto expert 3", "padded: 40% of the tokens real"};
  for (int replay = 0; replay < 3; ++replay) {
    // the router's outputs and the tokens, new each replay
    const long real = replay == 2 ? std::max(1L, T * 2 / 5) : T;
    for (auto& x : tokens) x = to_bf16(normal(rng));
    for (long t = 0; t < T; ++t) {
      float sum = 0;
      for (long j = 0; j < topk; ++j) {
        long e = replay == 1 && rng() % 4 ? 3 : long(rng() % G);
        for (long i = 0; i < j; ++i)  // distinct experts per token
          if (ids[size_t(t * topk + i)] == e) e = (e + 1) % G, i = -1;
        ids[size_t(t * topk + j)] = t < real ? int32_t(e) : -1;
        sum += weights[size_t(t * topk + j)] = 0.1f + float(rng() % 100) / 100.0f;
      }
      for (long j = 0; j < topk; ++j) weights[size_t(t * topk + j)] /= sum;
    }
    CUDA_OK(cudaMemcpyAsync(d_tokens, tokens.data(), tokens.size() * esz, cudaMemcpyHostToDevice, stream));
    CUDA_OK(cudaMemcpyAsync(d_router_ids, ids.data(), R * 4, cudaMemcpyHostToDevice, stream));
    CUDA_OK(cudaMemcpyAsync(d_router_w, weights.data(), R * 4, cudaMemcpyHostToDevice, stream));
    try {
      if (!exec) {
        layer();  // loads every kernel outside the capture
        CUDA_OK(cudaStreamSynchronize(stream));
        CUDA_OK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal));
        layer();
        CUDA_OK(cudaStreamEndCapture(stream, &graph));
        CUDA_OK(cudaGraphInstantiate(&exec, graph, 0));
      }
    } catch (const Error& e) {
      std::fprintf(stderr, "failed: %s\n", e.what());
      return 2;
    }
    CUDA_OK(cudaMemsetAsync(d_out, 0xFF, T * H * esz, stream));  // NaN: every token's row must be written
    CUDA_OK(cudaGraphLaunch(exec, stream));
    std::vector<int32_t> ends(static_cast<size_t>(G)), pos(static_cast<size_t>(R));
    std::vector<uint16_t> h(static_cast<size_t>(R * 2 * I)), out(static_cast<size_t>(T * H)), y(static_cast<size_t>(R * H));
    std::vector<uint8_t> hq(static_cast<size_t>(R * I / 2)), hqs(static_cast<size_t>(scale_bytes(ScaleLayout::linear, R, I)));
    std::vector<float> hg(static_cast<size_t>(R));
    CUDA_OK(cudaMemcpyAsync(ends.data(), d_ends, G * 4, cudaMemcpyDeviceToHost, stream));
    CUDA_OK(cudaMemcpyAsync(pos.data(), d_pos, R * 4, cudaMemcpyDeviceToHost, stream));
    CUDA_OK(cudaMemcpyAsync(h.data(), d_h, h.size() * esz, cudaMemcpyDeviceToHost, stream));
    CUDA_OK(cudaMemcpyAsync(hq.data(), d_hq, hq.size(), cudaMemcpyDeviceToHost, stream));
    CUDA_OK(cudaMemcpyAsync(hqs.data(), d_hqs, hqs.size(), cudaMemcpyDeviceToHost, stream));
    CUDA_OK(cudaMemcpyAsync(hg.data(), d_hg, R * 4, cudaMemcpyDeviceToHost, stream));
    CUDA_OK(cudaMemcpyAsync(out.data(), d_out, out.size() * esz, cudaMemcpyDeviceToHost, stream));
    CUDA_OK(cudaStreamSynchronize(stream));

    // routing: the CPU reference's
    std::vector<int32_t> ends_ref(static_cast<size_t>(G)), rows_ref(static_cast<size_t>(R)), pos_ref(static_cast<size_t>(R));
    MoeRouteArgs rc = rt;
    rc.topk_ids = ids.data(), rc.group_ends = ends_ref.data(), rc.row_index = rows_ref.data(), rc.positions = pos_ref.data();
    cpu::moe_route(rc);
    const bool routed = ends == ends_ref && pos == pos_ref;
    // the tokens as moe_stage quantizes them, decoded (exact) and scaled, in float64
    std::vector<uint8_t> xq(static_cast<size_t>(T * H / 2)), xqs(static_cast<size_t>(scale_bytes(ScaleLayout::linear, T, H)));
    std::vector<int32_t> ids_copy(static_cast<size_t>(R));
    MoeStageArgs sc = st;
    sc.tokens = tokens.data(), sc.out.data = xq.data(), sc.out.scales = xqs.data(), sc.topk_ids = ids.data();
    sc.topk_weights = nullptr, sc.topk_ids_out = ids_copy.data();
    cpu::moe_stage(sc);
    std::vector<float> xf(static_cast<size_t>(T * H)), hf(static_cast<size_t>(R * I));
    DequantizeArgs dq;
    dq.src = {xq.data(), 0, xqs.data(), ScaleLayout::linear, {input_scale, nullptr, false}};
    dq.src_rows = T, dq.k = H, dq.out = xf.data(), dq.out_dtype = DType::fp32;
    cpu::dequantize(dq);
    // the hidden rows: the GPU's NVFP4 equals swiglu_quantize's reference on the GPU's gate_up output
    std::vector<uint8_t> hq_ref(hq.size()), hqs_ref(hqs.size());
    std::vector<float> hg_ref(hg.size());
    SwigluQuantizeArgs sr = sw;
    sr.in = h.data(), sr.out.data = hq_ref.data(), sr.out.scales = hqs_ref.data(), sr.out.global_scale_out = hg_ref.data();
    cpu::swiglu_quantize(sr);
    const bool hidden_same = hq == hq_ref && hqs == hqs_ref && hg == hg_ref;
    dq.src = {hq.data(), 0, hqs.data(), ScaleLayout::linear, {1.0f, hg.data(), true}};
    dq.src_rows = R, dq.k = I, dq.out = hf.data();
    cpu::dequantize(dq);

    Error2 e_gate_up, e_layer, e_unquantized;
    bool padding_zero = true;
    std::vector<double> x(static_cast<size_t>(H)), hrow(static_cast<size_t>(I)), hexact(static_cast<size_t>(I)), acc(static_cast<size_t>(H)), exact(static_cast<size_t>(H));
    for (long t = 0; t < T; ++t) {
      std::fill(acc.begin(), acc.end(), 0.0), std::fill(exact.begin(), exact.end(), 0.0);
      for (long c = 0; c < H; ++c) x[size_t(c)] = xf[size_t(t * H + c)];
      for (long j = 0; j < topk; ++j) {
        const int e = ids[size_t(t * topk + j)];
        if (e < 0) continue;
        const long row = pos_ref[size_t(t * topk + j)];
        const double w = weights[size_t(t * topk + j)];
        for (long i = 0; i < I; ++i) {
          const double g = gate_up.dot(e, i, x.data()), u = gate_up.dot(e, I + i, x.data());
          e_gate_up.add(from_bf16(h[size_t(row * 2 * I + i)]), g);
          e_gate_up.add(from_bf16(h[size_t(row * 2 * I + I + i)]), u);
          hrow[size_t(i)] = hf[size_t(row * I + i)];
          hexact[size_t(i)] = silu(g) * u;
        }
        for (long c = 0; c < H; ++c) {
          acc[size_t(c)] += w * down.dot(e, c, hrow.data());
          exact[size_t(c)] += w * down.dot(e, c, hexact.data());
        }
      }
      for (long c = 0; c < H; ++c) {
        const double v = from_bf16(out[size_t(t * H + c)]);
        if (t >= real) padding_zero &= v == 0.0;
        e_layer.add(v, acc[size_t(c)]);
        e_unquantized.add(v, exact[size_t(c)]);
      }
    }
    // gate_up: BF16 output rounding; the layer: down's BF16 output rounding, then combine's
    const bool pass = routed && hidden_same && padding_zero && e_gate_up.rel() <= example::kBf16OutputBound &&
                      e_layer.rel() <= 2 * example::kBf16OutputBound;
    ok &= pass;
    std::printf("MoE layer T=%ld G=%ld topk=%ld hidden=%ld intermediate=%ld, graph replay %d (%s): routing %s, "
                "gate_up %.2e, hidden NVFP4 %s, layer %.2e against float64 (%.2e against float64 with unquantized "
                "hidden activations)%s %s\n",
                T, G, topk, H, I, replay, routing[replay], routed ? "= CPU reference" : "DIFFERS", e_gate_up.rel(),
                hidden_same ? "bit-identical" : "DIFFERS", e_layer.rel(), e_unquantized.rel(),
                replay == 2 ? (padding_zero ? ", padding tokens 0" : ", padding tokens NOT 0") : "", pass ? "(ok)" : "(FAILED)");
  }
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
  for (void* p : {d_gu, d_gus, d_gug, d_dn, d_dns, d_dng, d_tokens, d_router_ids, d_router_w, d_x, d_xs, d_ids, d_w, d_ends,
                  d_rows, d_pos, d_h, d_hq, d_hqs, d_hg, d_y, d_out, d_ws})
    cudaFree(p);
  cudaStreamDestroy(stream);
  return ok ? 0 : 1;
}
