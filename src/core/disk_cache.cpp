#include "core/disk_cache.hpp"

#include <elf.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <algorithm>
#include <cmath>
#include <thread>

#define XXH_INLINE_ALL
#include <xxhash.h>

#include "core/error.hpp"
#include "core/fs_util.hpp"
#include "core/nvrtc_compiler.hpp"

namespace nvfp4::jit::detail {


namespace {

constexpr std::string_view kLayout = kCacheLayout;
constexpr int kStoreAttempts = 5;  // a cleaner removing our directory or temp file mid-store

std::string env(const char* name) {
  const char* value = std::getenv(name);
  return value ? value : "";
}

std::string checksum_hex(std::span<const char> data) {
  return fmt::format("{:016x}", XXH3_64bits(data.data(), data.size()));
}

bool ends_with(std::string_view s, std::string_view tail) {
  return s.size() >= tail.size() && s.substr(s.size() - tail.size()) == tail;
}

// Nanoseconds since the epoch, wide enough that no age overflows it.
__int128 mtime_ns(const struct stat& st) { return __int128(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec; }
__int128 now_ns() {
  timespec ts{};
  ::clock_gettime(CLOCK_REALTIME, &ts);
  return __int128(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}

bool older_than_grace(const struct stat& st) {
  return now_ns() - mtime_ns(st) >= __int128(kInFlightGrace.count()) * 1000000000;
}

// A CUBIN without its sidecar: a store in progress while young, a leftover once old (a store
// killed or failed between its two files).
enum class Torn { no, young, aged };
Torn torn_state(int dir_fd, const std::string& key_hex) {
  struct stat cubin{}, sidecar{};
  if (::fstatat(dir_fd, (key_hex + ".cubin").c_str(), &cubin, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISREG(cubin.st_mode))
    return Torn::no;
  if (::fstatat(dir_fd, (key_hex + ".json").c_str(), &sidecar, AT_SYMLINK_NOFOLLOW) == 0 || errno != ENOENT)
    return Torn::no;
  return older_than_grace(cubin) ? Torn::aged : Torn::young;
}

size_t slashes(std::string_view s) { return size_t(std::count(s.begin(), s.end(), '/')); }

// The arch of an entry directory "v2/<arch>/<kk>" ("" above that level).
std::string rel_arch(const std::string& rel) {
  const size_t first = rel.find('/');
  if (first == std::string::npos) return {};
  return rel.substr(first + 1, rel.find('/', first + 1) - first - 1);
}

// Locks `name` in `dir_fd` without waiting: the fd when we hold it, -1 when another process
// does (or the file cannot be a lock). `create`: make the file when absent.
int try_flock(int dir_fd, const std::string& name, bool create, bool* held_by_other) {
  *held_by_other = false;
  for (int attempt = 0; attempt < 8; ++attempt) {
    const int fd = ::openat(dir_fd, name.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC | (create ? O_CREAT : 0), 0600);
    if (fd < 0) return -1;
    struct stat st{}, at{};
    if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
      ::close(fd);
      return -1;
    }
    if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
      *held_by_other = errno == EWOULDBLOCK;
      ::close(fd);
      return -1;
    }
    // The holder before us may have unlinked the file: then our lock guards nothing.
    if (::fstatat(dir_fd, name.c_str(), &at, AT_SYMLINK_NOFOLLOW) == 0 && at.st_ino == st.st_ino && at.st_dev == st.st_dev)
      return fd;
    ::close(fd);
    if (!create) return -1;
  }
  return -1;
}

// The SM of a CUDA ELF's header flags: CUDA ELF ABI 8 and later keep it in bits 8-15, older
// ones in bits 0-7.
int elf_sm(const Elf64_Ehdr& h) {
  return h.e_ident[EI_ABIVERSION] >= 8 ? int((h.e_flags >> 8) & 0xff) : int(h.e_flags & 0xff);
}

// Whether one of the CUBIN's string tables holds `name` exactly.
bool elf_has_name(std::span<const char> elf, const Elf64_Ehdr& h, std::string_view name) {
  if (h.e_shentsize != sizeof(Elf64_Shdr) || h.e_shoff > elf.size() ||
      uint64_t(h.e_shnum) * sizeof(Elf64_Shdr) > elf.size() - h.e_shoff)
    return false;
  for (unsigned i = 0; i < h.e_shnum; ++i) {
    Elf64_Shdr s;
    std::memcpy(&s, elf.data() + h.e_shoff + i * sizeof(Elf64_Shdr), sizeof s);
    if (s.sh_type != SHT_STRTAB || s.sh_offset > elf.size() || s.sh_size > elf.size() - s.sh_offset) continue;
    const std::string_view table(elf.data() + s.sh_offset, s.sh_size);
    for (size_t pos = table.find(name); pos != std::string_view::npos; pos = table.find(name, pos + 1)) {
      const bool starts = pos == 0 || table[pos - 1] == '\0';
      const bool ends = pos + name.size() < table.size() && table[pos + name.size()] == '\0';
      if (starts && ends) return true;
    }
  }
  return false;
}

}  // namespace

std::string sidecar_field(const std::string& json, std::string_view name) {
  const std::string needle = fmt::format("\"{}\":", name);
  size_t pos = json.find(needle);
  if (pos == std::string::npos) return {};
  pos += needle.size();
  if (pos < json.size() && json[pos] == '"') {
    const size_t end = json.find('"', pos + 1);
    return end == std::string::npos ? std::string{} : json.substr(pos + 1, end - pos - 1);
  }
  const size_t end = json.find_first_of(",}", pos);
  return json.substr(pos, end == std::string::npos ? std::string::npos : end - pos);
}

CacheRoots CacheRoots::from_env() {
  CacheRoots roots;
  if (std::string dir = env("NVFP4_JIT_CACHE_DIR"); !dir.empty()) {
    roots.primary = dir;
  } else if (std::string xdg = env("XDG_CACHE_HOME"); !xdg.empty()) {
    roots.primary = xdg + "/nvfp4-jit";
  } else if (std::string home = env("HOME"); !home.empty()) {
    roots.primary = home + "/.cache/nvfp4-jit";
  }
  const std::string path = env("NVFP4_JIT_CACHE_PATH");
  for (size_t start = 0; start <= path.size();) {
    const size_t end = std::min(path.find(':', start), path.size());
    if (end > start) roots.read_only.push_back(path.substr(start, end - start));
    start = end + 1;
  }
  return roots;
}

std::string cubin_problem(std::span<const char> cubin, std::string_view arch, std::string_view kernel) {
  Elf64_Ehdr h;
  if (cubin.size() < sizeof h || std::memcmp(cubin.data(), ELFMAG, SELFMAG) != 0) return "not an ELF file";
  std::memcpy(&h, cubin.data(), sizeof h);
  if (h.e_ident[EI_CLASS] != ELFCLASS64 || h.e_ident[EI_DATA] != ELFDATA2LSB) return "not a 64-bit little-endian ELF file";
  if (h.e_machine != EM_CUDA) return fmt::format("ELF machine {} is not CUDA ({})", h.e_machine, EM_CUDA);
  const std::string sm = fmt::format("sm_{}", elf_sm(h));
  if (arch.substr(0, sm.size()) != sm || arch.size() > sm.size() + 1)
    return fmt::format("the CUBIN's ELF header is for {}, not {}", sm, arch);
  if (!kernel.empty() && !elf_has_name(cubin, h, kernel)) return fmt::format("the CUBIN does not contain kernel {}", kernel);
  return {};
}

std::string verify_entry(const std::vector<char>& cubin, const std::string& sidecar, const std::string& key_hex,
                         std::string_view arch, std::string_view kernel) {
  if (sidecar_field(sidecar, "key") != key_hex) return "sidecar names another key";
  if (sidecar_field(sidecar, "arch") != arch) return fmt::format("sidecar is for {}, not {}", sidecar_field(sidecar, "arch"), arch);
  if (sidecar_field(sidecar, "size") != std::to_string(cubin.size()))
    return fmt::format("size {} does not match the sidecar's {}", cubin.size(), sidecar_field(sidecar, "size"));
  if (sidecar_field(sidecar, "checksum") != checksum_hex(cubin)) return "checksum mismatch";
  const std::string named = sidecar_field(sidecar, "kernel");
  if (!kernel.empty() && !named.empty() && named != kernel)
    return fmt::format("sidecar names kernel {}, not {}", named, kernel);
  return cubin_problem(cubin, arch, kernel.empty() ? std::string_view(named) : kernel);
}

std::chrono::milliseconds parse_lock_wait(const std::string& text, std::string* warning) {
  if (warning) warning->clear();
  char* end = nullptr;
  const double seconds = text.empty() || std::isspace(static_cast<unsigned char>(text[0]))
                             ? std::nan("")
                             : std::strtod(text.c_str(), &end);
  auto warn = [&](std::chrono::milliseconds used, std::string_view why) {
    if (warning)
      *warning = fmt::format("NVFP4_JIT_LOCK_WAIT_S={} is {}; waiting {} s for another process's lock", text, why,
                             used.count() / 1000.0);
    return used;
  };
  if (std::isnan(seconds) || *end != '\0' || seconds < 0)
    return warn(kDefaultLockWait, fmt::format("not a number of seconds from 0 to {}", kMaxLockWait.count()));
  if (seconds > double(kMaxLockWait.count())) return warn(kMaxLockWait, fmt::format("over the maximum of {} s", kMaxLockWait.count()));
  return std::chrono::milliseconds(std::llround(seconds * 1000));
}

DiskCache::DiskCache(CacheRoots roots) : roots_(std::move(roots)) {
  if (const char* wait = std::getenv("NVFP4_JIT_LOCK_WAIT_S"); wait && *wait) {
    std::string warning;
    lock_wait_ = parse_lock_wait(wait, &warning);
    if (!warning.empty()) warn_once("lock-wait-env", warning);
  }
  open_primary();
  open_read_only();  // after the primary: a read-only root that is the primary is not used twice
}

void DiskCache::open_primary() {
  if (roots_.primary.empty()) {
    not_writable_ = "no cache directory";
    warn_once("cache-root", "no cache directory (set NVFP4_JIT_CACHE_DIR or HOME); kernels are kept in memory only");
    return;
  }
  struct stat st{};
  if (!roots_.create_primary && ::lstat(roots_.primary.c_str(), &st) != 0 && errno == ENOENT) {
    primary_absent_ = true;
    not_writable_ = "it does not exist yet";
    return;
  }
  if (const std::string why = make_private_dir(roots_.primary); !why.empty()) {
    if (::stat(roots_.primary.c_str(), &st) == 0) {
      // root's (a shared, prewarmed directory) can still be read; anyone else's cannot
      if (untrusted_reason(roots_.primary, false).empty())
        primary_fd_ = ::open(roots_.primary.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
      else
        refused_.emplace_back(roots_.primary, why);
    }
    degrade(why);
    return;
  }
  primary_fd_ = ::open(roots_.primary.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (primary_fd_ < 0) {
    degrade(fmt::format("open: {}", std::strerror(errno)));
    return;
  }
  // Ours but not writable (mode 0500, a read-only mount): readable, and said up front.
  if (::faccessat(primary_fd_, ".", W_OK | X_OK, AT_EACCESS) != 0) {
    degrade(fmt::format("read-only: {}", std::strerror(errno)));
    return;
  }
  writable_ = true;
}

void DiskCache::open_read_only() {
  // Told apart by device and inode: the same directory by two spellings, or the primary root
  // again, is read once.
  std::vector<std::pair<dev_t, ino_t>> seen;
  struct stat st{};
  if (primary_fd_ >= 0 && ::fstat(primary_fd_, &st) == 0) seen.emplace_back(st.st_dev, st.st_ino);
  size_t considered = 0;
  for (const std::string& root : roots_.read_only) {
    if (::stat(root.c_str(), &st) != 0 && errno == ENOENT) continue;  // nothing to read
    const std::pair<dev_t, ino_t> id{st.st_dev, st.st_ino};
    if (std::find(seen.begin(), seen.end(), id) != seen.end()) continue;
    if (considered++ == kMaxReadOnlyRoots) {
      warn_once("cache-path-limit", fmt::format("NVFP4_JIT_CACHE_PATH names more than {} distinct roots: {} and those "
                                                "after it are not used",
                                                kMaxReadOnlyRoots, root));
      break;
    }
    seen.push_back(id);
    std::string why = untrusted_reason(root, false);
    const int fd = why.empty() ? ::open(root.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC) : -1;
    if (fd < 0) {
      if (why.empty()) why = std::strerror(errno);
      warn_once("cache-root-" + root, fmt::format("read-only cache directory {} is not used: {}", root, why));
      refused_.emplace_back(root, why);
      continue;
    }
    read_only_.push_back({root, fd});
  }
}

std::vector<std::string> DiskCache::read_only_in_use() const {
  std::vector<std::string> out;
  for (const Root& r : read_only_) out.push_back(r.path);
  return out;
}

DiskCache::~DiskCache() {
  if (primary_fd_ >= 0) ::close(primary_fd_);
  for (const Root& r : read_only_) ::close(r.fd);
}

void DiskCache::degrade(const std::string& why) {
  {
    std::lock_guard lock(problem_mutex_);
    if (not_writable_.empty()) not_writable_ = why;
  }
  writable_ = false;
  warn_once("cache-write", fmt::format("cache directory {} cannot be used ({}); compiled kernels are kept in memory "
                                       "only for this process",
                                       roots_.primary, why));
}

bool DiskCache::root_failure(int err) const {
  switch (err) {
    case EROFS:
    case ENOSPC:
    case EDQUOT:
    case EIO:
    case ENAMETOOLONG:
      return true;
    case EACCES:
    case EPERM:  // the root no longer writable, or only this key's directory
      return ::faccessat(primary_fd_, ".", W_OK | X_OK, AT_EACCESS) != 0;
    default:
      return false;  // EISDIR, ENOTDIR, ELOOP, ENOTEMPTY, ...: something in this key's way
  }
}

std::string DiskCache::not_writable_reason() const {
  std::lock_guard lock(problem_mutex_);
  return writable_ ? std::string{} : not_writable_;
}

void DiskCache::count_not_stored(const std::string& why) {
  ++not_stored_;
  std::lock_guard lock(problem_mutex_);
  last_store_problem_ = why;
}

std::string DiskCache::last_store_problem() const {
  std::lock_guard lock(problem_mutex_);
  return last_store_problem_;
}

std::vector<DiskCache::Root> DiskCache::readable_roots() const {
  std::vector<Root> roots;
  if (primary_fd_ >= 0) roots.push_back({roots_.primary, primary_fd_});
  roots.insert(roots.end(), read_only_.begin(), read_only_.end());
  return roots;
}

std::string DiskCache::entry_rel(std::string_view arch, const std::string& key_hex) const {
  return fmt::format("{}/{}/{}", kLayout, arch, key_hex.substr(0, 2));
}

std::optional<std::vector<char>> DiskCache::load(const CacheKey& key, Arch arch, const std::string& kernel) {
  const std::string hex = key.hex();
  for (const Root& root : readable_roots()) {
    std::string why;
    const int dir = open_dir_at(root.fd, entry_rel(to_string(arch), hex), false, &why);
    const std::string base = fmt::format("{}/{}/{}", root.path, entry_rel(to_string(arch), hex), hex);
    if (dir < 0) {
      // One line for a directory, however many keys are below it.
      if (!why.empty()) warn_once("bad-dir-" + root.path + why, fmt::format("ignoring cache entries in {}: {}", root.path, why));
      continue;
    }
    std::string cubin_why, sidecar_why;
    auto cubin = read_file_at(dir, hex + ".cubin", kMaxCubinBytes, &cubin_why);
    auto sidecar = read_file_at(dir, hex + ".json", kMaxSidecarBytes, &sidecar_why);
    const bool in_flight = torn_state(dir, hex) == Torn::young;  // its writer is between its two files
    ::close(dir);
    if (!cubin && !sidecar && cubin_why.empty() && sidecar_why.empty()) continue;
    if (in_flight) continue;
    const std::string side = sidecar ? std::string(sidecar->begin(), sidecar->end()) : std::string{};
    const std::string why_bad = !cubin_why.empty()   ? cubin_why
                                : !cubin             ? "missing CUBIN"
                                : !sidecar_why.empty() ? "sidecar: " + sidecar_why
                                : !sidecar           ? "missing sidecar"
                                                     : verify_entry(*cubin, side, hex, to_string(arch), kernel);
    if (why_bad.empty()) return cubin;
    // Not "recompiled": another root, or a process we wait for, may still provide it.
    warn_once("bad-entry-" + base, fmt::format("ignoring cache entry {}.cubin: {}", base, why_bad));
  }
  return std::nullopt;
}

bool DiskCache::store(const CacheKey& key, Arch arch, std::span<const char> cubin, const std::string& spec_json,
                      const std::string& kernel) {
  if (!writable_) {
    count_not_stored(not_writable_reason());
    return false;
  }
  const std::string sidecar = fmt::format(
      R"({{"format":1,"key":"{}","arch":"{}","kernel":"{}","size":{},"checksum":"{}","nvrtc":"{}","library":"{}","created":"{}","spec":{}}})"
      "\n",
      key.hex(), to_string(arch), kernel, cubin.size(), checksum_hex(cubin), nvrtc_version(), NVFP4_JIT_VERSION,
      utc_timestamp(), spec_json);
  const std::string why = store_files(to_string(arch), key.hex(), cubin, std::span<const char>(sidecar.data(), sidecar.size()));
  return why.empty();
}

std::string DiskCache::store_files(std::string_view arch, const std::string& key_hex, std::span<const char> cubin,
                                   std::span<const char> sidecar) {
  const std::string rel = entry_rel(arch, key_hex);
  const std::string base = fmt::format("{}/{}/{}", roots_.primary, rel, key_hex);
  std::string why;
  int err = 0;
  for (int attempt = 0; attempt < kStoreAttempts && writable_; ++attempt) {
    const int dir = open_dir_at(primary_fd_, rel, true, &why);
    if (dir < 0) {
      err = errno;
      if (err == ENOENT) continue;  // a cleaner removed a directory as we made the next
      if (root_failure(err)) degrade(why);
      count_not_stored(why);
      return why;
    }
    // The CUBIN first: a reader that meets the new sidecar with the old CUBIN sees a mismatch,
    // takes the key's lock and waits for us.
    err = write_file_atomic_at(dir, key_hex + ".cubin", cubin);
    if (!err && (err = write_file_atomic_at(dir, key_hex + ".json", sidecar)) != 0) {
      // No CUBIN without its sidecar left behind (nor an old sidecar that no longer matches).
      ::unlinkat(dir, (key_hex + ".cubin").c_str(), 0);
      ::unlinkat(dir, (key_hex + ".json").c_str(), 0);
    }
    ::close(dir);
    if (!err) return {};
    if (err != ENOENT) break;  // ENOENT: our directory or temp file was removed; try again
  }
  why = writable_ ? fmt::format("writing {}: {}", base, std::strerror(err)) : not_writable_reason();
  if (writable_ && err != ENOENT && root_failure(err)) degrade(why);
  count_not_stored(why);
  return why;
}

DiskCache::Lock::~Lock() {
  if (fd_ >= 0) {
    // Unlinked while still held, so a process that opens the path next makes a new file; one
    // that opened this one checks it is still at the path after locking it.
    struct stat st{}, at{};
    if (::fstat(fd_, &st) == 0 && ::fstatat(dir_fd_, name_.c_str(), &at, AT_SYMLINK_NOFOLLOW) == 0 &&
        st.st_ino == at.st_ino && st.st_dev == at.st_dev)
      ::unlinkat(dir_fd_, name_.c_str(), 0);
    ::close(fd_);  // closing releases the flock
  }
  if (dir_fd_ >= 0) ::close(dir_fd_);
}

DiskCache::Lock DiskCache::lock(const CacheKey& key, Arch arch) { return lock_at(to_string(arch), key.hex(), true); }

DiskCache::Lock DiskCache::try_lock(const CacheKey& key, Arch arch, bool* busy) {
  return lock_at(to_string(arch), key.hex(), false, busy);
}

DiskCache::Lock DiskCache::lock_at(std::string_view arch, const std::string& key_hex, bool wait, bool* busy) {
  if (busy) *busy = false;
  if (!writable_) return Lock{};
  std::string why;
  const std::string rel = entry_rel(arch, key_hex);
  const int dir = open_dir_at(primary_fd_, rel, true, &why);
  if (dir < 0) return Lock{};
  const std::string name = key_hex + ".lock";
  const auto start = std::chrono::steady_clock::now();
  auto pause = std::chrono::milliseconds(2);
  while (true) {
    bool held = false;
    const int fd = try_flock(dir, name, true, &held);
    if (fd >= 0) return Lock{fd, dir, name};
    const auto waited = std::chrono::steady_clock::now() - start;
    if (busy) *busy = held;
    if (!held || !wait || waited >= lock_wait_) {
      if (held && wait)
        warn_once("lock-wait-" + rel + name,
                  fmt::format("waited {:.0f} s for {}/{}/{}, which another process holds (stopped or hung?); going on "
                              "without it",
                              std::chrono::duration<double>(waited).count(), roots_.primary, rel, name));
      else if (!held)
        warn_once("lock-bad-" + rel + name, fmt::format("cannot lock {}/{}/{}: not a regular file we can open; going "
                                                       "on without the lock",
                                                       roots_.primary, rel, name));
      ::close(dir);
      return Lock{};
    }
    std::this_thread::sleep_for(pause);
    pause = std::min(pause * 2, std::chrono::milliseconds(100));
  }
}

template <class File, class Refused>
void DiskCache::walk(const Root& root, File file, Refused refused) const {
  std::string why;
  const int top = open_dir_at(root.fd, std::string(kLayout), false, &why);
  if (top < 0) {
    if (!why.empty()) refused(std::string(kLayout), fmt::format("{}/{}", root.path, why));
    return;
  }
  // Directories: v2, v2/<arch> (and v2/tuning), v2/<arch>/<kk>; what is below is a file.
  auto visit = [&](auto& self, int dir, const std::string& rel) -> void {
    for (const std::string& name : dir_names(dir)) {
      struct stat st{};
      if (slashes(rel) < 2 && ::fstatat(dir, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISDIR(st.st_mode)) {
        const std::string sub_rel = rel + "/" + name;
        const int sub = ::openat(dir, name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (sub < 0) continue;  // removed since the directory was read
        std::string bad = ::fstat(sub, &st) != 0 ? std::string(std::strerror(errno))
                                                 : untrusted_below(st, root.path + "/" + sub_rel, false);
        if (bad.empty())
          self(self, sub, sub_rel);
        else
          refused(sub_rel, bad);
        ::close(sub);
        continue;
      }
      file(dir, rel, name);
    }
  };
  visit(visit, top, std::string(kLayout));
  ::close(top);
}

std::vector<CacheEntryInfo> DiskCache::list(bool verify) const {
  std::vector<CacheEntryInfo> entries;
  for (const Root& root : readable_roots()) {
    auto entry = [&](int dir, const std::string& rel, const std::string& name) {
      if (slashes(rel) != 2 || !ends_with(name, ".cubin")) return;
      CacheEntryInfo info;
      info.root = root.path;
      info.path = fmt::format("{}/{}/{}", root.path, rel, name);
      info.key = name.substr(0, name.size() - 6);
      info.arch = rel_arch(rel);
      struct stat st{};
      if (::fstatat(dir, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) return;  // removed since listed
      if (S_ISREG(st.st_mode)) info.size = uint64_t(st.st_size);
      const Torn torn = torn_state(dir, info.key);
      if (torn == Torn::aged) return;  // a leftover (leftovers())
      std::string sidecar_why;
      const auto sidecar = read_file_at(dir, info.key + ".json", kMaxSidecarBytes, &sidecar_why);
      const std::string side = sidecar ? std::string(sidecar->begin(), sidecar->end()) : std::string{};
      info.created = sidecar_field(side, "created");
      info.nvrtc = sidecar_field(side, "nvrtc");
      if (const size_t pos = side.find("\"spec\":"); pos != std::string::npos && side.find_last_of('}') > pos + 7)
        info.spec_json = side.substr(pos + 7, side.find_last_of('}') - pos - 7);
      if (verify) {
        std::string cubin_why;
        const auto cubin = read_file_at(dir, name, kMaxCubinBytes, &cubin_why);
        if (!cubin && cubin_why.empty()) return;  // removed since listed: gone, not bad
        info.problem = !cubin               ? cubin_why
                       : !sidecar_why.empty() ? "sidecar: " + sidecar_why
                       : !sidecar           ? "missing sidecar"
                                            : verify_entry(*cubin, side, info.key, info.arch);
        if (!info.problem.empty()) {
          // Being written: a store holds the key's lock, or its CUBIN is in and its sidecar not yet.
          bool held = false;
          if (const int fd = try_flock(dir, info.key + ".lock", false, &held); fd >= 0) ::close(fd);
          info.in_flight = held || torn == Torn::young;
        }
      }
      entries.push_back(std::move(info));
    };
    auto refused = [&](const std::string& rel, const std::string& why) {
      warn_once("bad-dir-" + root.path + "/" + rel, fmt::format("ignoring cache entries in {}: {}", root.path, why));
      CacheEntryInfo info;
      info.root = root.path;
      info.path = fmt::format("{}/{}", root.path, rel);
      info.arch = rel_arch(rel);
      info.problem = why;
      entries.push_back(std::move(info));
    };
    walk(root, entry, refused);
  }
  return entries;
}

std::vector<CacheLeftover> DiskCache::leftovers() const {
  std::vector<CacheLeftover> out;
  for (const Root& root : readable_roots()) {
    auto leftover = [&](int dir, const std::string& rel, const std::string& name) {
      const auto writer = temp_file_writer(name);
      const bool lock = ends_with(name, ".lock");
      const bool cubin = slashes(rel) == 2 && ends_with(name, ".cubin");
      if (!writer && !lock && !cubin) return;
      struct stat st{};
      if (::fstatat(dir, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISREG(st.st_mode)) return;
      CacheLeftover l{root.path, fmt::format("{}/{}/{}", root.path, rel, name), false, {}};
      bool held = false;
      if (writer) {
        l.in_use = process_alive(*writer) && now_ns() - mtime_ns(st) < __int128(std::chrono::seconds(kTempFileMaxAge).count()) * 1000000000;
        l.what = "temp file of a writer that is gone";
      } else if (lock) {
        if (const int fd = try_flock(dir, name, false, &held); fd >= 0) ::close(fd);
        l.in_use = held;
        l.what = "lock file no process holds";
      } else {
        const std::string key = name.substr(0, name.size() - 6);
        if (torn_state(dir, key) != Torn::aged) return;
        if (const int fd = try_flock(dir, key + ".lock", false, &held); fd >= 0) ::close(fd);
        l.in_use = held;
        l.what = "CUBIN without its sidecar: a store that did not finish";
      }
      out.push_back(std::move(l));
    };
    walk(root, leftover, [](const std::string&, const std::string&) {});
  }
  return out;
}

size_t DiskCache::sweep_leftovers() {
  if (!writable_) return 0;
  size_t removed = 0;
  for (const CacheLeftover& l : leftovers()) {
    if (l.root != roots_.primary || l.in_use) continue;
    const std::string rel_path = l.path.substr(l.root.size() + 1);
    const std::string rel = rel_path.substr(0, rel_path.rfind('/')), name = rel_path.substr(rel_path.rfind('/') + 1);
    if (ends_with(name, ".cubin")) {  // a torn entry: under its key's lock, if still torn
      CacheEntryInfo e;
      e.root = l.root, e.path = l.path, e.arch = rel_arch(rel), e.key = name.substr(0, name.size() - 6);
      removed += remove_locked(e, [&](int dir, const struct stat&) { return torn_state(dir, e.key) == Torn::aged; });
      continue;
    }
    std::string why;
    const int dir = open_dir_at(primary_fd_, rel, false, &why);
    if (dir < 0) continue;
    if (temp_file_writer(name)) {
      removed += ::unlinkat(dir, name.c_str(), 0) == 0;
    } else {
      // Unlinked while we hold it, as a holder would: nobody is using it then.
      bool held = false;
      const int fd = try_flock(dir, name, false, &held);
      if (fd >= 0) {
        removed += ::unlinkat(dir, name.c_str(), 0) == 0;
        ::close(fd);
      }
    }
    ::close(dir);
  }
  return removed;
}

template <class Still>
size_t DiskCache::remove_locked(const CacheEntryInfo& entry, Still still, std::vector<std::string>* not_removed) {
  auto report = [&](const std::string& path, const std::string& why) {
    if (not_removed) not_removed->push_back(fmt::format("{}: {}", path, why));
  };
  if (entry.root != roots_.primary || !writable_) return 0;
  if (entry.key.empty()) {  // a directory that is not trusted: never entered
    report(entry.path, entry.problem);
    return 0;
  }
  const Lock lock = lock_at(entry.arch, entry.key, false);
  if (!lock.held()) return 0;  // another process is compiling or removing it
  std::string why;
  const int dir = open_dir_at(primary_fd_, entry_rel(entry.arch, entry.key), false, &why);
  if (dir < 0) {
    if (!why.empty()) report(entry.path, why);
    return 0;
  }
  struct stat cubin{}, sidecar{};
  const bool has_cubin = ::fstatat(dir, (entry.key + ".cubin").c_str(), &cubin, AT_SYMLINK_NOFOLLOW) == 0;
  const bool has_sidecar = ::fstatat(dir, (entry.key + ".json").c_str(), &sidecar, AT_SYMLINK_NOFOLLOW) == 0;
  // A CUBIN without its sidecar, written moments ago: a store that holds no lock (an older
  // version, or one whose lock wait ran out) is between its two renames.
  const bool young = torn_state(dir, entry.key) == Torn::young;
  size_t removed = 0;
  // A directory in a file's place is removed with what is below it (nothing followed).
  auto remove = [&](const std::string& name) {
    const int err = remove_tree_at(dir, name);
    if (err && err != ENOENT) report(fmt::format("{}/{}/{}", roots_.primary, entry_rel(entry.arch, entry.key), name), std::strerror(err));
    return err == 0;
  };
  if (has_cubin && !young && still(dir, cubin)) {
    removed = remove(entry.key + ".cubin");
    if (removed && has_sidecar) removed += remove(entry.key + ".json");
  }
  ::close(dir);
  return removed;
}

bool DiskCache::remove(const CacheEntryInfo& entry) {
  // Listed as bad, but a writer may have completed it since: verify again under the lock.
  return remove_locked(entry, [&](int dir, const struct stat&) {
    std::string cubin_why, sidecar_why;
    const auto cubin = read_file_at(dir, entry.key + ".cubin", kMaxCubinBytes, &cubin_why);
    const auto sidecar = read_file_at(dir, entry.key + ".json", kMaxSidecarBytes, &sidecar_why);
    if (!cubin || !sidecar) return true;
    return !verify_entry(*cubin, std::string(sidecar->begin(), sidecar->end()), entry.key, entry.arch).empty();
  });
}

size_t DiskCache::prune(std::chrono::seconds age) {
  // In nanoseconds as a 128-bit count: any age in seconds fits, and a cutoff before the epoch
  // simply matches nothing.
  const __int128 cutoff = now_ns() - __int128(age.count()) * 1000000000;
  size_t removed = 0;
  for (const CacheEntryInfo& e : list(false)) {
    // The age is read again under the lock: a writer may have just replaced the entry.
    if (remove_locked(e, [&](int, const struct stat& st) { return mtime_ns(st) < cutoff; }) > 0) ++removed;
  }
  return removed;
}

namespace {

// Adds the CUBINs and bytes of the regular files below `dir_fd` to `layout`, following no
// symlink and going at most `depth` directories down.
void count_below(int dir_fd, int depth, OldCacheLayout& layout) {
  for (const std::string& name : dir_names(dir_fd)) {
    struct stat st{};
    if (::fstatat(dir_fd, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) continue;
    if (S_ISREG(st.st_mode)) {
      layout.bytes += uint64_t(st.st_size);
      layout.entries += ends_with(name, ".cubin");
    } else if (S_ISDIR(st.st_mode) && depth > 0) {
      const int sub = ::openat(dir_fd, name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
      if (sub < 0) continue;
      count_below(sub, depth - 1, layout);
      ::close(sub);
    }
  }
}

}  // namespace

std::vector<OldCacheLayout> DiskCache::old_layouts() const {
  std::vector<OldCacheLayout> found;
  for (const Root& root : readable_roots())
    for (std::string_view name : kOldCacheLayouts) {
      std::string why;
      const int dir = open_dir_at(root.fd, std::string(name), false, &why);
      if (dir < 0) continue;
      OldCacheLayout layout{root.path, std::string(name)};
      count_below(dir, 4, layout);  // <layout>/<arch>/<kk>/<files>, <layout>/tuning/<files>
      ::close(dir);
      found.push_back(std::move(layout));
    }
  return found;
}

size_t DiskCache::remove_old_layouts(std::vector<std::string>* not_removed) {
  if (!writable_ || primary_fd_ < 0) return 0;
  size_t entries = 0;
  for (const OldCacheLayout& layout : old_layouts()) {
    if (layout.root != roots_.primary) continue;
    if (const int err = remove_tree_at(primary_fd_, layout.layout); err == 0)
      entries += layout.entries;
    else if (err != ENOENT && not_removed)
      not_removed->push_back(fmt::format("{}/{}: {}", roots_.primary, layout.layout, std::strerror(err)));
  }
  return entries;
}

size_t DiskCache::clear(std::vector<std::string>* not_removed) {
  if (!writable_) return 0;
  size_t removed = 0;
  for (const CacheEntryInfo& e : list(false))
    removed += remove_locked(e, [](int, const struct stat&) { return true; }, not_removed);
  // Tuning tables (their writers rename over whatever is there, so no lock is needed).
  std::string why;
  const std::string tuning = std::string(kLayout) + "/tuning";
  const int dir = open_dir_at(primary_fd_, tuning, false, &why);
  if (dir < 0 && !why.empty() && not_removed) not_removed->push_back(fmt::format("{}/{}: {}", roots_.primary, tuning, why));
  if (dir >= 0) {
    for (const std::string& name : dir_names(dir)) {
      struct stat st{};
      if (!ends_with(name, ".json") || ::fstatat(dir, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISREG(st.st_mode))
        continue;
      if (::unlinkat(dir, name.c_str(), 0) == 0)
        ++removed;
      else if (errno != ENOENT && not_removed)
        not_removed->push_back(fmt::format("{}/{}/{}: {}", roots_.primary, tuning, name, std::strerror(errno)));
    }
    ::close(dir);
  }
  // Entry directories stay: another process may be about to store into one.
  return removed + sweep_leftovers();
}

}  // namespace nvfp4::jit::detail
