#include "core/disk_cache.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>

#define XXH_INLINE_ALL
#include <xxhash.h>

#include "core/error.hpp"
#include "core/fs_util.hpp"
#include "core/nvrtc_compiler.hpp"

namespace nvfp4::jit::detail {

namespace fs = std::filesystem;

namespace {

constexpr std::string_view kLayout = "v1";

std::string env(const char* name) {
  const char* value = std::getenv(name);
  return value ? value : "";
}

std::string checksum_hex(std::span<const char> data) {
  return fmt::format("{:016x}", XXH3_64bits(data.data(), data.size()));
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

std::string verify_entry(const std::vector<char>& cubin, const std::string& sidecar, const std::string& key_hex,
                         std::string_view arch) {
  if (sidecar_field(sidecar, "key") != key_hex) return "sidecar names another key";
  if (sidecar_field(sidecar, "arch") != arch) return fmt::format("sidecar is for {}, not {}", sidecar_field(sidecar, "arch"), arch);
  if (sidecar_field(sidecar, "size") != std::to_string(cubin.size()))
    return fmt::format("size {} does not match the sidecar's {}", cubin.size(), sidecar_field(sidecar, "size"));
  if (sidecar_field(sidecar, "checksum") != checksum_hex(cubin)) return "checksum mismatch";
  if (cubin.size() < 4 || std::memcmp(cubin.data(), "\x7f" "ELF", 4) != 0) return "not an ELF file";
  return {};
}

DiskCache::DiskCache(CacheRoots roots) : roots_(std::move(roots)) {
  if (roots_.primary.empty()) {
    warn_once("cache-root", "no cache directory (set NVFP4_JIT_CACHE_DIR or HOME); kernels are kept in memory only");
    return;
  }
  if (const std::string why = make_private_dir(roots_.primary); !why.empty()) {
    degrade(why);
    return;
  }
  writable_ = true;
}

void DiskCache::degrade(const std::string& why) {
  writable_ = false;
  warn_once("cache-write", fmt::format("cache directory {} cannot be used ({}); compiled kernels are kept in memory "
                                       "only for this process",
                                       roots_.primary, why));
}

std::string DiskCache::entry_dir(const std::string& root, const CacheKey& key, Arch arch) const {
  return fmt::format("{}/{}/{}/{}", root, kLayout, to_string(arch), key.hex().substr(0, 2));
}

bool DiskCache::ensure_dir(const std::string& dir) {
  if (const std::string why = make_private_dir(dir); !why.empty()) {
    degrade(why);
    return false;
  }
  return true;
}

std::optional<std::vector<char>> DiskCache::load(const CacheKey& key, Arch arch) {
  const std::string hex = key.hex();
  std::vector<std::string> roots;
  if (!roots_.primary.empty()) roots.push_back(roots_.primary);
  roots.insert(roots.end(), roots_.read_only.begin(), roots_.read_only.end());
  for (const std::string& root : roots) {
    const std::string base = entry_dir(root, key, arch) + "/" + hex;
    auto cubin = read_file_nofollow(base + ".cubin");
    auto sidecar = read_file_nofollow(base + ".json");
    if (!cubin && !sidecar) continue;
    const std::string side = sidecar ? std::string(sidecar->begin(), sidecar->end()) : std::string{};
    const std::string why = !cubin ? "missing CUBIN" : !sidecar ? "missing sidecar" : verify_entry(*cubin, side, hex, to_string(arch));
    if (why.empty()) return cubin;
    warn_once("bad-entry-" + base, fmt::format("ignoring cache entry {}.cubin: {}; it will be recompiled", base, why));
  }
  return std::nullopt;
}

bool DiskCache::store(const CacheKey& key, Arch arch, std::span<const char> cubin, const std::string& spec_json) {
  if (!writable_) return false;
  const std::string dir = entry_dir(roots_.primary, key, arch);
  if (!ensure_dir(dir)) return false;
  const std::string base = dir + "/" + key.hex();
  const std::string sidecar = fmt::format(
      R"({{"format":1,"key":"{}","arch":"{}","size":{},"checksum":"{}","nvrtc":"{}","library":"{}","created":"{}","spec":{}}})"
      "\n",
      key.hex(), to_string(arch), cubin.size(), checksum_hex(cubin), nvrtc_version(), NVFP4_JIT_VERSION,
      utc_timestamp(), spec_json);
  // The CUBIN first: a reader that meets the new sidecar with the old CUBIN sees a mismatch,
  // takes the key's lock and waits for us.
  int err = write_file_atomic(base + ".cubin", cubin);
  if (!err) err = write_file_atomic(base + ".json", std::span<const char>(sidecar.data(), sidecar.size()));
  if (err) {
    degrade(fmt::format("writing {}: {}", base, std::strerror(err)));
    return false;
  }
  return true;
}

DiskCache::Lock::~Lock() {
  if (fd_ >= 0) ::close(fd_);  // closing releases the flock
}

DiskCache::Lock DiskCache::lock(const CacheKey& key, Arch arch) {
  if (!writable_) return Lock{};
  const std::string dir = entry_dir(roots_.primary, key, arch);
  if (!ensure_dir(dir)) return Lock{};
  const std::string path = dir + "/" + key.hex() + ".lock";
  const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd < 0) return Lock{};
  while (::flock(fd, LOCK_EX) != 0) {
    if (errno != EINTR) {
      ::close(fd);
      return Lock{};
    }
  }
  return Lock{fd};
}

std::vector<CacheEntryInfo> DiskCache::list(bool verify) const {
  std::vector<CacheEntryInfo> entries;
  std::vector<std::string> roots;
  if (!roots_.primary.empty()) roots.push_back(roots_.primary);
  roots.insert(roots.end(), roots_.read_only.begin(), roots_.read_only.end());
  for (const std::string& root : roots) {
    std::error_code ec;
    const fs::path top = fs::path(root) / kLayout;
    if (!fs::is_directory(top, ec)) continue;
    for (auto it = fs::recursive_directory_iterator(top, fs::directory_options::skip_permission_denied, ec);
         !ec && it != fs::recursive_directory_iterator(); it.increment(ec)) {
      const fs::path& p = it->path();
      if (p.extension() != ".cubin" || !it->is_regular_file(ec)) continue;
      CacheEntryInfo info;
      info.root = root;
      info.path = p.string();
      info.key = p.stem().string();
      info.arch = p.parent_path().parent_path().filename().string();
      info.size = it->file_size(ec);
      const auto sidecar = read_file_nofollow(fs::path(p).replace_extension(".json").string());
      const std::string side = sidecar ? std::string(sidecar->begin(), sidecar->end()) : std::string{};
      info.created = sidecar_field(side, "created");
      if (const size_t pos = side.find("\"spec\":"); pos != std::string::npos)
        info.spec_json = side.substr(pos + 7, side.find_last_of('}') - pos - 7);
      if (verify) {
        const auto cubin = read_file_nofollow(info.path);
        info.problem = !cubin ? "unreadable" : !sidecar ? "missing sidecar" : verify_entry(*cubin, side, info.key, info.arch);
      }
      entries.push_back(std::move(info));
    }
  }
  return entries;
}

bool DiskCache::remove(const CacheEntryInfo& entry) {
  if (entry.root != roots_.primary) return false;
  fs::path p(entry.path);
  std::error_code ec;
  bool removed = fs::remove(p, ec);
  removed |= fs::remove(p.replace_extension(".json"), ec);
  return removed;
}

size_t DiskCache::prune(std::chrono::seconds age) {
  const auto cutoff = fs::file_time_type::clock::now() - age;
  size_t removed = 0;
  for (const CacheEntryInfo& e : list(false)) {
    std::error_code ec;
    const auto written = fs::last_write_time(e.path, ec);
    if (!ec && written < cutoff && remove(e)) ++removed;
  }
  return removed;
}

size_t DiskCache::clear() {
  if (roots_.primary.empty()) return 0;
  std::error_code ec;
  const fs::path top = fs::path(roots_.primary) / kLayout;
  if (fs::is_symlink(top, ec)) return 0;  // never follow a planted link out of the root
  size_t removed = 0;
  for (auto it = fs::recursive_directory_iterator(top, ec); !ec && it != fs::recursive_directory_iterator();
       it.increment(ec)) {
    if (it->is_regular_file(ec) && !it->is_symlink(ec)) removed += fs::remove(it->path(), ec) ? 1 : 0;
  }
  // Entry directories stay: another process may hold a lock file in one right now.
  return removed;
}

}  // namespace nvfp4::jit::detail
