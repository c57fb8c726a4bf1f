// Helpers shared by the test files: temp dirs, scoped environment, running the CLI.
#pragma once
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

namespace testutil {

// Every CUBIN below a cache root, sorted.
inline std::vector<std::filesystem::path> cubins(const std::string& root) {
  std::vector<std::filesystem::path> out;
  for (const auto& e : std::filesystem::recursive_directory_iterator(root))
    if (e.path().extension() == ".cubin") out.push_back(e.path());
  std::sort(out.begin(), out.end());
  return out;
}

struct TempDir {
  std::filesystem::path path;
  TempDir() {
    std::string tmpl = (std::filesystem::temp_directory_path() / "nvfp4-jit-test-XXXXXX").string();
    path = ::mkdtemp(tmpl.data());
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::permissions(path, std::filesystem::perms::owner_all, std::filesystem::perm_options::add, ec);
    std::filesystem::remove_all(path, ec);
  }
  std::string str() const { return path.string(); }
};

struct ScopedEnv {
  std::string name, old;
  bool had;
  ScopedEnv(const char* n, const std::string& value) : name(n) {
    const char* o = std::getenv(n);
    had = o != nullptr;
    if (had) old = o;
    ::setenv(n, value.c_str(), 1);
  }
  ~ScopedEnv() {
    if (had) ::setenv(name.c_str(), old.c_str(), 1);
    else ::unsetenv(name.c_str());
  }
};

struct Run {
  int code = -1;
  std::string out, err;
};

// Runs a shell command; stdout and stderr are captured separately.
inline Run run(const std::string& command) {
  static std::mt19937_64 rng(std::random_device{}());
  const std::string err_path = (std::filesystem::temp_directory_path() / ("nvfp4-jit-err-" + std::to_string(rng()))).string();
  Run r;
  FILE* pipe = ::popen((command + " 2>" + err_path).c_str(), "r");
  char buf[4096];
  for (size_t n; (n = std::fread(buf, 1, sizeof buf, pipe)) > 0;) r.out.append(buf, n);
  const int status = ::pclose(pipe);
  r.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  if (FILE* f = std::fopen(err_path.c_str(), "r")) {
    for (size_t n; (n = std::fread(buf, 1, sizeof buf, f)) > 0;) r.err.append(buf, n);
    std::fclose(f);
  }
  std::remove(err_path.c_str());
  return r;
}

// The nvfp4-jit built with the tests; NVFP4_JIT_CLI in the environment names another (a build
// copied to a GPU machine).
inline std::string cli() {
  const char* moved = std::getenv("NVFP4_JIT_CLI");
  return moved && *moved ? moved : NVFP4_JIT_CLI;
}

// The integer value of "field": in a one-line JSON object.
inline long json_int(const std::string& json, const std::string& field) {
  const size_t pos = json.find("\"" + field + "\":");
  return pos == std::string::npos ? -1 : std::strtol(json.c_str() + pos + field.size() + 3, nullptr, 10);
}

}  // namespace testutil
