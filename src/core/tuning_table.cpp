#include "core/tuning_table.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <cmath>
#include <cstring>
#include <map>
#include <memory>
#include <thread>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "core/disk_cache.hpp"
#include "core/driver.hpp"
#include "core/error.hpp"
#include "core/fs_util.hpp"
#include "core/json_fields.hpp"
#include "core/kernel_store.hpp"
#include "core/nvrtc_compiler.hpp"
#include "core/op_registry.hpp"

namespace nvfp4::jit::detail {

namespace {

using nlohmann::json;

// 2: entries hold the tuned spec as its op writes it ("spec"); format 1 held the GEMM's fields
// in a record every op shared, which a table of format 2 is not read as.
constexpr int kFormat = 2;

std::string entry_line(const TuningEntry& e) {
  nlohmann::ordered_json line{{"spec", nlohmann::ordered_json::parse(e.tuned.to_json())}, {"m_bucket", e.m_bucket}};
  line["us"] = std::round(e.us * 1000) / 1000;
  line["heuristic_us"] = std::round(e.heuristic_us * 1000) / 1000;
  return line.dump();
}

// One entry line back (the line's trailing comma dropped), or why it is refused.
std::string parse_entry(std::string line, Arch table_arch, TuningEntry* e) {
  if (!line.empty() && line.back() == ',') line.pop_back();
  std::string duplicate;
  const json object = parse_json_once(line, &duplicate);
  if (object.is_discarded() || !object.is_object()) return "not a JSON object";
  if (!duplicate.empty()) return fmt::format("{} is given twice", duplicate);
  FieldReader r(object);
  e->m_bucket = int(r.integer("m_bucket", 1, INT32_MAX));
  e->us = r.real("us", 0, 1e9);
  e->heuristic_us = r.real("heuristic_us", 0, 1e9);
  if (!r.why().empty()) return r.why();
  if (!object.contains("spec") || !object["spec"].is_object()) return "spec is missing";
  const json& spec = object["spec"];
  FieldReader s(spec);
  const std::string op_name = s.text("op"), arch_name = s.text("arch");
  if (!s.why().empty()) return "spec." + s.why();
  const std::optional<Op> op = parse_op(op_name);
  if (!op) return fmt::format("spec.op = \"{}\" is not an op", op_name);
  const std::optional<Arch> arch = parse_arch(arch_name);
  if (!arch) return fmt::format("spec.arch = \"{}\" is not an arch", arch_name);
  if (*arch != table_arch) return fmt::format("spec.arch = {} in a table for {}", arch_name, to_string(table_arch));
  const auto from_json = op_kernels(*op).from_json;
  if (!from_json) return fmt::format("op {} has no tuned kernels", op_name);
  if (std::string why = from_json(spec, *arch, &e->tuned); !why.empty()) return "spec." + why;
  e->tuned.op = *op;
  return {};
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

std::optional<TuningFile> TuningTable::parse_file(const std::string& text, const TuningVersions& v, std::string* note,
                                                  std::optional<Arch> file_arch) {
  // The header is the first line, up to the entries' "[": closed, it is a JSON object of its own;
  // each entry is a line of its own, so a damaged one costs that entry only.
  const size_t header_end = text.find('\n');
  std::string duplicate;
  const json header = parse_json_once(text.substr(0, header_end) + "]}", &duplicate);
  if (header.is_discarded() || !header.is_object() || !header.contains("format") || header["format"] != kFormat) {
    *note = "not a tuning table of format " + std::to_string(kFormat);
    return std::nullopt;
  }
  if (!duplicate.empty()) {
    *note = fmt::format("header: {} is given twice", duplicate);
    return std::nullopt;
  }
  FieldReader r(header);
  const TuningVersions file{r.text("library"), r.text("nvrtc"), int(r.integer("driver", 0, INT32_MAX))};
  TuningFile table;
  const std::string arch_name = r.text("arch");
  table.device_name = r.text("device");
  table.sm_count = int(r.integer("sm_count", 1, kMaxSmCount));
  if (!r.why().empty()) {
    *note = "header: " + r.why();
    return std::nullopt;
  }
  if (!(file == v)) {
    *note = fmt::format("tuned with library {}, NVRTC {}, driver {} (this is {}, {}, {}): ignored; run `nvfp4-jit tune` again",
                        file.library, file.nvrtc, file.driver, v.library, v.nvrtc, v.driver);
    return std::nullopt;
  }
  const std::optional<Arch> arch = parse_arch(arch_name);
  if (!arch) {
    *note = fmt::format("header: arch = \"{}\" is not an arch", arch_name);
    return std::nullopt;
  }
  if (file_arch && *arch != *file_arch) {
    *note = fmt::format("header: arch = \"{}\" in a table for {}", arch_name, to_string(*file_arch));
    return std::nullopt;
  }
  table.arch = *arch;
  size_t index = 0;
  for (size_t pos = header_end; pos != std::string::npos && pos < text.size();) {
    const size_t end = text.find('\n', pos + 1);
    const std::string line = text.substr(pos + 1, end == std::string::npos ? std::string::npos : end - pos - 1);
    pos = end;
    if (line.empty() || line[0] != '{') continue;
    TuningEntry e;
    if (std::string why = parse_entry(line, table.arch, &e); why.empty()) table.entries.push_back(e);
    else table.refused.push_back(fmt::format("entries[{}]: {}", index, why));
    ++index;
  }
  if (!table.refused.empty())
    *note = fmt::format("{} entries that do not parse were skipped (the first: {})", table.refused.size(), table.refused[0]);
  return table;
}

std::vector<TuningEntry> TuningTable::parse(const std::string& text, const TuningVersions& v, std::string* note,
                                            std::optional<Arch> file_arch) {
  std::optional<TuningFile> table = parse_file(text, v, note, file_arch);
  return table ? std::move(table->entries) : std::vector<TuningEntry>{};
}

namespace {
// A table in a cache root (<root>/v2/tuning/<file>) is read as the root's entries are: nothing
// below the root that another user owns or can write.
std::optional<std::vector<char>> read_table(const std::string& path, std::string* why = nullptr) {
  const std::string kDir = "/" + std::string(kCacheLayout) + "/tuning/";
  const size_t at = path.rfind(kDir);
  if (at == std::string::npos) return read_file_nofollow(path, kMaxTableBytes, why);
  return read_file_below(path.substr(0, at), path.substr(at + 1), kMaxTableBytes, why);
}
}  // namespace

TuningTable::TuningTable(std::string path, Arch arch, std::string device_name, int sm_count, TuningVersions versions)
    : path_(std::move(path)), device_name_(std::move(device_name)), arch_(arch), sm_count_(sm_count),
      versions_(std::move(versions)) {
  if (path_.empty()) return;
  std::string why;
  if (auto data = read_table(path_, &why)) {
    std::string note;
    merge(runnable(parse(std::string(data->begin(), data->end()), versions_, &note, arch_), &note));
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
    if (!why.empty() && first_why.empty()) first_why = fmt::format("{}, bucket {}: {}", e.tuned.describe(), e.m_bucket, why);
    return !why.empty();
  });
  if (const size_t refused = before - entries.size())
    *note += fmt::format("{}{} entries this build cannot run were skipped (the first: {})", note->empty() ? "" : "; ", refused, first_why);
  return entries;
}

void TuningTable::merge(const std::vector<TuningEntry>& entries) {
  std::unique_lock lock(mutex_);
  for (const TuningEntry& e : entries) table_[Key{e.problem(), e.m_bucket}] = e;
}

std::optional<KernelSpec> TuningTable::find(const KernelSpec& problem, int m_bucket) const {
  std::shared_lock lock(mutex_);
  const auto it = table_.find(Key{problem, m_bucket});
  if (it == table_.end()) return std::nullopt;
  return it->second.tuned;
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
  if (auto data = read_table(path_)) {
    std::string note;
    for (const TuningEntry& e : runnable(parse(std::string(data->begin(), data->end()), versions_, &note, arch_), &note))
      merged[Key{e.problem(), e.m_bucket}] = e;
  }
  for (const TuningEntry& e : entries) merged[Key{e.problem(), e.m_bucket}] = e;
  std::vector<TuningEntry> all;
  for (const auto& [key, e] : merged) all.push_back(e);
  merge(all);
  const std::string text = to_text(all, arch_, device_name_, sm_count_, versions_);
  if (int err = write_file_atomic(path_, std::span<const char>(text.data(), text.size())))
    return fmt::format("cannot write {}: {}", path_, std::strerror(err));
  return {};
}

KernelSpec TuningEntry::problem() const {
  const auto problem_of = op_kernels(tuned.op).tuned_problem;
  if (!problem_of) fail(Status::internal, "op {} has no tuned kernels", to_string(tuned.op));
  return problem_of(tuned);
}

std::string tuning_entry_problem(const TuningEntry& e, Arch arch) {
  const KernelSpec& t = e.tuned;
  if (t.arch != arch) return fmt::format("arch {} in a table for {}", to_string(t.arch), to_string(arch));
  if (!(e.us >= 0 && e.us < 1e9 && e.heuristic_us >= 0 && e.heuristic_us < 1e9)) return "time out of range";
  // the bucket and the tile, checked by the op (the GEMM: its arch's backend)
  const auto check = op_kernels(t.op).tuned_problem_why;
  if (!check || !op_kernels(t.op).tuned_problem) return fmt::format("op {} has no tuned kernels", to_string(t.op));
  return check(t, e.m_bucket);
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
    const std::string name = "/" + std::string(kCacheLayout) + "/tuning/" + TuningTable::file_name(arch, device_name, sm_count);
    table = std::make_unique<TuningTable>(roots.primary.empty() || refused(roots.primary) ? std::string{} : roots.primary + name,
                                          arch, device_name, sm_count);
    // read-only roots (a shipped, prewarmed cache) fill in what the primary root lacks
    for (const std::string& root : roots.read_only) {
      if (refused(root)) continue;
      TuningTable shipped(root + name, arch, device_name, sm_count);
      for (const TuningEntry& e : shipped.entries())
        if (!table->find(e.problem(), e.m_bucket)) table->merge({e});
      for (const std::string& note : shipped.notes()) warn_once("tuning " + root, note);
    }
    for (const std::string& note : table->notes()) warn_once("tuning " + table->path(), note);
  }
  return *table;
}

}  // namespace nvfp4::jit::detail
