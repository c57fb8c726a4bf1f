#include "core/tuning_table.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <thread>

#include <fmt/format.h>

#include "core/disk_cache.hpp"
#include "core/driver.hpp"
#include "core/error.hpp"
#include "core/fs_util.hpp"
#include "core/kernel_store.hpp"
#include "core/nvrtc_compiler.hpp"
#include "core/op_registry.hpp"

namespace nvfp4::jit::detail {

namespace {

constexpr int kFormat = 1;

std::string entry_line(const TuningEntry& e) {
  const KernelSpec& p = e.problem;
  const TileConfig& t = e.tile;
  return fmt::format(
      R"({{"op":{},"arch":{},"n":{},"k":{},"groups":{},"a_dtype":{},"b_dtype":{},"out_dtype":{},"scale_layout":{},)"
      R"("gscale_mode":{},"flags":{},"m_bucket":{},"block_m":{},"block_n":{},"block_k":{},"threads":{},"stages":{},)"
      R"("cluster_m":{},"split_k":{},"vec":{},"us":{:.3f},"heuristic_us":{:.3f}}})",
      int(p.op), int(p.arch), p.n, p.k, p.groups, p.a_dtype, p.b_dtype, p.out_dtype, p.scale_layout, p.gscale_mode,
      p.flags, e.m_bucket, t.block_m, t.block_n, t.block_k, t.threads, t.stages, t.cluster_m, t.split_k, t.vec, e.us,
      e.heuristic_us);
}

// One entry line back; false when a field is missing or malformed.
bool parse_entry(const std::string& line, TuningEntry* e) {
  bool ok = true;
  auto num = [&](const char* name) -> long long {
    const std::string v = sidecar_field(line, name);
    char* end = nullptr;
    const long long x = v.empty() ? 0 : std::strtoll(v.c_str(), &end, 10);
    if (v.empty() || *end) ok = false;
    return x;
  };
  auto real = [&](const char* name) {
    const std::string v = sidecar_field(line, name);
    char* end = nullptr;
    const double x = v.empty() ? 0 : std::strtod(v.c_str(), &end);
    if (v.empty() || *end) ok = false;
    return x;
  };
  KernelSpec& p = e->problem;
  p = KernelSpec{};
  p.op = Op(num("op"));
  p.arch = Arch(num("arch"));
  p.n = num("n");
  p.k = num("k");
  p.groups = int32_t(num("groups"));
  p.a_dtype = uint8_t(num("a_dtype"));
  p.b_dtype = uint8_t(num("b_dtype"));
  p.out_dtype = uint8_t(num("out_dtype"));
  p.scale_layout = uint8_t(num("scale_layout"));
  p.gscale_mode = uint8_t(num("gscale_mode"));
  p.flags = uint8_t(num("flags"));
  e->m_bucket = int(num("m_bucket"));
  TileConfig& t = e->tile;
  t.block_m = uint16_t(num("block_m"));
  t.block_n = uint16_t(num("block_n"));
  t.block_k = uint16_t(num("block_k"));
  t.threads = uint16_t(num("threads"));
  t.stages = uint8_t(num("stages"));
  t.cluster_m = uint8_t(num("cluster_m"));
  t.split_k = uint8_t(num("split_k"));
  t.vec = uint8_t(num("vec"));
  e->us = real("us");
  e->heuristic_us = real("heuristic_us");
  return ok && int(p.arch) < int(std::size(kAllArchs));
}

// Holds an flock on `<path>.lock` while alive, as DiskCache::Lock does: waits a bounded time
// (a stopped holder costs a lost merge, not a hang), checks the file it locked is still the
// one at the path, and unlinks it before releasing it. Nothing when it cannot be had.
class FileLock {
 public:
  explicit FileLock(const std::string& path) : path_(path + ".lock") {
    const auto deadline = std::chrono::steady_clock::now() + kDefaultLockWait;
    while (std::chrono::steady_clock::now() < deadline) {
      fd_ = ::open(path_.c_str(), O_RDONLY | O_CREAT | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK, 0600);
      struct stat st{}, at{};
      if (fd_ < 0 || ::fstat(fd_, &st) != 0 || !S_ISREG(st.st_mode)) break;
      if (::flock(fd_, LOCK_EX | LOCK_NB) == 0) {
        if (::lstat(path_.c_str(), &at) == 0 && at.st_ino == st.st_ino && at.st_dev == st.st_dev) return;
      } else if (errno == EWOULDBLOCK) {
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
      }
      ::close(fd_);
      fd_ = -1;
    }
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
    warn_once("tuning-lock " + path_, fmt::format("cannot lock {}; writing the tuning table without the lock", path_));
  }
  ~FileLock() {
    if (fd_ < 0) return;
    ::unlink(path_.c_str());
    ::close(fd_);
  }
  FileLock(const FileLock&) = delete;
  FileLock& operator=(const FileLock&) = delete;

