// Small POSIX file helpers for the cache: trusted roots, no symlink following below them,
// opens that never block, bounded reads, atomic replace.
#pragma once
#include <sys/stat.h>
#include <sys/types.h>

#include <cstddef>
#include <optional>
#include <span>
#include <string>
#include <vector>

namespace nvfp4::jit::detail {

// Bounds on what the cache reads whole: checked before anything is read.
inline constexpr size_t kMaxCubinBytes = size_t(64) << 20;
inline constexpr size_t kMaxSidecarBytes = size_t(64) << 10;
inline constexpr size_t kMaxTableBytes = size_t(16) << 20;

// Reads a whole regular file of at most `max_bytes`. The open never blocks (a FIFO is refused,
// not waited on) and follows no symlink at the last component. On failure `why` (when given)
// says why, and is left empty when the file does not exist.
std::optional<std::vector<char>> read_file_nofollow(const std::string& path, size_t max_bytes = kMaxTableBytes,
                                                    std::string* why = nullptr);
// The same, following symlinks: a checkpoint's files are often links into a download cache
// (a model's config.json, never the cache's own files).
std::optional<std::vector<char>> read_file_following(const std::string& path, size_t max_bytes, std::string* why = nullptr);
// The same for `name` in the directory `dir_fd`, a directory below a cache root: the file must
// also pass untrusted_below (owned by root or this user, writable by nobody else).
std::optional<std::vector<char>> read_file_at(int dir_fd, const std::string& name, size_t max_bytes,
                                              std::string* why = nullptr);
// The same for `rel` ("a/b/name") below the cache root `root`: every directory on the way is
// opened as open_dir_at does (no symlink followed, each passing untrusted_below) and the file
// as read_file_at does. For a root's files read by path (tuning tables).
std::optional<std::vector<char>> read_file_below(const std::string& root, const std::string& rel, size_t max_bytes,
                                                 std::string* why = nullptr);

// Writes `data` to `path` through a temp file in the same directory (fsync + rename).
// Returns 0 or the errno that stopped it.
int write_file_atomic(const std::string& path, std::span<const char> data);
// The same for `name` in `dir_fd`; the temp file is `<name>.tmp.<pid>.<random>`.
int write_file_atomic_at(int dir_fd, const std::string& name, std::span<const char> data);

// Why `dir` cannot be trusted as a cache root (empty: it can). Every directory on its path,
// and every symlink met on the way, must belong to root or to this user and be writable by
// nobody else (group/world-writable only with the sticky bit, as /tmp); the root itself must
// belong to this user when `own` (a root we write), else to root or this user, and must not be
// writable by others even with the sticky bit (which stops them removing names, not creating
// v2/). A directory another user can write could be swapped for theirs, and a kernel cache
// holds GPU code.
std::string untrusted_reason(const std::string& dir, bool own);

// Why a file or directory below a root (its fstat `st`, named `path` in messages) cannot be
// trusted: not owned by this user (`own`) or by root or this user, or writable by others.
std::string untrusted_below(const struct stat& st, const std::string& path, bool own);

// Creates `dir` (mode 0700) and missing parents, then checks it with untrusted_reason(dir,
// own = true). The deepest existing part of the path is checked before anything is made, and
// the rest is made one component at a time below it without following symlinks, so nothing
// is created through a path another user controls. Returns an empty string or why not.
std::string make_private_dir(const std::string& dir);

// Opens the directory `rel` ("a/b/c") below `base_fd`, one component at a time with
// O_NOFOLLOW, so no symlink below a trusted base is ever followed. Each component must pass
// untrusted_below (owned by this user with `create`, which makes missing ones 0700; else by
// root or this user); one that does not fails with errno EPERM. Returns the fd or -1 with
// `why` (empty when a component does not exist).
int open_dir_at(int base_fd, const std::string& rel, bool create, std::string* why);

// The names in the directory `dir_fd` but "." and "..", read through a duplicate of the fd.
std::vector<std::string> dir_names(int dir_fd);
// Removes `name` in `dir_fd` and, when it is a directory, everything below it, following no
// symlink (at most 64 levels deep). Returns 0 or the first errno that stopped a removal.
int remove_tree_at(int dir_fd, const std::string& name);

// "a FIFO", "a directory", ...: what a non-regular file is, for messages.
std::string file_kind(mode_t mode);

// Whether `name` is a temp file of write_file_atomic_at, and then the writer's pid.
std::optional<pid_t> temp_file_writer(const std::string& name);
// Whether the process `pid` (of this pid namespace) is running.
bool process_alive(pid_t pid);

std::string utc_timestamp();

}  // namespace nvfp4::jit::detail
