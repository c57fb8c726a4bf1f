#include "core/fs_util.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <random>

#include <fmt/format.h>

namespace nvfp4::jit::detail {

namespace {

bool trusted_owner(uid_t uid) { return uid == 0 || uid == ::geteuid(); }

// Group/world-writable without the sticky bit: anyone in the group (or anyone) can rename
// what is inside. Allowed above a root only: the sticky bit stops others removing names, not
// creating them, so a root and what is below it must not be writable by others at all.
bool writable_by_others(const struct stat& st) { return (st.st_mode & 022) && !(st.st_mode & S_ISVTX); }

std::string absolute(const std::string& path) {
  if (!path.empty() && path[0] == '/') return path;
  char cwd[PATH_MAX];
  if (!::getcwd(cwd, sizeof cwd)) return path;
  return std::string(cwd) + "/" + path;
}

// The prefixes "/a", "/a/b", ... of an absolute path.
std::vector<std::string> prefixes(const std::string& path) {
  std::vector<std::string> out;
  for (size_t pos = path.find('/', 1);; pos = path.find('/', pos + 1)) {
    const std::string p = path.substr(0, pos);
    if (!p.empty() && p.back() != '/' && (out.empty() || out.back() != p)) out.push_back(p);
    if (pos == std::string::npos) break;
  }
  return out;
}

// `trusted_only`: the file must also pass untrusted_below (a file below a cache root).
std::optional<std::vector<char>> read_fd(int fd, const std::string& path, size_t max_bytes, std::string* why,
                                         bool trusted_only = false) {
  auto fail = [&](std::string reason) {
    if (why) *why = std::move(reason);
    ::close(fd);
    return std::optional<std::vector<char>>{};
  };
  struct stat st{};
  if (::fstat(fd, &st) != 0) return fail(fmt::format("stat {}: {}", path, std::strerror(errno)));
  if (!S_ISREG(st.st_mode)) return fail(fmt::format("{} is {}, not a regular file", path, file_kind(st.st_mode)));
  if (trusted_only)
    if (std::string reason = untrusted_below(st, path, false); !reason.empty()) return fail(std::move(reason));
  if (static_cast<uint64_t>(st.st_size) > max_bytes)
    return fail(fmt::format("{} is {} bytes, over the limit of {}", path, st.st_size, max_bytes));
  std::vector<char> data(static_cast<size_t>(st.st_size));
  size_t done = 0;
  while (done < data.size()) {
    const ssize_t n = ::read(fd, data.data() + done, data.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    done += static_cast<size_t>(n);
  }
  if (done != data.size()) return fail(fmt::format("{} changed size while being read", path));
  ::close(fd);
  return data;
}

std::string open_error(const std::string& path, int err) {
  if (err == ENOENT) return {};
  if (err == ELOOP) return fmt::format("{} is a symlink", path);
  return fmt::format("open {}: {}", path, std::strerror(err));
}

}  // namespace

std::string untrusted_below(const struct stat& st, const std::string& path, bool own) {
  if (own ? st.st_uid != ::geteuid() : !trusted_owner(st.st_uid))
    return fmt::format("{} is owned by uid {}, {}", path, st.st_uid, own ? "not by this user" : "another user");
  if (st.st_mode & 022)
    return fmt::format("{} is writable by other users (mode {:o}); below a cache root nothing may be", path,
                       st.st_mode & 07777);
  return {};
}

std::string file_kind(mode_t mode) {
  if (S_ISREG(mode)) return "a regular file";
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISSOCK(mode)) return "a socket";
  if (S_ISCHR(mode) || S_ISBLK(mode)) return "a device";
  if (S_ISLNK(mode)) return "a symlink";
  return "a special file";
}

std::optional<std::vector<char>> read_file_nofollow(const std::string& path, size_t max_bytes, std::string* why) {
  if (why) why->clear();
  // O_NONBLOCK: opening a FIFO for reading would otherwise wait for a writer forever.
  const int fd = ::open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
  if (fd < 0) {
    if (why) *why = open_error(path, errno);
    return std::nullopt;
  }
  return read_fd(fd, path, max_bytes, why);
}

std::optional<std::vector<char>> read_file_following(const std::string& path, size_t max_bytes, std::string* why) {
  if (why) why->clear();
  const int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
  if (fd < 0) {
    if (why) *why = open_error(path, errno);
    return std::nullopt;
  }
  return read_fd(fd, path, max_bytes, why);
}

std::optional<std::vector<char>> read_file_at(int dir_fd, const std::string& name, size_t max_bytes, std::string* why) {
  if (why) why->clear();
  const int fd = ::openat(dir_fd, name.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
  if (fd < 0) {
    if (why) *why = open_error(name, errno);
    return std::nullopt;
  }
  return read_fd(fd, name, max_bytes, why, true);
}

std::optional<std::vector<char>> read_file_below(const std::string& root, const std::string& rel, size_t max_bytes,
                                                 std::string* why) {
  if (why) why->clear();
  const int root_fd = ::open(root.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (root_fd < 0) {
    if (why) *why = open_error(root, errno);
    return std::nullopt;
  }
  const size_t slash = rel.rfind('/');
  std::string dir_why;
  const int dir = slash == std::string::npos ? ::fcntl(root_fd, F_DUPFD_CLOEXEC, 0)
                                             : open_dir_at(root_fd, rel.substr(0, slash), false, &dir_why);
  ::close(root_fd);
  if (dir < 0) {
    if (why && !dir_why.empty()) *why = fmt::format("{}/{}: {}", root, rel, dir_why);
    return std::nullopt;
  }
  std::string file_why;
  auto data = read_file_at(dir, slash == std::string::npos ? rel : rel.substr(slash + 1), max_bytes, &file_why);
  ::close(dir);
  if (why && !file_why.empty()) *why = fmt::format("{}/{}: {}", root, rel, file_why);
  return data;
}

int write_file_atomic_at(int dir_fd, const std::string& name, std::span<const char> data) {
  static thread_local std::mt19937_64 rng(std::random_device{}());
  const std::string tmp = fmt::format("{}.tmp.{}.{:x}", name, ::getpid(), rng());
  const int fd = ::openat(dir_fd, tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd < 0) return errno;
  size_t done = 0;
  int err = 0;
  while (done < data.size()) {
    const ssize_t n = ::write(fd, data.data() + done, data.size() - done);
    if (n < 0) {
      if (errno == EINTR) continue;
      err = errno;
      break;
    }
    done += static_cast<size_t>(n);
  }
  if (!err && ::fsync(fd) != 0) err = errno;
  if (::close(fd) != 0 && !err) err = errno;
  if (!err && ::renameat(dir_fd, tmp.c_str(), dir_fd, name.c_str()) != 0) err = errno;
  if (err) ::unlinkat(dir_fd, tmp.c_str(), 0);
  return err;
}

int write_file_atomic(const std::string& path, std::span<const char> data) {
  const size_t slash = path.rfind('/');
  const std::string dir = slash == std::string::npos ? "." : slash == 0 ? "/" : path.substr(0, slash);
  const int dir_fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dir_fd < 0) return errno;
  const int err = write_file_atomic_at(dir_fd, slash == std::string::npos ? path : path.substr(slash + 1), data);
  ::close(dir_fd);
  return err;
}

namespace {

// untrusted_reason, where `is_root`: the last directory is the root itself, which others must
// not be able to write even with the sticky bit (else only an ancestor on its way, as /tmp).
std::string untrusted_path(const std::string& dir_in, bool own, bool is_root) {
  if (dir_in.empty()) return "empty path";
  const std::string dir = absolute(dir_in);
  // Symlinks met on the way as written: each must be ours or root's.
  for (const std::string& p : prefixes(dir)) {
    struct stat lst{};
    if (::lstat(p.c_str(), &lst) != 0) return fmt::format("stat {}: {}", p, std::strerror(errno));
    if (S_ISLNK(lst.st_mode) && !trusted_owner(lst.st_uid))
      return fmt::format("{} is a symlink owned by uid {}", p, lst.st_uid);
  }
  // Then every directory the path really goes through.
  char real[PATH_MAX];
  if (!::realpath(dir.c_str(), real)) return fmt::format("resolve {}: {}", dir, std::strerror(errno));
  const std::vector<std::string> chain = prefixes(real);
  std::vector<std::string> all{"/"};
  all.insert(all.end(), chain.begin(), chain.end());
  for (size_t i = 0; i < all.size(); ++i) {
    const std::string& p = all[i];
    const bool last = i + 1 == all.size();
    struct stat st{};
    if (::stat(p.c_str(), &st) != 0) return fmt::format("stat {}: {}", p, std::strerror(errno));
    if (!S_ISDIR(st.st_mode)) return fmt::format("{} is {}, not a directory", p, file_kind(st.st_mode));
    if (last && is_root) {
      if (std::string why = untrusted_below(st, p, own); !why.empty()) return why;
      continue;
    }
    if (!trusted_owner(st.st_uid)) return fmt::format("{} is owned by uid {}, another user", p, st.st_uid);
    if (writable_by_others(st))
      return fmt::format("{} is writable by other users (mode {:o}) without the sticky bit", p, st.st_mode & 07777);
  }
  return {};
}

}  // namespace

std::string untrusted_reason(const std::string& dir, bool own) { return untrusted_path(dir, own, true); }

std::string make_private_dir(const std::string& dir_in) {
  if (dir_in.empty()) return "empty path";
  const std::string dir = absolute(dir_in);
  // The deepest part of the path that exists is checked before anything is made in it: a
  // directory made through another user's symlink or in their directory is already a write.
  const std::vector<std::string> parts = prefixes(dir);
  size_t existing = parts.size();  // parts[existing - 1] exists; 0: only "/"
  for (; existing > 0; --existing) {
    struct stat lst{};
    if (::lstat(parts[existing - 1].c_str(), &lst) == 0) break;
    if (errno != ENOENT) return fmt::format("stat {}: {}", parts[existing - 1], std::strerror(errno));
  }
  if (existing == parts.size()) return untrusted_path(dir, true, true);
  const std::string base = existing == 0 ? "/" : parts[existing - 1];
  if (std::string why = untrusted_path(base, false, false); !why.empty()) return why;
  int fd = ::open(base.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return fmt::format("open {}: {}", base, std::strerror(errno));
  // The rest one component at a time below that checked directory, each ours and private.
  for (size_t i = existing; i < parts.size(); ++i) {
    const std::string name = parts[i].substr(parts[i].rfind('/') + 1);
    std::string why;
    if (::mkdirat(fd, name.c_str(), 0700) != 0 && errno != EEXIST)
      why = fmt::format("mkdir {}: {}", parts[i], std::strerror(errno));
    const int next = why.empty() ? ::openat(fd, name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC) : -1;
    if (why.empty() && next < 0) why = fmt::format("open {}: {}", parts[i], std::strerror(errno));
    ::close(fd);
    fd = next;
    struct stat st{};
    if (why.empty() && ::fstat(fd, &st) != 0) why = fmt::format("stat {}: {}", parts[i], std::strerror(errno));
    if (why.empty()) why = untrusted_below(st, parts[i], true);
    if (!why.empty()) {
      if (fd >= 0) ::close(fd);
      return why;
    }
  }
  ::close(fd);
  return untrusted_path(dir, true, true);
}

int open_dir_at(int base_fd, const std::string& rel, bool create, std::string* why) {
  int fd = ::fcntl(base_fd, F_DUPFD_CLOEXEC, 0);
  if (fd < 0) {
    *why = fmt::format("dup: {}", std::strerror(errno));
    return -1;
  }
  for (size_t start = 0; start < rel.size();) {
    size_t end = rel.find('/', start);
    if (end == std::string::npos) end = rel.size();
    const std::string name = rel.substr(start, end - start);
    start = end + 1;
    if (name.empty()) continue;
    if (create && ::mkdirat(fd, name.c_str(), 0700) != 0 && errno != EEXIST) {
      const int err = errno;
      *why = fmt::format("mkdir {}: {}", rel, std::strerror(err));
      ::close(fd);
      errno = err;  // the caller tells a vanished parent (ENOENT) from the rest
      return -1;
    }
    const int next = ::openat(fd, name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    const int err = errno;
    ::close(fd);
    if (next < 0) {
      *why = err == ENOENT ? std::string{}
             : err == ELOOP || err == ENOTDIR
                 ? fmt::format("{} in {} is not a directory (a symlink or a file: not followed)", name, rel)
                 : fmt::format("open {}: {}", rel, std::strerror(err));
      errno = err;
      return -1;
    }
    fd = next;
    // Anyone who can write a directory below a root can put code in it (a sticky bit does
    // not stop them creating names), and what another user owns they can change.
    struct stat st{};
    std::string bad = ::fstat(fd, &st) != 0 ? fmt::format("stat {}: {}", rel, std::strerror(errno))
                                            : untrusted_below(st, rel.substr(0, end), create);
    if (!bad.empty()) {
      *why = std::move(bad);
      ::close(fd);
      errno = EPERM;
      return -1;
    }
  }
  return fd;
}

std::vector<std::string> dir_names(int dir_fd) {
  std::vector<std::string> names;
  const int fd = ::fcntl(dir_fd, F_DUPFD_CLOEXEC, 0);
  if (fd < 0) return names;
  DIR* d = ::fdopendir(fd);
  if (!d) {
    ::close(fd);
    return names;
  }
  ::rewinddir(d);  // the duplicate shares the original's offset
  while (const dirent* e = ::readdir(d)) {
    const std::string_view name(e->d_name);
    if (name != "." && name != "..") names.emplace_back(name);
  }
  ::closedir(d);
  return names;
}

namespace {
int remove_tree_below(int dir_fd, const std::string& name, int depth) {
  struct stat st{};
  if (::fstatat(dir_fd, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) return errno;
  if (!S_ISDIR(st.st_mode)) return ::unlinkat(dir_fd, name.c_str(), 0) == 0 ? 0 : errno;
  if (depth > 64) return ELOOP;
  const int fd = ::openat(dir_fd, name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) return errno;
  int err = 0;
  for (const std::string& below : dir_names(fd))
    if (const int e = remove_tree_below(fd, below, depth + 1); e && e != ENOENT && !err) err = e;
  ::close(fd);
  if (::unlinkat(dir_fd, name.c_str(), AT_REMOVEDIR) != 0 && !err) err = errno;
  return err;
}
}  // namespace

int remove_tree_at(int dir_fd, const std::string& name) { return remove_tree_below(dir_fd, name, 0); }

std::optional<pid_t> temp_file_writer(const std::string& name) {
  const size_t tmp = name.rfind(".tmp.");
  if (tmp == std::string::npos) return std::nullopt;
  const size_t dot = name.find('.', tmp + 5);
  if (dot == std::string::npos || dot == tmp + 5) return std::nullopt;
  const std::string pid = name.substr(tmp + 5, dot - tmp - 5);
  if (pid.find_first_not_of("0123456789") != std::string::npos || pid.size() > 9) return std::nullopt;
  if (name.find_first_not_of("0123456789abcdef", dot + 1) != std::string::npos || dot + 1 == name.size())
    return std::nullopt;
  return pid_t(std::atol(pid.c_str()));
}

bool process_alive(pid_t pid) { return pid > 0 && (::kill(pid, 0) == 0 || errno == EPERM); }

std::string utc_timestamp() {
  const std::time_t now = std::time(nullptr);
  std::tm tm{};
  ::gmtime_r(&now, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

}  // namespace nvfp4::jit::detail
