// nvfp4-jit: prewarm, inspect and verify the kernel cache; report the setup; benchmark.
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "cli/cli.hpp"
#include "nvfp4/jit.hpp"

namespace {

constexpr const char* kHelp = R"(nvfp4-jit: NVFP4 kernels generated, compiled and cached at run time.

usage: nvfp4-jit <verb> [options]      nvfp4-jit <verb> --help

verbs:
  prewarm   compile the kernels of model shapes into the disk cache (no GPU needed)
  tune      time the GEMM tile candidates of model shapes on this GPU, remember the fastest
  cache     stats | ls | verify | prune | clear | export | import: look after the disk cache
  info      library, NVRTC (path, version, how found) and driver versions, devices, cache roots, manifests
  bench     core | dequantize | quantize | rmsnorm-quantize | swiglu-quantize | mhc-rmsnorm-quantize | moe-stage |
            gemm | grouped:
            time the JIT and the kernels on this GPU

environment:
  NVFP4_JIT_CACHE_DIR    cache root (else $XDG_CACHE_HOME/nvfp4-jit, else ~/.cache/nvfp4-jit)
  NVFP4_JIT_CACHE_PATH   extra read-only cache roots, colon-separated
  NVFP4_JIT_AUTOTUNE     1: a GEMM tunes an untuned M bucket on first use (default: tuned
                         entries when present, else the heuristic)
  NVFP4_JIT_NVRTC        the libnvrtc.so to compile with (else one already loaded, the
                         nvidia-cuda-nvrtc wheel beside the binary, the system CUDA; `info` says which)

exit codes: 0 success, 1 something failed (kernels, cache entries, GPU work),
            2 usage error, 3 no GPU where one is needed
)";

