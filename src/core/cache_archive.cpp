#include "core/cache_archive.hpp"

#include <cstring>
#include <filesystem>
#include <map>
#include <regex>

#include <fmt/format.h>

#include "core/archive_io.hpp"
#include "core/error.hpp"
#include "core/fs_util.hpp"
#include "core/tuning_table.hpp"

namespace nvfp4::jit::detail {

namespace fs = std::filesystem;

namespace {

constexpr size_t kBlock = 512;
// The whole archive is read into memory: bounded before it is read.
constexpr size_t kMaxArchive = size_t(1) << 30;

// Member names an archive may hold: exactly the cache's own layout, nothing else.
const std::regex kKernelName(std::string(kCacheLayout) + R"(/(sm_[0-9]+a)/([0-9a-f]{2})/([0-9a-f]{32})\.(cubin|json))");
const std::regex kTableName(std::string(kCacheLayout) + R"(/tuning/[A-Za-z0-9._-]+\.json)");
const std::string kTableDir = std::string(kCacheLayout) + "/tuning/";

void append_member(std::string& tar, const std::string& name, std::span<const char> data) {
  char h[kBlock] = {};
  std::memcpy(h, name.data(), name.size());
  std::snprintf(h + 100, 8, "%07o", 0644);
  std::snprintf(h + 108, 8, "%07o", 0);
  std::snprintf(h + 116, 8, "%07o", 0);
  std::snprintf(h + 124, 12, "%011llo", (unsigned long long)data.size());
  std::snprintf(h + 136, 12, "%011o", 0);
  h[156] = '0';
  std::memcpy(h + 257, "ustar", 6);
  std::memcpy(h + 263, "00", 2);
  std::memset(h + 148, ' ', 8);
  unsigned sum = 0;
  for (unsigned char c : h) sum += c;
  std::snprintf(h + 148, 8, "%06o", sum);
  tar.append(h, kBlock);
  tar.append(data.data(), data.size());
  tar.append((kBlock - data.size() % kBlock) % kBlock, '\0');
}

struct Member {
  std::string name;
  std::vector<char> data;
};

// The most a member of this name may hold (a CUBIN, a sidecar or a tuning table).
size_t member_limit(const std::string& name) {
  if (name.size() > 6 && name.compare(name.size() - 6, 6, ".cubin") == 0) return kMaxCubinBytes;
  if (name.rfind(kTableDir, 0) == 0) return kMaxTableBytes;
  return kMaxSidecarBytes;
}

const char* member_kind(char type) {
  switch (type) {
    case '1': return "a hard link";
    case '2': return "a symlink";
    case '3': case '4': return "a device";
    case '5': return "a directory";
    case '6': return "a FIFO";
    default: return "a special member";
  }
}

// Regular members; every other one (links, directories, special files, over-size members) is
// named in `skipped`.
std::vector<Member> read_members(const std::vector<char>& tar, const std::string& file, std::vector<std::string>& skipped) {
  std::vector<Member> members;
  for (size_t at = 0; at + kBlock <= tar.size();) {
    const char* h = tar.data() + at;
    if (std::all_of(h, h + kBlock, [](char c) { return c == 0; })) break;  // end of archive
    unsigned sum = 0, stored = 0;
    for (size_t i = 0; i < kBlock; ++i) sum += (i >= 148 && i < 156) ? unsigned(' ') : static_cast<unsigned char>(h[i]);
    std::sscanf(h + 148, "%8o", &stored);
    if (sum != stored) fail(Status::cache_error, "{}: not a tar file (header checksum at offset {})", file, at);
    unsigned long long size = 0;
    std::sscanf(h + 124, "%12llo", &size);
    at += kBlock;
    if (size > tar.size() - at) fail(Status::cache_error, "{}: truncated member at offset {}", file, at - kBlock);
    Member m;
    m.name.assign(h, strnlen(h, 100));
    // ustar keeps long names' leading part in a prefix field
    if (std::memcmp(h + 257, "ustar", 5) == 0 && h[345] != 0) m.name = std::string(h + 345, strnlen(h + 345, 155)) + "/" + m.name;
    if (h[156] != '0' && h[156] != '\0')
      skipped.push_back(fmt::format("{}: {}, not imported", m.name, member_kind(h[156])));
    else if (size > member_limit(m.name))
      skipped.push_back(fmt::format("{}: {} bytes, over the limit of {}", m.name, size, member_limit(m.name)));
    else {
      m.data.assign(tar.data() + at, tar.data() + at + size);
      members.push_back(std::move(m));
    }
    at += (size + kBlock - 1) / kBlock * kBlock;
  }
  return members;
}

bool same_file(const std::string& path, const std::vector<char>& data) {
  const auto have = read_file_nofollow(path, data.size());
  return have && *have == data;
}

}  // namespace

ArchiveSummary export_cache(const DiskCache& cache, const std::string& file) {
  // refused before the archive is built (a device, a FIFO, a symlink, a terminal)
  if (const std::string why = archive_output_problem(file); !why.empty()) fail(Status::invalid_argument, "cache export: {}", why);
  ArchiveSummary summary;
  const std::string& root = cache.roots().primary;
  if (root.empty()) fail(Status::cache_error, "cache export: there is no cache root");
  std::string tar;
  for (const CacheEntryInfo& e : cache.list(true)) {
    if (e.root != root) continue;
    if (!e.problem.empty()) {
      summary.skipped.push_back(fmt::format("{}: {}", e.path, e.problem));
      continue;
    }
    const std::string base = fmt::format("{}/{}/{}/{}", kCacheLayout, e.arch, e.key.substr(0, 2), e.key);
    // read below the root as verify did: nothing another user owns or can write
    const auto cubin = read_file_below(root, base + ".cubin", kMaxCubinBytes);
    const auto sidecar = read_file_below(root, base + ".json", kMaxSidecarBytes);
    if (!cubin || !sidecar) continue;  // removed since listing
    append_member(tar, base + ".cubin", *cubin);
    append_member(tar, base + ".json", *sidecar);
    ++summary.kernels;
  }
  std::error_code ec;
  for (auto it = fs::directory_iterator(fs::path(root) / kTableDir, ec); !ec && it != fs::directory_iterator();
       it.increment(ec)) {
    const std::string name = kTableDir + it->path().filename().string();
    if (!std::regex_match(name, kTableName) || name.size() >= 100) continue;
    if (auto data = read_file_below(root, name, kMaxTableBytes)) {
      append_member(tar, name, *data);
      ++summary.tables;
    }
  }
  tar.append(2 * kBlock, '\0');
  if (const std::string why = write_archive_output(file, std::span<const char>(tar.data(), tar.size())); !why.empty())
    fail(Status::cache_error, "cache export: {}", why);
  return summary;
}

ArchiveSummary import_cache(DiskCache& cache, const std::string& file) {
  std::string why;
  const auto tar = read_archive_input(file, kMaxArchive, why);
  if (!tar) fail(Status::cache_error, "cache import: cannot read {}: {}", file, why.empty() ? "no such file" : why);
  if (!cache.writable()) fail(Status::cache_error, "cache import: the cache root {} is not writable", cache.roots().primary);
  const std::string& root = cache.roots().primary;
  ArchiveSummary summary;
  std::map<std::string, std::pair<const Member*, const Member*>> kernels;  // base name -> cubin, sidecar
  const std::vector<Member> members = read_members(*tar, file, summary.skipped);
  for (const Member& m : members) {
    std::smatch match;
    if (std::regex_match(m.name, match, kKernelName)) {
      if (match[2] != match[3].str().substr(0, 2)) {
        summary.skipped.push_back(m.name + ": directory does not match the key");
        continue;
      }
      if (!parse_arch(match[1].str())) {
        summary.skipped.push_back(m.name + ": unknown arch " + match[1].str());
        continue;
      }
      auto& pair = kernels[m.name.substr(0, m.name.rfind('.'))];
      (match[4] == "cubin" ? pair.first : pair.second) = &m;
    } else if (std::regex_match(m.name, kTableName)) {
      // merged entry by entry: a table of other versions is left out, not written over ours; a
      // table is for the arch, device and SM count its name says, as its header must say too
      const std::string file_name = m.name.substr(m.name.rfind('/') + 1);
      const auto arch = parse_arch(file_name.substr(0, file_name.find('-')));
      if (!arch) {
        summary.skipped.push_back(m.name + ": unknown arch");
        continue;
      }
      std::string note;
      std::optional<TuningFile> file = TuningTable::parse_file(std::string(m.data.begin(), m.data.end()),
                                                                TuningVersions::current(), &note, *arch);
      if (!file) {
        summary.skipped.push_back(m.name + ": " + note);
        continue;
      }
      if (const std::string named = TuningTable::file_name(file->arch, file->device_name, file->sm_count);
          named != file_name) {
        summary.skipped.push_back(fmt::format("{}: its header is for {} (device \"{}\", {} SMs)", m.name, named,
                                              file->device_name, file->sm_count));
        continue;
      }
      for (const std::string& why : file->refused) summary.skipped.push_back(m.name + ": " + why);
      // every entry checked before anything is written: one that is not a tile the GEMM can
      // run is left out (and counted), not handed to a later call
      std::vector<TuningEntry> valid;
      for (const TuningEntry& e : file->entries) {
        if (const std::string why = tuning_entry_problem(e, *arch); !why.empty())
          summary.skipped.push_back(fmt::format("{}: entry for {}, bucket {}: {}", m.name, e.tuned.describe(), e.m_bucket, why));
        else valid.push_back(e);
      }
      if (valid.empty()) {
        if (file->entries.empty() && file->refused.empty()) summary.skipped.push_back(m.name + ": no entries");
        continue;
      }
      TuningTable table(root + "/" + m.name, *arch, file->device_name, file->sm_count);
      if (std::string why = table.record(valid); !why.empty()) summary.skipped.push_back(m.name + ": " + why);
      else ++summary.tables;
    } else {
      summary.skipped.push_back(m.name + ": not a cache file");
    }
  }
  for (const auto& [base, pair] : kernels) {
    if (!pair.first || !pair.second) {
      summary.skipped.push_back(base + ": cubin without sidecar or sidecar without cubin");
      continue;
    }
    std::smatch match;
    const std::string cubin_name = base + ".cubin";
    std::regex_match(cubin_name, match, kKernelName);
    const std::string why = verify_entry(pair.first->data, std::string(pair.second->data.begin(), pair.second->data.end()),
                                         match[3], match[1].str());
    if (!why.empty()) {
      summary.skipped.push_back(base + ": " + why);
      continue;
    }
    const std::string path = root + "/" + base;
    if (same_file(path + ".cubin", pair.first->data) && same_file(path + ".json", pair.second->data)) {
      ++summary.already_present;
      continue;
    }
    // under the key's lock, CUBIN first and sidecar last, as a compile stores it
    const DiskCache::Lock lock = cache.lock(match[1].str(), match[3].str());
    if (const std::string why_store = cache.store_files(match[1].str(), match[3].str(), pair.first->data, pair.second->data);
        !why_store.empty())
      fail(Status::cache_error, "cache import: {}", why_store);
    ++summary.kernels;
  }
  return summary;
}

}  // namespace nvfp4::jit::detail