 private:
  std::string path_;
  int fd_ = -1;
};

}  // namespace

TuningVersions TuningVersions::current() {
  TuningVersions v{NVFP4_JIT_VERSION, nvrtc_version(), 0};
  if (driver_available()) detail::driver().cuDriverGetVersion(&v.driver);
  return v;
}

std::string TuningTable::file_name(Arch arch, const std::string& device_name, int sm_count) {
  std::string name = device_name;
  for (char& c : name)
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '.' && c != '-') c = '_';
  return fmt::format("{}-{}-{}.json", to_string(arch), name, sm_count);
}

std::string TuningTable::to_text(const std::vector<TuningEntry>& entries, Arch arch, const std::string& device_name,
                                 int sm_count, const TuningVersions& v) {
  std::string text = fmt::format(
      R"({{"format":{},"library":"{}","nvrtc":"{}","driver":{},"arch":"{}","device":"{}","sm_count":{},"updated":"{}","entries":[)",
      kFormat, v.library, v.nvrtc, v.driver, to_string(arch), device_name, sm_count, utc_timestamp());
  for (size_t i = 0; i < entries.size(); ++i) text += fmt::format("\n{}{}", entry_line(entries[i]), i + 1 < entries.size() ? "," : "");
  return text + "\n]}\n";
}

std::vector<TuningEntry> TuningTable::parse(const std::string& text, const TuningVersions& v, std::string* note) {
  std::vector<TuningEntry> entries;
  const size_t header_end = text.find('\n');
  const std::string header = text.substr(0, header_end);
  if (sidecar_field(header, "format") != std::to_string(kFormat)) {
    *note = "not a tuning table of format " + std::to_string(kFormat);
    return entries;
  }
  const TuningVersions file{sidecar_field(header, "library"), sidecar_field(header, "nvrtc"),
                            std::atoi(sidecar_field(header, "driver").c_str())};
  if (!(file == v)) {
    *note = fmt::format("tuned with library {}, NVRTC {}, driver {} (this is {}, {}, {}): ignored; run `nvfp4-jit tune` again",
                        file.library, file.nvrtc, file.driver, v.library, v.nvrtc, v.driver);
    return entries;
  }
  size_t bad = 0;
  for (size_t pos = header_end; pos != std::string::npos && pos < text.size();) {
    const size_t end = text.find('\n', pos + 1);
    const std::string line = text.substr(pos + 1, end == std::string::npos ? std::string::npos : end - pos - 1);
    pos = end;
    if (line.empty() || line[0] != '{') continue;
    TuningEntry e;
    if (parse_entry(line, &e)) entries.push_back(e);
    else ++bad;
  }
  if (bad) *note = fmt::format("{} entries that do not parse were skipped", bad);
  return entries;
}

TuningTable::TuningTable(std::string path, Arch arch, std::string device_name, int sm_count, TuningVersions versions)
    : path_(std::move(path)), device_name_(std::move(device_name)), arch_(arch), sm_count_(sm_count),
      versions_(std::move(versions)) {
  if (path_.empty()) return;
  std::string why;
  if (auto data = read_file_nofollow(path_, kMaxTableBytes, &why)) {
    std::string note;
    merge(runnable(parse(std::string(data->begin(), data->end()), versions_, &note), &note));
    if (!note.empty()) notes_.push_back(path_ + ": " + note);
  } else if (!why.empty()) {
    notes_.push_back("tuning table not read: " + why);
  }
}

// An entry this build's rules refuse (tuned by an earlier build of this version, whose rules
// gave a tile more stages than its CTAs an SM now leave room for, say) would fail in codegen
// on the first call that finds it: it is left out, and the call runs the heuristic's tile.
std::vector<TuningEntry> TuningTable::runnable(std::vector<TuningEntry> entries, std::string* note) const {
  std::string first_why;
  const size_t before = entries.size();
  std::erase_if(entries, [&](const TuningEntry& e) {
    std::string why = tuning_entry_problem(e, arch_);
    if (!why.empty() && first_why.empty()) first_why = fmt::format("N = {}, K = {}, bucket {}: {}", e.problem.n, e.problem.k, e.m_bucket, why);
    return !why.empty();
  });
  if (const size_t refused = before - entries.size())
    *note += fmt::format("{}{} entries this build cannot run were skipped (the first: {})", note->empty() ? "" : "; ", refused, first_why);
  return entries;
}