constexpr const char* kVerbHelp[][2] = {
    {"prewarm", R"(usage: nvfp4-jit prewarm [--model DIR [--tp N] [--ep N] [--shapes]]
                        [--manifest NAME|FILE]... [--shape N,K[,G]]...
                        [--arch sm_90a,sm_100a,sm_120a] [--sms N|GPU] [-j N] [--json] [--quiet] [--list]
                        [--a-dtype ...] [--d-dtype ...] [--bias ...] [--b-layout ...]
                        [--a-scales ...] [--grouped ...] [--in-dtype ...] [--a-from ...] [--norm-weight ...]

Compiles every kernel the given weight shapes need, for every arch given, into the cache.
Built-in manifests: llama-3.1-8b, llama-3.3-70b, deepseek-v3, qwen3-30b-a3b, gpt-oss-120b
(see `nvfp4-jit info`). A manifest FILE is a regular file of at most 16 MiB; lines of the
same shape and variants are compiled once.
Kernels already in the cache are not compiled again; processes running at once share work.
  --model DIR  a ModelOpt NVFP4 checkpoint (config.json, and hf_quant_config.json or
            config.json's quantization_config): the GEMMs one rank of the engine runs, fused
            as engines fuse them (qkv, gate_up); modules the checkpoint excludes, routers,
            lm_head and embeddings are left out. model_type llama, mistral, qwen2, qwen3,
            qwen3_moe, deepseek_v2, deepseek_v3, kimi_k2, gpt_oss, mixtral
  --tp N    tensor-parallel size, 1 to 65536 (default 1): column-parallel N / tp, row-parallel K / tp;
            KV heads fewer than tp are replicated
  --ep N    expert-parallel size, 1 to 65536 (default 1): a rank holds E / ep whole experts; with 1,
            every expert's intermediate is split by tp
  --shapes  print the derived manifest (a --manifest file) and compile nothing
  --arch    comma-separated targets (default sm_90a,sm_100a,sm_120a; also sm_103a, sm_121a)
  --sms N   the SM count (1 to 1024) of the GPUs that will run the kernels: GEMM tiles are chosen for it;
            or a GPU's name (h100-sxm, h100-pcie, h200, h20, b200, rtx-5090, ...). Default: this
            machine's GPU when its arch is prewarmed, else 132 (H100 SXM, H200)
  -j N      compile threads, 1 to 256 (default: the number of cores); never more than the
            kernels to compile
  --json    print a JSON summary on stdout
  --quiet   no per-kernel lines or progress bar
  --list    print the kernels it would visit (name, tab, spec as JSON), compile nothing
The variants a deployment runs (comma-separated lists; every combination is compiled; a manifest
line's own `key=value` fields, e.g. `qkv_proj 6144 4096 bias=bf16`, replace these for that line):
  --a-dtype   GEMM activations: bf16, fp16, nvfp4 (W4A4)            (default bf16,nvfp4)
  --d-dtype   GEMM output: bf16, fp16, fp32                          (default bf16)
  --bias      none, bf16, fp32                                       (default none)
  --b-layout  weight scales: linear, swizzled, prepacked             (default linear,prepacked)
  --a-scales  W4A4 activation scales: linear, swizzled               (default linear)
  --grouped   a grouped weight's layout: contiguous, masked          (default contiguous)
  --in-dtype  quantizer inputs: bf16, fp16, fp32    (default quantize bf16,fp16; fused bf16)
  --a-from    the ops that write the activations: quantize, rmsnorm, swiglu, mhc, stage
              (their quantizers are compiled at each weight's K; default all, stage for a
              grouped weight; the built-in manifests name each line's)
  --norm-weight  RMSNorm's weight (RMSNorm, mHC): input (the input's dtype), fp32
              (default: RMSNorm input, mHC fp32)
)"},
    {"tune", R"(usage: nvfp4-jit tune [--manifest NAME|FILE]... [--shape N,K[,G]]... [--m M] [--runs R]
                     [--layout linear|swizzled128x4|prepacked] [--a-dtype bf16|fp16|nvfp4]
                     [--a-scales linear|swizzled] [--grouped contiguous|masked] [--json]

For each weight shape and M bucket (<=8, 16, ..., 2048, >2048), times every candidate
GEMM tile on this GPU (scratch buffers, weights rotated past L2, median of R runs), keeps the
fastest (the heuristic's unless another is 2% faster) and records it in the cache root's
v2/tuning/<arch>-<device>-<SMs>.json; gemm() uses it from then on, in every process.
Candidates compile in parallel (cached ones load from disk). Needs a GPU (exit 3 without one).
  --m M     tune only the bucket holding M (1 or more)
  --runs R  timed launches per candidate, 1 to 10000 (default 10)
  --layout  the weights' layout: scale layout as stored, or prepacked (default linear)
  --a-dtype the activations (default bf16; sm_120a / sm_121a run nvfp4 only: W4A4)
  --a-scales W4A4's activation scales, linear or swizzled (default linear, as quantized)
  --grouped  a grouped weight's (G experts) layout (default contiguous); its M buckets are rows
             per expert (grouped_gemm's expected_m), up to 512, timed at --m (each bucket's
             largest without it) on a uniform routing: tune at the rows per expert you serve;
             the <=8 bucket also on one token's rows (one in each of 8 experts), scored by
             the geometric mean of the two times
)"},
    {"cache", R"(usage: nvfp4-jit cache stats|ls|verify|prune|clear|export FILE|-|import FILE|- [--json]

  stats        roots, writability, entries and bytes per arch
  ls           one line per entry: arch, key, size, created, kernel
  verify       check every entry's checksum and sidecar; exit 1 if any is bad
               (--remove-bad deletes the bad entries of the writable root)
  prune --older-than AGE
               delete the writable root's entries written more than AGE ago
               (AGE: days, or a number with d, h, m or s)
  clear        delete every entry of the writable root (read-only roots are never touched)
  export FILE  write the writable root's verified kernels and tuning tables to a tar file:
               a new file or a regular file it replaces (never a symlink, device or FIFO);
               `-` writes it to standard output (not a terminal), the summary to stderr
  import FILE  add a tar file's (a regular file, or `-`: standard input; at most 1 GiB) kernels (each verified) and tuning tables (merged; tables of
               other library / NVRTC / driver versions are left out) to the writable root;
               exit 1 if any member was skipped. To serve a shipped cache read-only instead,
               unpack it and name the directory in NVFP4_JIT_CACHE_PATH.
)"},
    {"info", R"(usage: nvfp4-jit info [--json]

Library, NVRTC and driver versions, NVRTC targets, GPUs, cache roots, built-in manifests.
)"},
    {"bench", R"(usage: nvfp4-jit bench core|dequantize|quantize|rmsnorm-quantize|swiglu-quantize|mhc-rmsnorm-quantize|moe-stage|gemm|grouped
                        [--out FILE.json] [--quick]
                        [--shape N,K[,G]]... [--m M[,M...]] [--k K[,K...]] [--expected-m E[,E...]] [--tokens T[,T...]] [--topk T]
                        [--in-dtype bf16|fp16|fp32] [--weight-fp32] [--per-row]

  core        cold NVRTC compile per kernel, disk-cache hit (load to first launch),
              warm dispatch host time per call
  dequantize  NVFP4 -> BF16 bandwidth against a device-to-device copy of the same bytes
  quantize    BF16 -> NVFP4 (given global scale) bandwidth against the same copy
  rmsnorm-quantize
              BF16 -> RMSNorm -> NVFP4 in one pass, against the same copy; --in-dtype fp16 or
              fp32 times that input (and weight) dtype, --weight-fp32 an fp32 weight
  swiglu-quantize
              BF16 gate and up (two halves) -> silu(gate) * up -> NVFP4, against the same copy;
              --in-dtype fp16 times FP16 gate and up
  mhc-rmsnorm-quantize
              BF16 [M, 4, K] mixed per row (mHC), RMSNorm, NVFP4 in one pass, against the same copy
  moe-stage   BF16 tokens -> NVFP4 with 8 router ids and weights copied (MoE staging)
              (these six: --m rows and --k row lengths time every pair of them, defaults 8192,
              4096, 16, 1 rows and K 8192; neither: docs/perf.md's table; the four fused ones
              take a given global scale, or with --per-row compute each row's)
  gemm        W4A16 GEMM against cuBLAS BF16 (dlopened) on decode, M=128, prefill and an M
              sweep; GPU time per call, 8 calls back to back (also with
              weights_static), weights rotated past L2; floor = max(bytes / copy
              bandwidth, flops / cuBLAS BF16 peak measured in the same process);
              --shape and --m time only those weight shapes (default 8192,8192) and
              those M (default 1, 16, 128, 4096)
  grouped     grouped_gemm (contiguous, prepacked experts) on DeepSeek-V3, Qwen3-30B-A3B and
              gpt-oss-120b expert shapes, 1 to 16384 tokens routed uniformly and Zipf, against the
              touched experts' byte floor, our dense gemm on the same rows, a per-expert
              cuBLAS BF16 loop and cublasGemmGroupedBatchedEx; --expected-m also times
              each of those expected_m hints (the tile's rows per expert); --tokens
              times only those token counts; --shape N,K,G only those expert shapes
              (G experts of N x K, each token routed to --topk of them, default 8).
              Then, without --shape, the batched layout (wo_a: 8 groups, 1536 x 8192)
              against our dense gemm and cublasGemmStridedBatchedEx
Times are GPU time (the host's launch costs are not in them: see bench core).
Needs a GPU (exit 3 without one).
)"},
};

const char* verb_help(const std::string& verb) {
  for (const auto& [name, text] : kVerbHelp)
    if (verb == name) return text;
  return nullptr;
}

}  // namespace

int main(int argc, char** argv) {
  using namespace nvfp4::jit::cli;
  std::vector<std::string> rest(argv + 1, argv + argc);
  if (rest.empty() || rest[0] == "--help" || rest[0] == "-h" || rest[0] == "help") {
    if (rest.size() > 1 && verb_help(rest[1])) {
      std::fputs(verb_help(rest[1]), stdout);
      return kOk;
    }
    std::fputs(kHelp, rest.empty() ? stderr : stdout);
    return rest.empty() ? kUsage : kOk;
  }
  if (rest[0] == "--version") {
    std::printf("nvfp4-jit %s\n", nvfp4::jit::version());
    return kOk;
  }
  const std::string verb = rest[0];
  rest.erase(rest.begin());
  if (!verb_help(verb)) {
    std::fprintf(stderr, "nvfp4-jit: unknown verb `%s`\n\n%s", verb.c_str(), kHelp);
    return kUsage;
  }
  try {
    const Args args(rest, {"--manifest", "--shape", "--model", "--tp", "--ep", "--arch", "--sms", "-j", "--out", "--m", "--runs", "--layout", "--older-than",
                           "--a-dtype", "--d-dtype", "--bias", "--b-layout", "--a-scales", "--grouped", "--in-dtype",
                           "--a-from", "--norm-weight", "--expected-m", "--tokens", "--topk", "--k"});
    if (args.has("--help") || args.has("-h")) {
      std::fputs(verb_help(verb), stdout);
      return kOk;
    }
    if (verb == "prewarm") return cmd_prewarm(args);
    if (verb == "cache") return cmd_cache(args);
    if (verb == "info") return cmd_info(args);
    if (verb == "tune") return cmd_tune(args);
    return cmd_bench(args);
  } catch (const UsageError& e) {
    std::fprintf(stderr, "nvfp4-jit %s: %s\n\n%s", verb.c_str(), e.what(), verb_help(verb));
    return kUsage;
  } catch (const nvfp4::jit::Error& e) {
    std::fprintf(stderr, "nvfp4-jit %s: %s\n", verb.c_str(), e.what());
    return e.status() == nvfp4::jit::Status::invalid_argument ? kUsage
           : e.status() == nvfp4::jit::Status::no_device      ? kNoGpu
                                                              : kFailed;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "nvfp4-jit %s: %s\n", verb.c_str(), e.what());
    return kFailed;
  }
}
