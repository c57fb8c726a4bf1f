// Where `cache export` writes and `cache import` reads: a regular file, or `-` for standard
// output / input. An export never follows or replaces a symlink, a device, a FIFO or anything
// else that is not a regular file (as root, renaming over /dev/stdout or /dev/full would
// replace the system's nodes).
#pragma once
#include <cstddef>
#include <optional>
#include <span>
#include <string>
#include <vector>

namespace nvfp4::jit::detail {

// Why `path` cannot take an archive ("" when it can): `-` is standard output and must not be a
// terminal; else `path` must not exist or be a regular file (not followed if a symlink).
std::string archive_output_problem(const std::string& path);

// Writes `data` to `path` as archive_output_problem allows: standard output, or a temp file in
// the path's directory renamed into place. The rename never replaces what is not a regular
// file, even one put there since the check: a new name is taken only if still free, an
// existing one is swapped atomically and swapped back unless it was a regular file. A file
// replaced keeps its permission bits; a new one gets 0666 less the umask.
// Returns "" or why not.
std::string write_archive_output(const std::string& path, std::span<const char> data);

// The whole of `path` (a regular file, no symlink followed) or of standard input for `-`
// (not a terminal), at most `max_bytes`. On failure `why` says why ("" when the file does not
// exist).
std::optional<std::vector<char>> read_archive_input(const std::string& path, size_t max_bytes, std::string& why);

}  // namespace nvfp4::jit::detail
