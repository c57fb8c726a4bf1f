#include "core/fs_util.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <ctime>
#include <random>

#include <fmt/format.h>

namespace nvfp4::jit::detail {

std::optional<std::vector<char>> read_file_nofollow(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) return std::nullopt;
  struct stat st{};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    return std::nullopt;
  }
  std::vector<char> data(static_cast<size_t>(st.st_size));
  size_t done = 0;
  while (done < data.size()) {
    const ssize_t n = ::read(fd, data.data() + done, data.size() - done);
    if (n <= 0) break;
    done += static_cast<size_t>(n);
  }
  ::close(fd);
  if (done != data.size()) return std::nullopt;
  return data;
}

int write_file_atomic(const std::string& path, std::span<const char> data) {
  static thread_local std::mt19937_64 rng(std::random_device{}());
  const std::string tmp = fmt::format("{}.tmp.{}.{:x}", path, ::getpid(), rng());
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
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
  if (!err && ::rename(tmp.c_str(), path.c_str()) != 0) err = errno;
  if (err) ::unlink(tmp.c_str());
  return err;
}

std::string make_private_dir(const std::string& dir) {
  if (dir.empty()) return "empty path";
  // Create missing parents first (0700 for the ones we make).
  for (size_t pos = dir.find('/', 1); pos != std::string::npos; pos = dir.find('/', pos + 1)) {
    const std::string parent = dir.substr(0, pos);
    if (::mkdir(parent.c_str(), 0700) != 0 && errno != EEXIST) return fmt::format("mkdir {}: {}", parent, std::strerror(errno));
  }
  if (::mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST) return fmt::format("mkdir {}: {}", dir, std::strerror(errno));
  struct stat lst{}, st{};
  if (::lstat(dir.c_str(), &lst) != 0) return fmt::format("stat {}: {}", dir, std::strerror(errno));
  const uid_t me = ::geteuid();
  if (S_ISLNK(lst.st_mode)) {
    // A symlink is followed only when we (or root) planted it.
    if (lst.st_uid != me && lst.st_uid != 0) return fmt::format("{} is a symlink owned by uid {}", dir, lst.st_uid);
    if (::stat(dir.c_str(), &st) != 0) return fmt::format("stat {}: {}", dir, std::strerror(errno));
  } else {
    st = lst;
  }
  if (!S_ISDIR(st.st_mode)) return fmt::format("{} is not a directory", dir);
  if (st.st_uid != me) return fmt::format("{} is owned by uid {}, not by this user", dir, st.st_uid);
  return {};
}

std::string utc_timestamp() {
  const std::time_t now = std::time(nullptr);
  std::tm tm{};
  ::gmtime_r(&now, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

}  // namespace nvfp4::jit::detail
