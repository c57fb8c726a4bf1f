// The on-disk CUBIN cache.
//
//   <root>/v2/<arch>/<kk>/<key>.cubin   the CUBIN, kk = first two hex digits of the key
//   <root>/v2/<arch>/<kk>/<key>.json    sidecar: key, arch, kernel, size, xxh3-64 checksum, spec, versions
//   <root>/v2/<arch>/<kk>/<key>.lock    flock'ed while a process compiles or removes that key
//
// v2 is the layout (kCacheLayout): the directory of an earlier one (v1: sidecars with every
// op's spec in one shared record) is never read; the tools report it (old_layouts) and prune
// and clear remove it.
//
// A root is used only when it can be trusted (fs_util's untrusted_reason: no directory on its
// path writable or owned by another user, and the root itself not writable by others even
// with the sticky bit); one that cannot is neither read nor written, with one warning. Below
// a root nothing is followed: directories are opened one component at a time with O_NOFOLLOW,
// files without blocking and only when they are regular and bounded, and every directory and
// file must belong to root or this user and be writable by nobody else (fs_util's
// untrusted_below); a directory that is not is ignored, with one warning, and listed as bad.
// Roots are told apart by device and inode: one listed twice is used once, and at most
// kMaxReadOnlyRoots of NVFP4_JIT_CACHE_PATH are used.
// Writes go to a temp file in the same directory, fsync, rename; reads verify the sidecar, the
// checksum and the CUBIN's ELF header: anything that does not verify is a miss (and is
// replaced by the next store). A root that cannot be written (read-only, full, not
// permitted) degrades the process to memory-only, with one warning; a problem with one key's
// path (a directory or a symlink where a file or directory should be) fails that key only.
// Every kernel not stored is counted. A store whose sidecar cannot be written removes its
// CUBIN again.
//
// Maintenance (remove, prune, clear) takes each key's lock without waiting and skips keys
// another process holds, and a CUBIN younger than kInFlightGrace without its sidecar is being
// written: neither is touched; one older than that is a leftover, swept like a dead writer's
// temp file. Lock holders unlink their lock file before releasing it, and a
// locker checks the file it locked is still the one at the path, so removing a lock file no
// one holds is safe.
#pragma once
#include <atomic>
#include <chrono>
#include <cstdint>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/key.hpp"
#include "core/spec.hpp"

namespace nvfp4::jit::detail {

// The layout directory below each root this build reads and writes, and those of earlier builds.
inline constexpr std::string_view kCacheLayout = "v2";
inline constexpr std::string_view kOldCacheLayouts[] = {"v1"};

// An earlier layout's directory in a root: what it holds.
struct OldCacheLayout {
  std::string root, layout;
  uint64_t entries = 0;  // CUBINs
  uint64_t bytes = 0;    // of every regular file below it
};

struct CacheRoots {
  std::string primary;                 // writable; empty: memory-only
  std::vector<std::string> read_only;  // NVFP4_JIT_CACHE_PATH
  // false: a primary root that does not exist is not made (commands that only read); it is
  // then absent, and nothing at all is created on its path.
  bool create_primary = true;
  static CacheRoots from_env();
};

struct CacheEntryInfo {
  std::string root, arch, key, path;
  uint64_t size = 0;
  std::string created, spec_json;
  std::string nvrtc;       // the NVRTC version that built it (the sidecar's; "" when unknown)
  // Empty when the entry verifies (or was not verified). Always set for a directory that is
  // not trusted, listed as one entry with an empty key and `path` the directory.
  std::string problem;
  bool in_flight = false;  // verify: another process holds its lock, or it is being written
};

// Temp files of writers, lock files, and CUBINs without a sidecar older than kInFlightGrace
// (a store killed or failed between its two files): leftovers once their process is gone.
struct CacheLeftover {
  std::string root, path;
  bool in_use = false;  // a live writer's temp file, or a lock someone holds
  std::string what;     // "temp file of a writer that is gone", ...
};

// A CUBIN written less than this long ago without a sidecar is a store in progress.
inline constexpr std::chrono::seconds kInFlightGrace{120};
// A temp file this old is a leftover even if a process with its writer's pid runs.
inline constexpr std::chrono::hours kTempFileMaxAge{24};
// How long lock() waits for a key another process holds (NVFP4_JIT_LOCK_WAIT_S overrides).
inline constexpr std::chrono::seconds kDefaultLockWait{60};
// The longest NVFP4_JIT_LOCK_WAIT_S taken; a longer one is cut to this, with a warning.
inline constexpr std::chrono::seconds kMaxLockWait{86400};
// How many NVFP4_JIT_CACHE_PATH roots are used (after duplicates); the rest are not, with a warning.
inline constexpr size_t kMaxReadOnlyRoots = 64;

// NVFP4_JIT_LOCK_WAIT_S's value as a wait: a decimal number of seconds in 0..kMaxLockWait.
// Anything else sets `warning` (naming the variable, the value and the wait used): a number
// over the maximum (inf included) gives kMaxLockWait; one that does not parse, is negative or
// NaN, kDefaultLockWait.
std::chrono::milliseconds parse_lock_wait(const std::string& text, std::string* warning);

class DiskCache {
 public:
  explicit DiskCache(CacheRoots roots);
  ~DiskCache();
  DiskCache(const DiskCache&) = delete;
  DiskCache& operator=(const DiskCache&) = delete;

