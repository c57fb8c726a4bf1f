// The nvfp4-jit command line through CLI11: one table of verbs and flags gives the parser, each
// verb's generated help and the usage errors.
#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <algorithm>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "cli/command_line.hpp"
#include "core/spec.hpp"
#include "nvfp4/jit.hpp"

namespace nvfp4::jit::cli {

namespace {

// A flag: `value` names what it takes (nullptr: a switch). Repeated flags keep every value.
struct Flag {
  const char* name;
  const char* value;
  std::string help;
};

// A positional argument, optional.
struct Positional {
  const char* name;
  const char* help;
};

struct Verb {
  const char* name;
  const char* summary;  // the line in `nvfp4-jit --help`
  std::vector<Positional> positionals;
  std::vector<Flag> flags;
  const char* notes;  // after the flags in `nvfp4-jit <verb> --help`
};

// --arch's help, from the one list of arches: the default ones, then the others.
std::string arch_flag_help() {
  using detail::Arch;
  std::vector<Arch> others;
  for (Arch arch : detail::kAllArchs)
    if (std::ranges::find(detail::kDefaultPrewarmArchs, arch) == std::end(detail::kDefaultPrewarmArchs)) others.push_back(arch);
  return fmt::format("comma-separated targets (default {}; also {})", detail::arch_names(detail::kDefaultPrewarmArchs, ","),
                     detail::arch_names(others, ", "));
}

const std::vector<Verb>& verbs() {
  static const std::vector<Verb> table = {
      {"prewarm",
       "compile the kernels of model shapes into the disk cache (no GPU needed)",
       {},
       {{"--model", "DIR",
         "a ModelOpt NVFP4 checkpoint (config.json, and hf_quant_config.json or\n"
         "config.json's quantization_config): the GEMMs one rank of the engine runs, fused\n"
         "as engines fuse them (qkv, gate_up); modules the checkpoint excludes, routers,\n"
         "lm_head and embeddings are left out. model_type llama, mistral, qwen2, qwen3,\n"
         "qwen3_moe, deepseek_v2, deepseek_v3, kimi_k2, gpt_oss, mixtral"},
        {"--tp", "N",
         "tensor-parallel size, 1 to 65536 (default 1): column-parallel N / tp, row-parallel\n"
         "K / tp; KV heads fewer than tp are replicated"},
        {"--ep", "N",
         "expert-parallel size, 1 to 65536 (default 1): a rank holds E / ep whole experts;\n"
         "with 1, every expert's intermediate is split by tp"},
        {"--shapes", nullptr, "print the derived manifest (a --manifest file) and compile nothing"},
        {"--manifest", "NAME|FILE", "a built-in manifest or a manifest file (repeatable)"},
        {"--shape", "N,K[,G]", "a weight shape, G experts of N x K when given (repeatable)"},
        {"--arch", "LIST", arch_flag_help()},
        {"--sms", "N|GPU",
         "the SM count (1 to 1024) of the GPUs that will run the kernels: GEMM tiles are\n"
         "chosen for it; or a GPU's name (h100-sxm, h100-pcie, h200, h20, b200, rtx-5090,\n"
         "...). Default: this machine's GPU when its arch is prewarmed, else 132 (H100 SXM, H200)"},
        {"-j", "N",
         "compile threads, 1 to 256 (default: the number of cores); never more than the\n"
         "kernels to compile"},
        {"--json", nullptr, "print a JSON summary on stdout"},
        {"--quiet", nullptr, "no per-kernel lines or progress bar"},
        {"--list", nullptr, "print the kernels it would visit (name, tab, spec as JSON), compile nothing"},
        {"--a-dtype", "LIST", "GEMM activations: bf16, fp16, nvfp4 (W4A4) (default bf16,nvfp4)"},
        {"--d-dtype", "LIST", "GEMM output: bf16, fp16, fp32, nvfp4 (the SwiGLU epilogue's, sm_90a) (default bf16)"},
        {"--bias", "LIST", "none, bf16, fp32 (default none)"},
        {"--b-layout", "LIST", "weight scales: linear, swizzled, prepacked (default linear,prepacked)"},
        {"--a-scales", "LIST", "W4A4 activation scales: linear, swizzled (default linear)"},
        {"--grouped", "LIST", "a grouped weight's layout: contiguous, masked (default contiguous)"},
        {"--precision", "LIST", "GEMM precision modes: exact, w4a8 (sm_90a, prepacked weights) (default exact)"},
        {"--a-rmsnorm", "LIST",
         "RMSNorm of A in the GEMM: none, input (its weight in A's dtype), fp32 (sm_90a,\n"
         "dense W4A16) (default none)"},
        {"--residual", "LIST",
         "the GEMM's residual add: none, add (sm_90a, dense W4A16, no fused epilogue)\n"
         "(default none)"},
        {"--in-dtype", "LIST", "quantizer inputs: bf16, fp16, fp32 (default quantize bf16,fp16; fused bf16)"},
        {"--a-from", "LIST",
         "the ops that write the activations: quantize, rmsnorm, swiglu, mhc, stage\n"
         "(their quantizers are compiled at each weight's K; default all, stage for a\n"
         "grouped weight; the built-in manifests name each line's)"},
        {"--norm-weight", "LIST",
         "RMSNorm's weight (RMSNorm, mHC): input (the input's dtype), fp32\n"
         "(default: RMSNorm input, mHC fp32)"},
        {"--epilogue", "LIST",
         "GEMM epilogue: none, swiglu (a gate_up weight's fused SwiGLU: prepacked\n"
         "weights on sm_90a; as stored, gate then up halves, on sm_100a / sm_120a and\n"
         "their kin, W4A4), moe-combine (a grouped down weight's fused MoE combine:\n"
         "contiguous groups, sm_90a) (default none)"}},
       "Compiles every kernel the given weight shapes need, for every arch given, into the cache.\n"
       "Built-in manifests: llama-3.1-8b, llama-3.3-70b, deepseek-v3, qwen3-30b-a3b, gpt-oss-120b\n"
       "(see `nvfp4-jit info`). A manifest FILE is a regular file of at most 16 MiB; lines of the\n"
       "same shape and variants are compiled once.\n"
       "Kernels already in the cache are not compiled again; processes running at once share work.\n"
       "The variant flags (--a-dtype to --epilogue) take comma-separated lists; every\n"
       "combination is compiled; a manifest line's own `key=value` fields, e.g.\n"
       "`qkv_proj 6144 4096 bias=bf16`, replace them for that line.\n"},
      {"tune",
       "time the GEMM tile candidates of model shapes on this GPU, remember the fastest",
       {},
       {{"--manifest", "NAME|FILE", "a built-in manifest or a manifest file (repeatable)"},
        {"--shape", "N,K[,G]", "a weight shape, G experts of N x K when given (repeatable)"},
        {"--m", "M", "tune only the bucket holding M (1 or more)"},
        {"--runs", "R", "timed launches per candidate, 1 to 10000 (default 10)"},
        {"--layout", "linear|swizzled128x4|prepacked",
         "the weights' layout: scale layout as stored, or prepacked (default linear)"},
        {"--a-dtype", "bf16|fp16|nvfp4", "the activations (default bf16; sm_120a / sm_121a run nvfp4 only: W4A4)"},
        {"--a-scales", "linear|swizzled", "W4A4's activation scales (default linear, as quantized)"},
        {"--precision", "exact|w4a8", "the GEMM's precision mode (default exact; w4a8: sm_90a, --layout prepacked)"},
        {"--grouped", "contiguous|masked",
         "a grouped weight's (G experts) layout (default contiguous); its M buckets are rows\n"
         "per expert (grouped_gemm's expected_m), up to 512, timed at --m (each bucket's\n"
         "largest without it) on a uniform routing: tune at the rows per expert you serve;\n"
         "the <=8 bucket also on one token's rows (one in each of 8 experts), scored by\n"
         "the geometric mean of the two times"},
        {"--epilogue", "none|swiglu",
         "the GEMM's epilogue (default none); swiglu: a gate_up weight's fused SwiGLU\n"
         "(sm_90a: --layout prepacked; sm_100a / sm_120a: linear or swizzled128x4,\n"
         "gate then up halves, --a-dtype nvfp4)"},
        {"--json", nullptr, "print the results as JSON on stdout"}},
       "For each weight shape and M bucket (<=8, 16, ..., 2048, >2048), times every candidate\n"
       "GEMM tile on this GPU (scratch buffers, weights rotated past L2, median of R runs), keeps the\n"
       "fastest (the heuristic's unless another is 2% faster) and records it in the cache root's\n"
       "v2/tuning/<arch>-<device>-<SMs>.json; gemm() uses it from then on, in every process.\n"
       "Candidates compile in parallel (cached ones load from disk). Needs a GPU (exit 3 without one).\n"},
      {"cache",
       "stats | ls | verify | prune | clear | export | import: look after the disk cache",
       {{"ACTION", "stats, ls, verify, prune, clear, export or import"},
        {"FILE", "export's and import's tar file; `-`: standard output / input"}},
       {{"--json", nullptr, "print the result as JSON on stdout"},
        {"--remove-bad", nullptr, "verify: delete the bad entries of the writable root"},
        {"--older-than", "AGE", "prune: the age (days, or a number with d, h, m or s)"}},
       "  stats        roots, writability, entries and bytes per arch\n"
       "  ls           one line per entry: arch, key, size, created, kernel\n"
       "  verify       check every entry's checksum and sidecar; exit 1 if any is bad\n"
       "               (--remove-bad deletes the bad entries of the writable root)\n"
       "  prune --older-than AGE\n"
       "               delete the writable root's entries written more than AGE ago\n"
       "  clear        delete every entry of the writable root (read-only roots are never touched)\n"
       "  export FILE  write the writable root's verified kernels and tuning tables to a tar file:\n"
       "               a new file or a regular file it replaces (never a symlink, device or FIFO);\n"
       "               `-` writes it to standard output (not a terminal), the summary to stderr\n"
       "  import FILE  add a tar file's (a regular file, or `-`: standard input; at most 1 GiB)\n"
       "               kernels (each verified) and tuning tables (merged; tables of other library /\n"
       "               NVRTC / driver versions are left out) to the writable root; exit 1 if any\n"
       "               member was skipped. To serve a shipped cache read-only instead, unpack it\n"
       "               and name the directory in NVFP4_JIT_CACHE_PATH.\n"},
      {"info",
       "library, NVRTC (path, version, how found) and driver versions, devices, cache roots, manifests",
       {},
       {{"--json", nullptr, "print it as JSON on stdout"}},
       "Library, NVRTC and driver versions, NVRTC targets, GPUs, cache roots, built-in manifests.\n"},
      {"bench",
       "core | dequantize | quantize | rmsnorm-quantize | swiglu-quantize | mhc-rmsnorm-quantize |\n"
       "moe-stage | gemm | grouped | block: time the JIT, the kernels and whole blocks on this GPU",
       {{"BENCHMARK",
         "core, dequantize, quantize, rmsnorm-quantize, swiglu-quantize,\n"
         "mhc-rmsnorm-quantize, moe-stage, gemm, grouped or block"}},
       {{"--out", "FILE.json", "also write the results as JSON to FILE.json"},
        {"--quick", nullptr, "fewer shapes and runs"},
        {"--shape", "N,K[,G]", "gemm and grouped: only these weight shapes (repeatable)"},
        {"--m", "M[,M...]", "gemm and the bandwidth benches: only these M (rows)"},
        {"--k", "K[,K...]", "the bandwidth benches: only these row lengths"},
        {"--expected-m", "E[,E...]", "grouped: also time each of these expected_m hints"},
        {"--tokens", "T[,T...]", "grouped and block: only these token counts"},
        {"--block", "NAME[,NAME...]", "block: only these blocks (llama-3.1-8b-mlp, deepseek-v3-moe, ...)"},
        {"--topk", "T", "grouped with --shape N,K,G: the experts each token is routed to (default 8)"},
        {"--in-dtype", "bf16|fp16|fp32", "rmsnorm-quantize and swiglu-quantize: the input dtype"},
        {"--weight-fp32", nullptr, "rmsnorm-quantize: an fp32 weight"},
        {"--per-row", nullptr, "the four fused quantizers: compute each row's global scale"}},
       "  core        cold NVRTC compile per kernel, disk-cache hit (load to first launch),\n"
       "              warm dispatch host time per call\n"
       "  dequantize  NVFP4 -> BF16 bandwidth against a device-to-device copy of the same bytes\n"
       "  quantize    BF16 -> NVFP4 (given global scale) bandwidth against the same copy\n"
       "  rmsnorm-quantize\n"
       "              BF16 -> RMSNorm -> NVFP4 in one pass, against the same copy; --in-dtype fp16 or\n"
       "              fp32 times that input (and weight) dtype, --weight-fp32 an fp32 weight\n"
       "  swiglu-quantize\n"
       "              BF16 gate and up (two halves) -> silu(gate) * up -> NVFP4, against the same copy;\n"
       "              --in-dtype fp16 times FP16 gate and up\n"
       "  mhc-rmsnorm-quantize\n"
       "              BF16 [M, 4, K] mixed per row (mHC), RMSNorm, NVFP4 in one pass, against the same copy\n"
       "  moe-stage   BF16 tokens -> NVFP4 with 8 router ids and weights copied (MoE staging)\n"
       "              (these six: --m rows and --k row lengths time every pair of them, defaults 8192,\n"
       "              4096, 16, 1 rows and K 8192; neither: docs/perf.md's table; the four fused ones\n"
       "              take a given global scale, or with --per-row compute each row's)\n"
       "  gemm        W4A16 GEMM against cuBLAS BF16 (dlopened) on decode, M=128, prefill and an M\n"
       "              sweep; GPU time per call, 8 calls back to back (also with\n"
       "              weights_static), weights rotated past L2; floor = max(bytes / copy\n"
       "              bandwidth, flops / cuBLAS BF16 peak measured in the same process);\n"
       "              --shape and --m time only those weight shapes (default 8192,8192) and\n"
       "              those M (default 1, 16, 128, 4096)\n"
       "  grouped     grouped_gemm (contiguous, prepacked experts) on DeepSeek-V3, Qwen3-30B-A3B and\n"
       "              gpt-oss-120b expert shapes, 1 to 16384 tokens routed uniformly and Zipf, against the\n"
       "              touched experts' byte floor, our dense gemm on the same rows, a per-expert\n"
       "              cuBLAS BF16 loop and cublasGemmGroupedBatchedEx; --expected-m also times\n"
       "              each of those expected_m hints (the tile's rows per expert); --tokens\n"
       "              times only those token counts; --shape N,K,G only those expert shapes\n"
       "              (G experts of N x K, each token routed to --topk of them, default 8).\n"
       "              Then, without --shape, the batched layout (wo_a: 8 groups, 1536 x 8192)\n"
       "              against our dense gemm and cublasGemmStridedBatchedEx\n"
       "  block       whole decoder blocks under CUDA graphs: the Llama-3.1-8B MLP and the DeepSeek-V3,\n"
       "              Qwen3-30B-A3B and gpt-oss-120b MoE blocks, today's public ops chained on\n"
       "              prepacked weights, 1 to 4096 tokens, uniform and Zipf routing, W4A16 and W4A4,\n"
       "              eight routings a graph, against the touched weights' byte floor; --block and\n"
       "              --tokens time only those\n"
       "Times are GPU time (the host's launch costs are not in them: see bench core).\n"
       "Needs a GPU (exit 3 without one).\n"},
  };
  return table;
}

constexpr const char* kFooter = R"(environment:
  NVFP4_JIT_CACHE_DIR    cache root (else $XDG_CACHE_HOME/nvfp4-jit, else ~/.cache/nvfp4-jit)
  NVFP4_JIT_CACHE_PATH   extra read-only cache roots, colon-separated
  NVFP4_JIT_AUTOTUNE     1: a GEMM tunes an untuned M bucket on first use (default: tuned
                         entries when present, else the heuristic)
  NVFP4_JIT_NVRTC        the libnvrtc.so to compile with (else one already loaded, the
                         nvidia-cuda-nvrtc wheel beside the binary, the system CUDA; `info` says which)

exit codes: 0 success, 1 something failed (kernels, cache entries, GPU work),
            2 usage error, 3 no GPU where one is needed
)";

// CLI11's layout with the usage line first, as `man` and most commands print it.
class Help : public CLI::Formatter {
 public:
  Help() {
    column_width(26);
    label("Usage", "usage");
    label("OPTIONS", "options");
    label("SUBCOMMAND", "<verb>");
    label("Positionals", "arguments");
  }
  std::string make_help(const CLI::App* app, std::string name, CLI::AppFormatMode mode) const override {
    if (mode == CLI::AppFormatMode::Sub) return make_expanded(app);
    std::string out = make_usage(app, name);
    if (!app->get_description().empty()) out += "\n" + app->get_description() + "\n";
    return out + make_positionals(app) + make_groups(app, mode) + make_subcommands(app, mode) + "\n" + make_footer(app);
  }
};

std::unique_ptr<CLI::App> make_app() {
  auto app = std::make_unique<CLI::App>("nvfp4-jit: NVFP4 kernels generated, compiled and cached at run time.", "nvfp4-jit");
  app->formatter(std::make_shared<Help>());
  app->option_defaults()->group("options");
  app->set_help_flag("-h,--help", "print this help and exit")->group("options");
  app->set_version_flag("--version", std::string("nvfp4-jit ") + version(), "print the version and exit");
  app->footer(kFooter);
  app->require_subcommand(1);
  for (const Verb& verb : verbs()) {
    CLI::App* sub = app->add_subcommand(verb.name, verb.summary);
    sub->group("verbs");
    sub->get_help_ptr()->group("options");
    sub->footer(verb.notes);
    for (const Positional& p : verb.positionals) sub->add_option(p.name, p.help)->type_name("");
    for (const Flag& f : verb.flags) {
      if (f.value) sub->add_option(f.name, f.help)->type_name(f.value)->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
      else sub->add_flag(f.name, f.help);
    }
  }
  return app;
}

const Verb* find_verb(const std::string& name) {
  for (const Verb& v : verbs())
    if (name == v.name) return &v;
  return nullptr;
}

std::vector<std::string> verb_names() {
  std::vector<std::string> names;
  for (const Verb& v : verbs()) names.emplace_back(v.name);
  return names;
}

// The parsed subcommand's flags and positionals as Args.
Args args_of(const CLI::App& sub, const Verb& verb) {
  std::map<std::string, std::vector<std::string>> values;
  for (const Flag& f : verb.flags) {
    const CLI::Option* opt = sub.get_option(f.name);
    if (opt->count() == 0) continue;
    values[f.name] = f.value ? opt->results() : std::vector<std::string>(opt->count(), "");
  }
  std::vector<std::string> positional;
  for (const Positional& p : verb.positionals)
    for (const std::string& v : sub.get_option(p.name)->results()) positional.push_back(v);
  return Args(std::move(values), std::move(positional));
}

// A short message for CLI11's parse error: the unknown flag (with the nearest known one), the
// unexpected argument, the missing value, or CLI11's own words.
std::string message_of(const CLI::ParseError& e, const CLI::App& sub, const Verb& verb) {
  if (dynamic_cast<const CLI::ExtrasError*>(&e)) {
    const std::vector<std::string> extra = sub.remaining();
    if (!extra.empty()) {
      const std::string& first = extra.front();
      if (first.size() > 1 && first[0] == '-') {
        std::vector<std::string> known;
        for (const Flag& f : verb.flags) known.emplace_back(f.name);
        const std::string name = first.substr(0, first.find('='));
        return fmt::format("unknown option `{}`{}", name, did_you_mean(name, known));
      }
      return fmt::format("unexpected argument `{}`", first);
    }
  }
  if (dynamic_cast<const CLI::ArgumentMismatch*>(&e)) {  // "--shape: 1 required N,K[,G] missing"
    const std::string text = e.what();
    for (const Flag& f : verb.flags)
      if (f.value && text.rfind(std::string(f.name) + ":", 0) == 0) return fmt::format("{} expects {}, got nothing", f.name, f.value);
  }
  return e.what();
}

void print_help(const CLI::App& app, FILE* out) { std::fputs(app.help().c_str(), out); }

}  // namespace

