// ProfileCache: a persistent SQLite cache of what korch measured on a machine, in three tables:
//  - kernel measurements (and the backend's refusals), keyed by (structural hash, backend, target,
//    versions): lookup() / store();
//  - partition solutions (the kernels a BLP solve chose), keyed by (partition hash, backend,
//    target, versions): lookup_solution() / store_solution();
//  - end-to-end plan medians (the plan race's), keyed by (plan hash, backend, target, versions):
//    lookup_plan_time() / store_plan_time().
//
// Guarantees (for every table):
//  - A lookup returns exactly what was stored under the same four-part key, or nothing; the
//    tables are separate, so equal keys in two of them never meet.
//    Hashes are stored as 16-digit hex text, so all 64 bits count (no signed-int64 overflow).
//  - Opening never crashes and never serves rows from a damaged or foreign file: a file that
//    is not SQLite, is empty or truncated, fails `PRAGMA quick_check`, or lacks our `meta`
//    magic / schema version / exact table layout (all three tables) is renamed aside to
//    PATH.corrupt-<n> (with its -wal/-shm/-journal files), a warning goes to `warn` (stderr by
//    default), and a fresh cache is built in its place. A cache of an *older* korch schema is
//    one of these: it is renamed aside (its rows stay readable there) and a fresh cache is
//    built; nothing is migrated. Each row carries a checksum of its key and value; a row
//    damaged later (or edited by hand), or whose stored value does not parse, reads as a miss
//    with a warning, never as a wrong value.
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

struct SolutionKey {
  uint64_t partition_hash = 0;  // the partition's structure, required outputs and kernel-size bound
  std::string backend;          // "cpu"
  std::string target;
  std::string versions;

  auto tie() const { return std::tie(partition_hash, backend, target, versions); }
  bool operator<(const SolutionKey& o) const { return tie() < o.tie(); }
  bool operator==(const SolutionKey& o) const { return tie() == o.tie(); }
};

// A partition's solution: the chosen kernels' primitive sets as offsets into the partition's
// primitives, so that a later run replays the choice instead of solving again.
struct StoredSolution {
  std::vector<std::vector<int>> sets;  // each non-empty, offsets >= 0
  bool proven_optimal = false;         // the solver proved it optimal
};

// StoredSolution::sets as stored in the cache: offsets in decimal, "," between the offsets of
// a set and ";" between sets ("0,1,2;3;4,5"). Decoding is strict: it gives nullopt for
// anything encode_solution_sets() does not write (no sets, an empty set, signs, spaces,
// leading zeros, an offset past INT_MAX).
std::string encode_solution_sets(const std::vector<std::vector<int>>& sets);
std::optional<std::vector<std::vector<int>>> decode_solution_sets(const std::string& text);

struct PlanKey {
  uint64_t plan_hash = 0;  // the graph and the plan's kernels and schedules (plan_hash())
  std::string backend;     // "cpu"
  std::string target;
  std::string versions;

  auto tie() const { return std::tie(plan_hash, backend, target, versions); }
  bool operator<(const PlanKey& o) const { return tie() < o.tie(); }
  bool operator==(const PlanKey& o) const { return tie() == o.tie(); }
};

// A plan timed end to end.
struct PlanTiming {
  double median_seconds = 0;  // finite, >= 0
  int rounds = 0;             // timed runs the median is of, >= 1
};

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

  // Every lookup counts a hit or a miss. Rows stored in a pending batch are visible. A damaged
  // row is a miss (with a warning); an environment failure throws korch::Error.
  // Every store is an upsert and rejects (korch::Error) a value that would poison later runs.
  //
  // Kernels. store() rejects an implementable && verified entry whose median is not a finite
  // non-negative number, a non-finite link saving, or a negative sample count.
  std::optional<ProfileEntry> lookup(const ProfileKey& key);
  void store(const ProfileKey& key, const ProfileEntry& entry);
  // Partition solutions. store_solution() rejects a solution without sets, an empty set or a
  // negative offset.
  std::optional<StoredSolution> lookup_solution(const SolutionKey& key);
  void store_solution(const SolutionKey& key, const StoredSolution& solution);
  // Plan medians. store_plan_time() rejects a median that is not a finite non-negative number,
  // or fewer than one round.
  std::optional<PlanTiming> lookup_plan_time(const PlanKey& key);
  void store_plan_time(const PlanKey& key, const PlanTiming& timing);

  // Between begin_batch() and commit_batch(), stores (to any table) are kept in memory and then
  // written in one transaction. Batches nest; the outermost commit_batch() writes.
  void begin_batch();
  void commit_batch();

  int64_t size();  // rows stored in all tables, counting pending batch rows with new keys
  int hits() const;
  int misses() const;
  std::string path() const;  // the file in use, or ":memory:" (also after a newer-schema fallback)

  struct Db;    // SQLite connection + prepared statements (defined in the .cc)
  struct Rows;  // rows of every table, by key (defined in the .cc)

 private:
  template <class Key, class Value>
  std::optional<Value> lookup_row(const Key& key);
  template <class Key, class Value>
  void store_row(const Key& key, const Value& value);
  void write_rows(const Rows& rows);
  void warn(const std::string& message) const;

  std::string path_;
  WarnFn warn_;
  std::unique_ptr<Db> db_;
  mutable std::mutex mu_;
  int hits_ = 0;
  int misses_ = 0;
  int batch_depth_ = 0;
  std::unique_ptr<Rows> pending_;  // the open batch's rows
};

}  // namespace korch