  // `kernel`: the entry point the CUBIN must contain (checked when not empty).
  std::optional<std::vector<char>> load(const CacheKey& key, Arch arch, const std::string& kernel = {});
  // Stores atomically; returns false when the kernel was not stored (counted in not_stored()).
  // A failure other than a directory or temp file vanishing (a cleaner ran) turns the cache
  // memory-only, with one warning.
  bool store(const CacheKey& key, Arch arch, std::span<const char> cubin, const std::string& spec_json,
             const std::string& kernel = {});
  // Stores an entry's two files as they are (cache import; the caller holds the key's lock),
  // counted in not_stored() when it fails. Returns "" or why not.
  std::string store_files(std::string_view arch, const std::string& key_hex, std::span<const char> cubin,
                          std::span<const char> sidecar);

  // Exclusive across processes while alive; inert when memory-only or when the wait ran out.
  class Lock {
   public:
    Lock() = default;
    Lock(int fd, int dir_fd, std::string name) : fd_(fd), dir_fd_(dir_fd), name_(std::move(name)) {}
    Lock(Lock&& o) noexcept : fd_(o.fd_), dir_fd_(o.dir_fd_), name_(std::move(o.name_)) { o.fd_ = o.dir_fd_ = -1; }
    Lock& operator=(Lock&&) = delete;
    ~Lock();
    bool held() const { return fd_ >= 0; }

   private:
    int fd_ = -1, dir_fd_ = -1;
    std::string name_;
  };
  // Waits at most lock_wait() for another process's lock, then says so (once per key) and
  // returns an inert lock: a stopped or hung holder costs a duplicate compile, not a hang.
  Lock lock(const CacheKey& key, Arch arch);
  Lock lock(std::string_view arch, const std::string& key_hex) { return lock_at(arch, key_hex, true); }
  // Without waiting: an inert lock with *busy set when another process holds the key (a
  // prewarm then moves on to other keys and comes back).
  Lock try_lock(const CacheKey& key, Arch arch, bool* busy);
  void set_lock_wait(std::chrono::milliseconds wait) { lock_wait_ = wait; }
  std::chrono::milliseconds lock_wait() const { return lock_wait_; }

  bool writable() const { return writable_; }
  // Why the primary root is not written ("" when it is).
  std::string not_writable_reason() const;
  const CacheRoots& roots() const { return roots_; }
  // The primary root does not exist and was not made (CacheRoots::create_primary false).
  bool primary_absent() const { return primary_absent_; }
  // The NVFP4_JIT_CACHE_PATH roots in use, each once.
  std::vector<std::string> read_only_in_use() const;
  // Roots left out as untrusted (or unusable), with why.
  const std::vector<std::pair<std::string, std::string>>& refused_roots() const { return refused_; }
  // Kernels store() was asked to keep and did not, and why the last one was not.
  uint64_t not_stored() const { return not_stored_; }
  std::string last_store_problem() const;