void print_usage_error(const std::string& verb, const std::string& message) {
  std::fprintf(stderr, "nvfp4-jit %s: %s\nrun `nvfp4-jit %s --help`\n", verb.c_str(), message.c_str(), verb.c_str());
}

Parsed parse_command_line(int argc, const char* const* argv) {
  const std::unique_ptr<CLI::App> app = make_app();
  const std::vector<std::string> rest(argv + 1, argv + argc);
  if (rest.empty()) {  // help on stderr: the command was incomplete
    print_help(*app, stderr);
    return {std::nullopt, kUsage};
  }
  // `nvfp4-jit help [verb]` and `nvfp4-jit --help [verb]`
  if (rest[0] == "help" || rest[0] == "--help" || rest[0] == "-h") {
    if (rest.size() > 1 && find_verb(rest[1])) std::fputs(app->get_subcommand(rest[1])->help("nvfp4-jit").c_str(), stdout);
    else print_help(*app, stdout);
    return {std::nullopt, kOk};
  }
  if (rest[0] == "--version") {
    std::printf("nvfp4-jit %s\n", version());
    return {std::nullopt, kOk};
  }
  const Verb* verb = find_verb(rest[0]);
  if (!verb) {
    std::fprintf(stderr, "nvfp4-jit: unknown verb `%s`%s\nrun `nvfp4-jit --help`\n", rest[0].c_str(),
                 did_you_mean(rest[0], verb_names()).c_str());
    return {std::nullopt, kUsage};
  }
  CLI::App* sub = app->get_subcommand(verb->name);
  try {
    app->parse(argc, argv);
  } catch (const CLI::CallForHelp&) {
    std::fputs(sub->help("nvfp4-jit").c_str(), stdout);
    return {std::nullopt, kOk};
  } catch (const CLI::ParseError& e) {
    print_usage_error(verb->name, message_of(e, *sub, *verb));
    return {std::nullopt, kUsage};
  }
  return {Command{verb->name, args_of(*sub, *verb)}, kOk};
}

}  // namespace nvfp4::jit::cli
