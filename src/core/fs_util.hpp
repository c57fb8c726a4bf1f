// Small POSIX file helpers for the cache: no symlink following, atomic replace.
#pragma once
#include <optional>
#include <span>
#include <string>
#include <vector>

namespace nvfp4::jit::detail {

// Reads a whole regular file without following a symlink at the last component.
std::optional<std::vector<char>> read_file_nofollow(const std::string& path);
// Writes `data` to `path` through a temp file in the same directory (fsync + rename).
// Returns 0 or the errno that stopped it.
int write_file_atomic(const std::string& path, std::span<const char> data);
// Creates `dir` (mode 0700) and missing parents. The directory itself must end up a real
// directory owned by this user, or one owned by root/us reached through our own symlink.
// Returns an empty string or why not.
std::string make_private_dir(const std::string& dir);
std::string utc_timestamp();

}  // namespace nvfp4::jit::detail