  // For the command-line tools: every entry of every usable root, verified when `verify`.
  std::vector<CacheEntryInfo> list(bool verify) const;
  // Temp and lock files in every usable root.
  std::vector<CacheLeftover> leftovers() const;
  // Removes the primary root's leftovers that are not in use; returns files removed.
  size_t sweep_leftovers();
  // Removes every entry and tuning table of the primary root (entries being written stay),
  // and its unused leftovers; returns files removed. What could not be removed (a directory
  // we cannot take, a file the system refuses to unlink) is added to `not_removed` with why.
  size_t clear(std::vector<std::string>* not_removed = nullptr);
  // Removes a bad entry's files from the primary root, if under its lock it still does not
  // verify and is not being written.
  bool remove(const CacheEntryInfo& entry);
  // Removes the primary root's entries written more than `age` ago; returns entries removed.
  size_t prune(std::chrono::seconds age);
  // The earlier layouts' directories in every usable root.
  std::vector<OldCacheLayout> old_layouts() const;
  // Removes the primary root's earlier layouts (no lock: this version never uses their keys);
  // returns the entries (CUBINs) they held. What could not be removed is added to `not_removed`.
  size_t remove_old_layouts(std::vector<std::string>* not_removed = nullptr);

 private:
  struct Root {
    std::string path;
    int fd;
  };
  std::vector<Root> readable_roots() const;
  void open_primary();
  void open_read_only();
  // Calls file(dir_fd, rel, name) for each name in <root>/v2 and the directories up to two
  // levels below it (rel: "v2/sm_90a/ab"), and refused(rel, why) for each directory there
  // that is not trusted (not opened).
  template <class File, class Refused>
  void walk(const Root& root, File file, Refused refused) const;
  std::string entry_rel(std::string_view arch, const std::string& key_hex) const;
  Lock lock_at(std::string_view arch, const std::string& key_hex, bool wait, bool* busy = nullptr);
  // Removes an entry of the primary root under its lock when `still` (called under the lock
  // with the entry's directory fd) agrees. Returns the files removed (0: the CUBIN stays).
  template <class Still>
  size_t remove_locked(const CacheEntryInfo& entry, Still still, std::vector<std::string>* not_removed = nullptr);
  void degrade(const std::string& why);
  // Whether a store that failed with `err` fails the root (read-only, full, not permitted),
  // not only its key.
  bool root_failure(int err) const;
  void count_not_stored(const std::string& why);

  CacheRoots roots_;
  int primary_fd_ = -1;  // -1: the primary root is not read (absent or untrusted)
  bool primary_absent_ = false;
  std::vector<Root> read_only_;
  std::vector<std::pair<std::string, std::string>> refused_;
  std::atomic<bool> writable_{false};
  std::string not_writable_;
  std::chrono::milliseconds lock_wait_ = kDefaultLockWait;
  std::atomic<uint64_t> not_stored_{0};
  mutable std::mutex problem_mutex_;
  std::string last_store_problem_;
};

// The value of "name": in a flat sidecar JSON object ("" when absent; strings unquoted).
std::string sidecar_field(const std::string& json, std::string_view name);

// Why a CUBIN is not an ELF file for `arch` holding `kernel` (empty: it is; `kernel` empty:
// not checked). Checks the ELF class, EM_CUDA, the SM in the header flags and the symbol names.
std::string cubin_problem(std::span<const char> cubin, std::string_view arch, std::string_view kernel);

// Why a cubin + sidecar pair does not verify against `key` and `arch` (empty: it verifies).
// The CUBIN must contain the sidecar's kernel (or `kernel`, when given).
std::string verify_entry(const std::vector<char>& cubin, const std::string& sidecar, const std::string& key_hex,
                         std::string_view arch, std::string_view kernel = {});

}  // namespace nvfp4::jit::detail
