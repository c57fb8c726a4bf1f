// Tuned tile choices, remembered per GPU model in the cache root:
//
//   <root>/v2/tuning/<arch>-<device name>-<SM count>.json
//
// One entry per (problem, M bucket): the tuned kernel's spec (the op's fields, as its sidecar
// writes them, with what the tuner chose) and its time; the problem, the table's key, is that
// spec less what the tuner chose (OpKernels::tuned_problem). The file records
// the library, NVRTC and driver versions it was tuned with; a file from other versions is
// ignored (with a note) because its timings no longer describe these kernels. Writers merge
// under a lock file, so processes tuning at once lose none of each other's entries.
#pragma once
#include <cstdint>
#include <mutex>
#include <optional>
#include <shared_mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/spec.hpp"

namespace nvfp4::jit::detail {

struct TuningEntry {
  KernelSpec tuned;  // the problem with the tile the tuner chose
  int m_bucket = 0;
  double us = 0, heuristic_us = 0;
  // `tuned` less what the tuner chose: the table's key. Throws Error(internal) for an op without
  // tuned kernels.
  KernelSpec problem() const;
};

// The versions a table is valid for.
struct TuningVersions {
  std::string library, nvrtc;
  int driver = 0;
  static TuningVersions current();
  bool operator==(const TuningVersions&) const = default;
};

// A table file read back: its header's device and its entries.
struct TuningFile {
  Arch arch = Arch::sm_90a;
  std::string device_name;
  int sm_count = 0;
  std::vector<TuningEntry> entries;
  std::vector<std::string> refused;  // "entries[3]: tile.block_m = 65544 is out of range (1 to 256)", one an entry left out
};

// The most SMs a table's header may count (a GPU has a few hundred at most).
inline constexpr int kMaxSmCount = 1024;

class TuningTable {
 public:
  // "sm_90a-NVIDIA_H100_80GB_HBM3-132.json": the device name with anything but [A-Za-z0-9.-] as '_'.
  static std::string file_name(Arch arch, const std::string& device_name, int sm_count);

  // Reads `path` (a missing file is an empty table; one from other versions, one that is not
  // a regular file or is over kMaxTableBytes, a line that does not parse, or an entry that
  // tuning_entry_problem refuses, is skipped with a note in notes()).
  TuningTable(std::string path, Arch arch, std::string device_name, int sm_count,
              TuningVersions versions = TuningVersions::current());

  // The tuned spec of `problem`'s bucket, if any.
  std::optional<KernelSpec> find(const KernelSpec& problem, int m_bucket) const;
  std::vector<TuningEntry> entries() const;
  // Adds or replaces entries here and in the file: lock, re-read, merge, write atomically.
  // Returns "" or why the file could not be written (the entries still apply in this process).
  std::string record(const std::vector<TuningEntry>& entries);

  // Adds or replaces entries in this process only.
  void merge(const std::vector<TuningEntry>& entries);

  const std::string& path() const { return path_; }
  std::vector<std::string> notes() const;

  // The serialized form (exposed for the tests).
  static std::string to_text(const std::vector<TuningEntry>& entries, Arch arch, const std::string& device_name,
                             int sm_count, const TuningVersions& versions);
  // `text` read as a table of `versions` (and of `file_arch`, where given): nullopt, with the
  // reason in `note`, when its header is not one (another format or versions, a field missing,
  // out of range or given twice, another arch). Every field is range-checked before it is
  // narrowed; an entry with a field missing, out of range or given twice, or of another arch than
  // the header's, is left out (in `refused`, counted in `note`).
  static std::optional<TuningFile> parse_file(const std::string& text, const TuningVersions& versions, std::string* note,
                                              std::optional<Arch> file_arch = std::nullopt);
  // parse_file's entries, or none.
  static std::vector<TuningEntry> parse(const std::string& text, const TuningVersions& versions, std::string* note,
                                        std::optional<Arch> file_arch = std::nullopt);

 private:
  // `entries` less those tuning_entry_problem refuses, counted in `note`.
  std::vector<TuningEntry> runnable(std::vector<TuningEntry> entries, std::string* note) const;

  struct Key {
    KernelSpec problem;
    int m_bucket;
    bool operator==(const Key& o) const { return problem == o.problem && m_bucket == o.m_bucket; }
  };
  struct KeyHash {
    size_t operator()(const Key& k) const noexcept { return KernelSpecHash{}(k.problem) * 31 + size_t(k.m_bucket); }
  };
  std::string path_, device_name_;
  Arch arch_;
  int sm_count_;
  TuningVersions versions_;
  mutable std::shared_mutex mutex_;
  std::unordered_map<Key, TuningEntry, KeyHash> table_;
  std::vector<std::string> notes_;
};

// Why an entry (of a table for `arch`) is not one its op can run: an op without tuned kernels,
// an M bucket that does not exist, a tile outside what the kernel supports (empty: it is fine).
// Checked before a shipped table's entries are written (cache import).
std::string tuning_entry_problem(const TuningEntry& entry, Arch arch);

// The table of the current device, from the primary cache root (entries of read-only roots
// first, the primary's override them). Loaded once per device and process.
TuningTable& tuning_table_for(int device_ordinal, Arch arch, const std::string& device_name, int sm_count);

}  // namespace nvfp4::jit::detail