void TuningTable::merge(const std::vector<TuningEntry>& entries) {
  std::unique_lock lock(mutex_);
  for (const TuningEntry& e : entries) table_[Key{e.problem, e.m_bucket}] = e;
}

std::optional<TileConfig> TuningTable::find(const KernelSpec& problem, int m_bucket) const {
  std::shared_lock lock(mutex_);
  const auto it = table_.find(Key{problem, m_bucket});
  if (it == table_.end()) return std::nullopt;
  return it->second.tile;
}

std::vector<TuningEntry> TuningTable::entries() const {
  std::shared_lock lock(mutex_);
  std::vector<TuningEntry> out;
  for (const auto& [key, e] : table_) out.push_back(e);
  return out;
}

std::vector<std::string> TuningTable::notes() const {
  std::shared_lock lock(mutex_);
  return notes_;
}

std::string TuningTable::record(const std::vector<TuningEntry>& entries) {
  merge(entries);
  if (path_.empty()) return "no writable cache root";
  const std::string dir = path_.substr(0, path_.rfind('/'));
  if (std::string why = make_private_dir(dir); !why.empty()) return why;
  FileLock lock(path_);
  // what other processes recorded since we loaded, then ours on top
  std::unordered_map<Key, TuningEntry, KeyHash> merged;
  if (auto data = read_file_nofollow(path_, kMaxTableBytes)) {
    std::string note;
    for (const TuningEntry& e : runnable(parse(std::string(data->begin(), data->end()), versions_, &note), &note))
      merged[Key{e.problem, e.m_bucket}] = e;
  }
  for (const TuningEntry& e : entries) merged[Key{e.problem, e.m_bucket}] = e;
  std::vector<TuningEntry> all;
  for (const auto& [key, e] : merged) all.push_back(e);
  merge(all);
  const std::string text = to_text(all, arch_, device_name_, sm_count_, versions_);
  if (int err = write_file_atomic(path_, std::span<const char>(text.data(), text.size())))
    return fmt::format("cannot write {}: {}", path_, std::strerror(err));
  return {};
}

std::string tuning_entry_problem(const TuningEntry& e, Arch arch) {
  const KernelSpec& p = e.problem;
  const TileConfig& t = e.tile;
  if (p.op != Op::gemm) return fmt::format("op {} is not a GEMM", int(p.op));
  if (p.arch != arch) return fmt::format("arch {} in a table for {}", int(p.arch), to_string(arch));
  if (p.n <= 0 || p.k <= 0 || p.k % 16) return fmt::format("N = {}, K = {}: not a GEMM shape", p.n, p.k);
  if (!(e.us >= 0 && e.us < 1e9 && e.heuristic_us >= 0 && e.heuristic_us < 1e9)) return "time out of range";
  // the bucket and the tile, checked by the op (the GEMM: its arch's backend)
  const auto check = op_kernels(p.op).tuned_tile_problem;
  return check ? check(p, e.m_bucket, t) : "an op without tuned tiles";
}

TuningTable& tuning_table_for(int device_ordinal, Arch arch, const std::string& device_name, int sm_count) {
  static std::mutex mutex;
  static std::map<int, std::unique_ptr<TuningTable>> tables;
  std::lock_guard lock(mutex);
  auto& table = tables[device_ordinal];
  if (!table) {
    const DiskCache& disk = KernelStore::instance().disk();
    const CacheRoots& roots = disk.roots();
    // a root the cache refused as untrusted is not read for tables either
    auto refused = [&](const std::string& root) {
      for (const auto& [path, why] : disk.refused_roots())
        if (path == root) return true;
      return false;
    };
    const std::string name = "/v1/tuning/" + TuningTable::file_name(arch, device_name, sm_count);
    table = std::make_unique<TuningTable>(roots.primary.empty() || refused(roots.primary) ? std::string{} : roots.primary + name,
                                          arch, device_name, sm_count);
    // read-only roots (a shipped, prewarmed cache) fill in what the primary root lacks
    for (const std::string& root : roots.read_only) {
      if (refused(root)) continue;
      TuningTable shipped(root + name, arch, device_name, sm_count);
      for (const TuningEntry& e : shipped.entries())
        if (!table->find(e.problem, e.m_bucket)) table->merge({e});
      for (const std::string& note : shipped.notes()) warn_once("tuning " + root, note);
    }
    for (const std::string& note : table->notes()) warn_once("tuning " + table->path(), note);
  }
  return *table;
}

}  // namespace nvfp4::jit::detail
