#include "core/archive_io.hpp"

#include <fcntl.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <random>

#include <fmt/format.h>

#include "core/fs_util.hpp"

namespace nvfp4::jit::detail {

namespace {

std::string errno_text(int err) { return std::strerror(err); }

// Writes all of `data` to `fd`; 0 or the errno that stopped it.
int write_all(int fd, std::span<const char> data) {
  for (size_t done = 0; done < data.size();) {
    const ssize_t n = ::write(fd, data.data() + done, data.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return errno;
    done += static_cast<size_t>(n);
  }
  return 0;
}

std::string refusal(const std::string& path, mode_t mode) {
  return fmt::format("{} is {}: an archive is written only to a regular file (new, or one it replaces) or `-` "
                     "(standard output)",
                     path, file_kind(mode));
}

// The directory part and the name of `path`.
std::pair<std::string, std::string> split_path(const std::string& path) {
  const size_t slash = path.rfind('/');
  if (slash == std::string::npos) return {".", path};
  return {slash == 0 ? "/" : path.substr(0, slash), path.substr(slash + 1)};
}

// Replaces `name` in `dir_fd` by `tmp` only if `name` is a regular file: swapped atomically,
// then what was swapped out is looked at and, unless regular, swapped back. Returns "" or why.
std::string replace_regular(int dir_fd, const std::string& tmp, const std::string& name, const std::string& path) {
  if (::renameat2(dir_fd, tmp.c_str(), dir_fd, name.c_str(), RENAME_EXCHANGE) == 0) {
    struct stat old{};
    if (::fstatat(dir_fd, tmp.c_str(), &old, AT_SYMLINK_NOFOLLOW) == 0 && !S_ISREG(old.st_mode)) {
      ::renameat2(dir_fd, tmp.c_str(), dir_fd, name.c_str(), RENAME_EXCHANGE);
      return refusal(path, old.st_mode);
    }
    ::unlinkat(dir_fd, tmp.c_str(), 0);
    return {};
  }
  if (errno != EINVAL && errno != ENOSYS) return fmt::format("cannot replace {}: {}", path, errno_text(errno));
  // a file system without the exchange: the check just before the rename is the best there is
  struct stat now{};
  if (::fstatat(dir_fd, name.c_str(), &now, AT_SYMLINK_NOFOLLOW) == 0 && !S_ISREG(now.st_mode)) return refusal(path, now.st_mode);
  if (::renameat(dir_fd, tmp.c_str(), dir_fd, name.c_str()) != 0) return fmt::format("cannot replace {}: {}", path, errno_text(errno));
  return {};
}

// Moves `tmp` to `name` only while `name` does not exist. Returns 0, EEXIST, or another errno.
int rename_new(int dir_fd, const std::string& tmp, const std::string& name) {
  if (::renameat2(dir_fd, tmp.c_str(), dir_fd, name.c_str(), RENAME_NOREPLACE) == 0) return 0;
  if (errno != EINVAL && errno != ENOSYS) return errno;
  if (::linkat(dir_fd, tmp.c_str(), dir_fd, name.c_str(), 0) != 0) return errno;  // a link never replaces
  ::unlinkat(dir_fd, tmp.c_str(), 0);
  return 0;
}

std::string write_file(const std::string& path, std::span<const char> data) {
  const auto [dir, name] = split_path(path);
  if (name.empty() || name == "." || name == "..") return fmt::format("{} is not a file name", path);
  struct stat before{};
  const bool existed = ::lstat(path.c_str(), &before) == 0;
  if (existed && !S_ISREG(before.st_mode)) return refusal(path, before.st_mode);
  const int dir_fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dir_fd < 0) return fmt::format("cannot open the directory {}: {}", dir, errno_text(errno));
  static thread_local std::mt19937_64 rng(std::random_device{}());
  const std::string tmp = fmt::format(".{}.tmp.{}.{:x}", name, ::getpid(), rng());
  const int fd = ::openat(dir_fd, tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0666);
  if (fd < 0) {
    const int err = errno;
    ::close(dir_fd);
    return fmt::format("cannot create a file in {}: {}", dir, errno_text(err));
  }
  int err = write_all(fd, data);
  if (!err && existed && ::fchmod(fd, before.st_mode & 07777) != 0) err = errno;
  if (!err && ::fsync(fd) != 0) err = errno;
  if (::close(fd) != 0 && !err) err = errno;
  std::string why = err ? fmt::format("cannot write {}: {}", path, errno_text(err)) : "";
  if (why.empty() && !existed) {
    err = rename_new(dir_fd, tmp, name);
    if (err && err != EEXIST) why = fmt::format("cannot create {}: {}", path, errno_text(err));
    if (err == EEXIST) why = replace_regular(dir_fd, tmp, name, path);  // made since the check
  } else if (why.empty()) {
    why = replace_regular(dir_fd, tmp, name, path);
  }
  if (!why.empty()) ::unlinkat(dir_fd, tmp.c_str(), 0);
  ::close(dir_fd);
  return why;
}

}  // namespace

std::string archive_output_problem(const std::string& path) {
  if (path == "-")
    return ::isatty(STDOUT_FILENO) ? "standard output is a terminal: redirect it to a file or a pipe, or name a FILE" : "";
  if (path.empty()) return "the file name is empty";
  struct stat st{};
  if (::lstat(path.c_str(), &st) == 0 && !S_ISREG(st.st_mode)) return refusal(path, st.st_mode);
  return {};
}

std::string write_archive_output(const std::string& path, std::span<const char> data) {
  if (std::string why = archive_output_problem(path); !why.empty()) return why;
  if (path != "-") return write_file(path, data);
  if (const int err = write_all(STDOUT_FILENO, data)) return fmt::format("cannot write to standard output: {}", errno_text(err));
  return {};
}

std::optional<std::vector<char>> read_archive_input(const std::string& path, size_t max_bytes, std::string& why) {
  why.clear();
  if (path != "-") return read_file_nofollow(path, max_bytes, &why);
  if (::isatty(STDIN_FILENO)) {
    why = "standard input is a terminal: pipe or redirect an archive into it, or name a FILE";
    return std::nullopt;
  }
  std::vector<char> data;
  // read in steps up to one byte past the bound: more than that is refused, not kept
  for (char chunk[1 << 16];;) {
    const ssize_t n = ::read(STDIN_FILENO, chunk, sizeof chunk);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      why = fmt::format("cannot read standard input: {}", errno_text(errno));
      return std::nullopt;
    }
    if (n == 0) return data;
    if (data.size() + size_t(n) > max_bytes) {
      why = fmt::format("standard input holds more than the limit of {} bytes", max_bytes);
      return std::nullopt;
    }
    data.insert(data.end(), chunk, chunk + n);
  }
}

}  // namespace nvfp4::jit::detail
