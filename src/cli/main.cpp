// nvfp4-jit: prewarm, inspect and verify the kernel cache; report the setup; benchmark.
#include <cstdio>
#include <string>

#include "cli/command_line.hpp"
#include "nvfp4/jit.hpp"

int main(int argc, char** argv) {
  using namespace nvfp4::jit::cli;
  const Parsed parsed = parse_command_line(argc, argv);
  if (!parsed.command) return parsed.exit_code;
  const std::string& verb = parsed.command->verb;
  const Args& args = parsed.command->args;
  try {
    if (verb == "prewarm") return cmd_prewarm(args);
    if (verb == "cache") return cmd_cache(args);
    if (verb == "info") return cmd_info(args);
    if (verb == "tune") return cmd_tune(args);
    return cmd_bench(args);
  } catch (const UsageError& e) {
    print_usage_error(verb, e.what());
    return kUsage;
  } catch (const nvfp4::jit::Error& e) {
    if (e.status() == nvfp4::jit::Status::invalid_argument) {
      print_usage_error(verb, e.what());
      return kUsage;
    }
    std::fprintf(stderr, "nvfp4-jit %s: %s\n", verb.c_str(), e.what());
    return e.status() == nvfp4::jit::Status::no_device ? kNoGpu : kFailed;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "nvfp4-jit %s: %s\n", verb.c_str(), e.what());
    return kFailed;
  }
}
