// The SASS checks of the Blackwell GEMM tests: finding nvdisasm, and what one kernel's
// disassembly shows (its block-scaled MMAs, local memory, registers, frame, static shared memory).
#pragma once
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include <doctest/doctest.h>
#include <fmt/format.h>
#include <unistd.h>

#include "core/kernel_store.hpp"
#include "ops/gemm/backend.hpp"

namespace nvfp4::jit::detail::test {

// nvdisasm: $NVFP4_JIT_NVDISASM, on PATH, in the CUDA toolkit, or from the pip package
// nvidia-cuda-nvdisasm; empty when none is found.
inline std::string find_nvdisasm() {
  auto runs = [](const std::string& path) { return !path.empty() && std::system((path + " --version >/dev/null 2>&1").c_str()) == 0; };
  std::vector<std::string> paths;
  if (const char* v = std::getenv("NVFP4_JIT_NVDISASM")) paths.push_back(v);
  paths.push_back("nvdisasm");
  paths.push_back("/usr/local/cuda/bin/nvdisasm");
  if (FILE* f = popen("python3 -c 'import nvidia; print(list(nvidia.__path__)[0])' 2>/dev/null", "r")) {
    char line[4096] = {};
    if (std::fgets(line, sizeof line, f)) {
      std::string dir(line);
      while (!dir.empty() && (dir.back() == '\n' || dir.back() == '\r')) dir.pop_back();
      for (const char* cu : {"/cu13/bin/nvdisasm", "/cu12/bin/nvdisasm", "/cuda_nvdisasm/bin/nvdisasm"}) paths.push_back(dir + cu);
    }
    pclose(f);
  }
  for (const std::string& p : paths)
    if (runs(p)) return p;
  return {};
}

// What the disassembly of one kernel shows (`matches`: its instructions containing the mnemonic
// asked for, the block-scaled MMA, say; `loop_local_accesses`: the local-memory accesses between
// the first and the last of them, the main loop's).
struct Sass {
  int matches = 0, local_accesses = 0, loop_local_accesses = 0, registers = -1, frame_bytes = -1, static_shared = -1;
};

// Parses nvdisasm's output: the kernel's code section (its instructions containing `mnemonic`), and its
// EIATTR_REGCOUNT / EIATTR_FRAME_SIZE attributes and static shared memory section.
inline Sass parse_sass(const std::string& text, const std::string& kernel, const std::string& mnemonic) {
  Sass s;
  std::istringstream in(text);
  std::string line, attribute, section;
  const std::regex word(R"(\.word\s+(0x[0-9a-fA-F]+))"), zero(R"(\.zero\s+(\d+))"), local(R"(\b(LDL|STL)\b)"),
      header(R"(^//-+ (\S+) +-+$)");
  bool ours = false;  // the attribute under way names this kernel
  int locals_since_match = 0;  // local accesses after the last match so far
  while (std::getline(in, line)) {
    std::smatch m;
    if (std::regex_search(line, m, header)) {  // "//----- .text.name -----"
      section = m[1];
      attribute.clear();
      continue;
    }
    if (section == ".text." + kernel) {
      if (std::regex_search(line, local)) ++s.local_accesses, ++locals_since_match;
      if (line.find(mnemonic) != std::string::npos) {
        if (s.matches++ > 0) s.loop_local_accesses += locals_since_match;
        locals_since_match = 0;
      }
      continue;
    }
    if (section == ".nv.shared." + kernel && std::regex_search(line, m, zero)) s.static_shared = std::stoi(m[1]);
    if (const size_t at = line.find("nvinfo : "); at != std::string::npos) {
      attribute = line.substr(at + 9);
      ours = false;
    } else if (line.find("index@(") != std::string::npos) {
      ours = line.find("index@(" + kernel + ")") != std::string::npos;
    } else if (ours && std::regex_search(line, m, word)) {
      const int v = int(std::stoul(m[1], nullptr, 16));
      if (attribute == "EIATTR_REGCOUNT") s.registers = v;
      if (attribute == "EIATTR_FRAME_SIZE") s.frame_bytes = v;
      ours = false;
    }
  }
  return s;
}


// nvdisasm's text of `cubin` (written to `path` first); empty when nvdisasm fails.
inline std::string disassemble(const std::string& nvdisasm, const std::string& cubin, const std::string& path) {
  std::ofstream(path, std::ios::binary).write(cubin.data(), std::streamsize(cubin.size()));
  std::string text;
  if (FILE* f = popen((nvdisasm + " " + path + " 2>&1").c_str(), "r")) {
    char buf[65536];
    for (size_t n; (n = std::fread(buf, 1, sizeof buf, f)) > 0;) text.append(buf, n);
    if (pclose(f) != 0) text.clear();
  }
  return text;
}

// Compiles and disassembles every kernel of `specs` (each for its arch) and calls
// check(spec, kernel name, disassembly) on it. Skipped, with a message, where no nvdisasm is
// found.
template <class Check>
void for_each_disassembled(const std::vector<KernelSpec>& specs, Check check) {
  const std::string nvdisasm = find_nvdisasm();
  if (nvdisasm.empty()) {
    MESSAGE("skipped: no nvdisasm (install it with: python3 -m pip install nvidia-cuda-nvdisasm, or set NVFP4_JIT_NVDISASM)");
    return;
  }
  const std::string cubin = fmt::format("/tmp/nvfp4-sass-{}.cubin", ::getpid());
  REQUIRE(!specs.empty());
  for (const KernelSpec& spec : specs) {
    const auto compiled = KernelStore::instance().get(spec);
    const std::string name = compiled->kernel.name;
    CAPTURE(name);
    const std::string text = disassemble(nvdisasm, std::string(compiled->cubin.data(), compiled->cubin.size()), cubin);
    REQUIRE(!text.empty());
    if (const char* dir = std::getenv("NVFP4_JIT_SASS_DUMP")) std::ofstream(fmt::format("{}/{}.sass", dir, name)) << text;
    check(spec, name, text);
  }
  std::remove(cubin.c_str());
}

// for_each_disassembled over GEMM specs.
template <class Check>
void for_each_disassembled(const std::vector<GemmSpec>& gemm_specs, Check check) {
  std::vector<KernelSpec> specs;
  for (const GemmSpec& spec : gemm_specs) specs.push_back(gemm_key(spec));
  for_each_disassembled(specs, [&](const KernelSpec& key, const std::string& name, const std::string& text) {
    check(gemm_spec_of(key), name, text);
  });
}

// Checks every GEMM kernel of `specs`: at least one instruction containing each of `required`
// (the block-scaled MMA, say), no local memory and no stack frame, registers within the SM's
// file, dynamic shared memory within `max_shared` and static shared memory the system's 1 KB
// at most.
inline void check_gemm_sass(const std::vector<GemmSpec>& gemm_specs, const std::vector<std::string>& required,
                            unsigned max_shared) {
  for_each_disassembled(gemm_specs, [&](const GemmSpec& spec, const std::string& name, const std::string& text) {
    const unsigned dynamic = gemm_backend(spec.arch, "test").shared_bytes(spec);
    const int threads = spec.tile.threads;
    std::string found;
    Sass s;
    for (const std::string& mnemonic : required) {
      s = parse_sass(text, name, mnemonic);
      found += fmt::format("{} x{}, ", mnemonic, s.matches);
      CHECK_MESSAGE(s.matches > 0, "no " << mnemonic);
    }
    MESSAGE(fmt::format("{} {}: {}{} registers x {} threads, {} B dynamic + {} B static shared, {} local accesses, {} B frame",
                        to_string(spec.arch), name, found, s.registers, threads, dynamic, s.static_shared, s.local_accesses,
                        s.frame_bytes));
    CHECK(s.local_accesses == 0);
    CHECK(s.frame_bytes == 0);
    CHECK((s.registers > 0 && s.registers <= 255 && s.registers * threads <= 65536));
    CHECK(dynamic <= max_shared);
    CHECK(s.static_shared <= 1024);  // the 1 KB every kernel reserves for the system, nothing of ours
  });
}

// Checks every kernel of `specs`: at least `at_least` instructions containing `mnemonic`, no
// local memory.
inline void check_kernel_sass(const std::vector<KernelSpec>& specs, const std::string& mnemonic, int at_least) {
  for_each_disassembled(specs, [&](const KernelSpec& spec, const std::string& name, const std::string& text) {
    CAPTURE(to_string(spec.arch));
    const Sass s = parse_sass(text, name, mnemonic);
    CHECK_MESSAGE(s.matches >= at_least, s.matches << " x " << mnemonic);
    CHECK(s.local_accesses == 0);
  });
}

}  // namespace nvfp4::jit::detail::test
