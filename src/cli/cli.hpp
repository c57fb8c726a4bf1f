// The nvfp4-jit command: verbs share this small argument reader and exit codes.
#pragma once
#include <map>
#include <stdexcept>
#include <string>
#include <vector>

#include "core/manifest.hpp"

namespace nvfp4::jit::cli {

// Exit codes (documented in `nvfp4-jit --help` and the README).
enum Exit : int { kOk = 0, kFailed = 1, kUsage = 2, kNoGpu = 3 };

struct UsageError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// A verb's arguments as the command line gave them (command_line.cpp reads them): each flag's
// values in order (a switch's are empty), and the positional arguments.
class Args {
 public:
  Args(std::map<std::string, std::vector<std::string>> values, std::vector<std::string> positional)
      : values_(std::move(values)), positional_(std::move(positional)) {}
  bool has(const std::string& flag) const { return values_.count(flag) > 0; }
  std::string get(const std::string& flag, const std::string& fallback = "") const;
  std::vector<std::string> all(const std::string& flag) const;
  // The flag's integer, `fallback` when it is not given; UsageError stating the range [lo, hi]
  // when it is not an integer in it.
  int get_int(const std::string& flag, int fallback, int lo, int hi) const;
  const std::vector<std::string>& positional() const { return positional_; }

 private:
  std::map<std::string, std::vector<std::string>> values_;
  std::vector<std::string> positional_;
};

std::vector<std::string> split(const std::string& text, char sep);
// " (did you mean `prewarm`?)" for the name in `known` nearest `given` by edit distance, when
// it is near (at most a third of its letters differ); "" when none is.
std::string did_you_mean(const std::string& given, const std::vector<std::string>& known);
// The weight shapes of every --manifest and --shape given (UsageError when there are none).
// The shapes of every --manifest and --shape; a manifest line's own variant fields replace `variants`'.
std::vector<detail::WeightShape> shapes_from(const Args& args, const detail::PrewarmVariants& variants = {});
// The NVRTC in use, for info and cache stats: "13.0, <path> (<how it was found>)", or "none: <why>".
std::string nvrtc_line();

int cmd_prewarm(const Args& args);
int cmd_cache(const Args& args);
int cmd_info(const Args& args);
int cmd_bench(const Args& args);
int cmd_tune(const Args& args);

}  // namespace nvfp4::jit::cli
