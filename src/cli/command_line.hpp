// The nvfp4-jit command line: every verb's flags and help, parsed by CLI11 into Args.
#pragma once
#include <optional>
#include <string>

#include "cli/cli.hpp"

namespace nvfp4::jit::cli {

// A verb and its arguments, read from the command line.
struct Command {
  std::string verb;
  Args args;
};

// What the command line asks for: a verb to run, or (help, --version, a usage error) the exit
// code, with the output already written.
struct Parsed {
  std::optional<Command> command;
  int exit_code = kOk;
};

Parsed parse_command_line(int argc, const char* const* argv);

// The usage error's two lines on stderr: "nvfp4-jit <verb>: <message>" and where the help is.
void print_usage_error(const std::string& verb, const std::string& message);

}  // namespace nvfp4::jit::cli
