// ProfileCache: a persistent SQLite cache of measured kernel costs (and of the backend's
// refusals), keyed by (structural hash, backend, target, versions).
//
// Guarantees:
//  - A lookup returns exactly what was stored under the same four-part key, or nothing.
//    Hashes are stored as 16-digit hex text, so all 64 bits count (no signed-int64 overflow).
//  - Opening never crashes and never serves rows from a damaged or foreign file: a file that
//    is not SQLite, is empty or truncated, fails `PRAGMA quick_check`, or lacks our `meta`
//    magic / schema version / exact table layout is renamed aside to PATH.corrupt-<n> (with
//    its -wal/-shm/-journal files), a warning goes to `warn` (stderr by default), and a fresh
//    cache is built in its place. Each row carries a checksum of its key and entry; a row
//    damaged later (or edited by hand) reads as a miss with a warning, never as a wrong entry.
//    A cache written by a *newer* korch schema is left alone; this run then uses an in-memory
//    cache (with a warning) instead of destroying the other version's results.
//  - Environment problems (directory not creatable/writable, file unreadable, disk full,
//    lock held too long) throw korch::Error with the path and the reason.
//  - Several korch processes may share one file: opening/repairing is serialised by an
//    flock on PATH.lock, the database uses WAL mode and a 5 s busy timeout, and a batch is
//    buffered in memory and written in one short transaction at commit_batch(), so no write
//    lock is held while kernels are being profiled.
//  - ":memory:" gives a private, non-persistent cache (no files, no lock).
//  - One object may be used from several threads (calls are serialised by a mutex).
#pragma once
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

namespace korch {

struct ProfileKey {
  uint64_t structural_hash = 0;  // kernel structure incl. shapes/attrs
  std::string backend;           // "cpu"
  std::string target;            // e.g. "x86-64 avx512f 2 threads" (thread count matters)
  std::string versions;          // e.g. "halide14 onednn2.6.3 korch0.1"

  auto tie() const { return std::tie(structural_hash, backend, target, versions); }
  bool operator<(const ProfileKey& o) const { return tie() < o.tie(); }
  bool operator==(const ProfileKey& o) const { return tie() == o.tie(); }
};

struct ProfileEntry {
  bool implementable = false;  // false: backend cannot make it one kernel (the refusal is cached)
  bool verified = false;       // matched the reference executor
  double median_seconds = 0;   // valid when implementable && verified (NaN round-trips)
  int samples = 0;
  std::string description;  // backend/schedule description or the reason it was dropped
  int schedule = 0;         // the schedule variant median_seconds was measured with (the fastest)
  // Seconds of median_seconds spent converting activations between the dense layout and the
  // backend's internal one, saved when a neighbouring kernel hands the tensor over in that
  // layout (layout linking): [0] the output, [1 + i] input i (Kernel::inputs order); negative
  // where that tensor has no internal layout. Empty when the kernel converts nothing.
  std::vector<double> link_savings;
};

// link_savings as stored in the cache ("%.17g" numbers separated by spaces) and back; a text
// that does not parse gives nullopt.
std::string encode_link_savings(const std::vector<double>& savings);
std::optional<std::vector<double>> decode_link_savings(const std::string& text);

class ProfileCache {
 public:
  using WarnFn = std::function<void(const std::string&)>;

  // Opens (creating the file and its parent directories if needed) the SQLite cache at `path`,
  // or a private in-memory cache for ":memory:". See the header comment for what happens with a
  // damaged file. Throws korch::Error when the cache cannot be created or opened at all.
  explicit ProfileCache(const std::string& path, WarnFn warn = {});
  ~ProfileCache();  // commits a pending batch (best effort, failures become warnings)
  ProfileCache(const ProfileCache&) = delete;
  ProfileCache& operator=(const ProfileCache&) = delete;

  // $KORCH_CACHE_DIR/profiles.sqlite, else $XDG_CACHE_HOME/korch/profiles.sqlite, else
  // $HOME/.cache/korch/profiles.sqlite (empty or relative variables are ignored).
  static std::string default_path();

  // Counts a hit or a miss. Entries stored in a pending batch are visible. A damaged row is a
  // miss (with a warning); an environment failure throws korch::Error.
  std::optional<ProfileEntry> lookup(const ProfileKey& key);
  // Upsert. Rejects (korch::Error) an implementable && verified entry whose median is not a
  // finite non-negative number, or a negative sample count: such a row would poison later runs.
  void store(const ProfileKey& key, const ProfileEntry& entry);

  // Between begin_batch() and commit_batch(), stores are kept in memory and then written in
  // one transaction. Batches nest; the outermost commit_batch() writes.
  void begin_batch();
  void commit_batch();

  int64_t size();  // rows stored, counting pending batch entries with new keys
  int hits() const;
  int misses() const;
  std::string path() const;  // the file in use, or ":memory:" (also after a newer-schema fallback)

  struct Db;  // SQLite connection + prepared statements (defined in the .cc)

 private:
  std::optional<ProfileEntry> lookup_db(const ProfileKey& key);
  void write_rows(const std::map<ProfileKey, ProfileEntry>& rows);
  void warn(const std::string& message) const;

  std::string path_;
  WarnFn warn_;
  std::unique_ptr<Db> db_;
  mutable std::mutex mu_;
  int hits_ = 0;
  int misses_ = 0;
  int batch_depth_ = 0;
  std::map<ProfileKey, ProfileEntry> pending_;
};

}  // namespace korch
