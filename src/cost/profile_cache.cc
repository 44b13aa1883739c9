// ProfileCache implementation. See profile_cache.h for the guarantees.
//
// Opening a file-backed cache, under an exclusive flock on PATH.lock:
//   1. the file, if present, must be a regular file with the SQLite header; an empty one is
//      unusable, and so is a closed WAL-mode file shorter than its header says (check_file);
//   2. `PRAGMA quick_check` must answer "ok" (SQLITE_CORRUPT / SQLITE_NOTADB also mean unusable);
//   3. a database without tables is initialised; otherwise `meta` must hold our magic and
//      schema version, and every table definition must equal the one this korch creates.
// An unusable file is closed, renamed aside with its side files, and step 1 runs again on the
// now absent file. Any other failure is an environment problem and becomes a korch::Error.
// Each row also carries a checksum of its key and value, verified on lookup.
//
// The three tables (kernels, partition solutions, plan medians) share everything but their
// value columns: a Table<Key, Value> specialisation says how a value is bound, read, checked
// and checksummed, and the lookups, stores, batches and counts are written once over it.
#include "cost/profile_cache.h"

#include <fcntl.h>
#include <pwd.h>
#include <sqlite3.h>
#include <sys/file.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <limits>
#include <map>
#include <thread>
#include <tuple>

#include "util/error.h"

namespace korch {
namespace {

namespace fs = std::filesystem;

constexpr const char* kMagic = "korch-profile-cache";
constexpr int kSchemaVersion = 4;  // 2: schedule column, 3: link_savings column, 4: solutions and plan_times
constexpr int kBusyTimeoutMs = 5000;
constexpr int kLockTimeoutMs = 30000;

// ---- SQLite RAII and error plumbing -------------------------------------------------------

struct DbCloser {
  void operator()(sqlite3* db) const { sqlite3_close_v2(db); }
};
struct StmtFinalizer {
  void operator()(sqlite3_stmt* s) const { sqlite3_finalize(s); }
};
using DbHandle = std::unique_ptr<sqlite3, DbCloser>;
using Stmt = std::unique_ptr<sqlite3_stmt, StmtFinalizer>;

// A failed SQLite call; internal, always caught and turned into a korch::Error or a warning.
struct SqliteFailure {
  int code;  // extended result code
  std::string message;
};

// The file is not a usable cache (damaged or foreign); internal.
struct Unusable {
  std::string reason;
};

// A row whose checksum does not match or whose value does not parse; internal.
struct DamagedRow {
  std::string reason;
};

// The file is a cache of a newer schema; internal.
struct NewerSchema {
  int version;
};

bool is_damage(int code) {
  int primary = code & 0xff;
  return primary == SQLITE_CORRUPT || primary == SQLITE_NOTADB || code == SQLITE_IOERR_SHORT_READ;
}

[[noreturn]] void throw_sqlite(sqlite3* db, int rc, const std::string& what) {
  int code = db ? sqlite3_extended_errcode(db) : rc;
  std::string msg = db ? sqlite3_errmsg(db) : sqlite3_errstr(rc);
  throw SqliteFailure{code, what + ": " + msg};
}

void exec(sqlite3* db, const char* sql, const std::string& what) {
  int rc = sqlite3_exec(db, sql, nullptr, nullptr, nullptr);
  if (rc != SQLITE_OK) throw_sqlite(db, rc, what);
}

Stmt prepare(sqlite3* db, const char* sql, const std::string& what) {
  sqlite3_stmt* raw = nullptr;
  int rc = sqlite3_prepare_v3(db, sql, -1, SQLITE_PREPARE_PERSISTENT, &raw, nullptr);
  Stmt stmt(raw);
  if (rc != SQLITE_OK) throw_sqlite(db, rc, what);
  return stmt;
}

// Resets a statement and clears its bindings at scope exit, so a failed step never leaves it
// holding a read transaction open.
class StmtUse {
 public:
  explicit StmtUse(sqlite3_stmt* s) : s_(s) {}
  ~StmtUse() {
    sqlite3_reset(s_);
    sqlite3_clear_bindings(s_);
  }
  StmtUse(const StmtUse&) = delete;
  StmtUse& operator=(const StmtUse&) = delete;

 private:
  sqlite3_stmt* s_;
};

// true: a row is ready; false: done.
bool step(sqlite3* db, sqlite3_stmt* s, const std::string& what) {
  int rc = sqlite3_step(s);
  if (rc == SQLITE_ROW) return true;
  if (rc == SQLITE_DONE) return false;
  throw_sqlite(db, rc, what);
}

std::string column_text(sqlite3_stmt* s, int i) {
  const unsigned char* p = sqlite3_column_text(s, i);
  return p ? std::string(reinterpret_cast<const char*>(p), sqlite3_column_bytes(s, i)) : std::string();
}

void bind_text(sqlite3* db, sqlite3_stmt* s, int i, const std::string& v) {
  int rc = sqlite3_bind_text64(s, i, v.data(), v.size(), SQLITE_TRANSIENT, SQLITE_UTF8);
  if (rc != SQLITE_OK) throw_sqlite(db, rc, "binding a parameter");
}

std::string hash_hex(uint64_t h) {
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016" PRIx64, h);
  return buf;
}

void bind_double_or_null(sqlite3_stmt* s, int i, double v) {
  if (std::isnan(v)) {
    sqlite3_bind_null(s, i);
  } else {
    sqlite3_bind_double(s, i, v);
  }
}

// FNV-1a over a row's key and value. Stored with each row and checked on lookup, so damage
// inside a row's bytes (which `quick_check` does not look at) reads as a miss, never as a
// wrong value.
class Checksum {
 public:
  void bytes(const void* data, size_t n) {
    const auto* p = static_cast<const unsigned char*>(data);
    for (size_t i = 0; i < n; ++i) h_ = (h_ ^ p[i]) * 0x100000001b3ull;
  }
  void integer(int64_t v) { bytes(&v, sizeof v); }
  void text(const std::string& v) {
    uint64_t n = v.size();
    bytes(&n, sizeof n);
    bytes(v.data(), v.size());
  }
  // As SQLite gives it back: NaN is stored as NULL, -0.0 as the integer 0.
  void real(double v) {
    uint64_t bits = 0;
    if (!std::isnan(v) && v != 0) std::memcpy(&bits, &v, sizeof bits);
    integer(std::isnan(v) ? 1 : 0);
    bytes(&bits, sizeof bits);
  }
  int64_t value() const {
    int64_t out;
    std::memcpy(&out, &h_, sizeof out);
    return out;
  }

 private:
  uint64_t h_ = 0xcbf29ce484222325ull;
};

// ---- Files ---------------------------------------------------------------------------------

// Exclusive flock on a side file, held while a cache file is checked, repaired or created.
class FileLock {
 public:
  explicit FileLock(const std::string& lock_path) {
    fd_ = ::open(lock_path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd_ < 0) {
      fail("cannot create the profile cache lock file ", lock_path, ": ", std::strerror(errno),
           " (is the directory writable? set KORCH_CACHE_DIR to use another one)");
    }
    auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(kLockTimeoutMs);
    while (::flock(fd_, LOCK_EX | LOCK_NB) != 0) {
      int err = errno;
      if (err != EWOULDBLOCK && err != EINTR) {
        ::close(fd_);
        fail("cannot lock the profile cache lock file ", lock_path, ": ", std::strerror(err));
      }
      if (std::chrono::steady_clock::now() > deadline) {
        ::close(fd_);
        fail("timed out after ", kLockTimeoutMs / 1000, " s waiting for the lock on ", lock_path,
             " (another korch process is opening the profile cache)");
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  }
  ~FileLock() { ::close(fd_); }  // closing releases the flock
  FileLock(const FileLock&) = delete;
  FileLock& operator=(const FileLock&) = delete;

 private:
  int fd_ = -1;
};

uint32_t be32(const unsigned char* p) {
  return uint32_t{p[0]} << 24 | uint32_t{p[1]} << 16 | uint32_t{p[2]} << 8 | uint32_t{p[3]};
}

// Throws Unusable for a file that cannot be an SQLite database, korch::Error for one that
// cannot be read. An absent file is fine (it will be created).
//
// For a WAL-mode file without a -wal file, nobody has the database open (a WAL connection
// keeps the -wal file until the last one closes, and korch processes open under our flock), so
// the file is stable and its size must match its header: this catches a cut-off tail, which
// `quick_check` can miss when only cell content (not page structure) is lost.
void check_file(const std::string& path) {
  std::error_code ec;
  fs::file_status st = fs::status(path, ec);
  if (ec && ec != std::errc::no_such_file_or_directory) {
    fail("cannot access the profile cache ", path, ": ", ec.message());
  }
  if (!fs::exists(st)) return;
  if (!fs::is_regular_file(st)) fail("the profile cache path ", path, " exists but is not a regular file");
  std::ifstream in(path, std::ios::binary);
  if (!in) fail("cannot read the profile cache ", path, ": ", std::strerror(errno));
  unsigned char header[100] = {};
  in.read(reinterpret_cast<char*>(header), sizeof header);
  std::streamsize got = in.gcount();
  in.close();
  if (got == 0) throw Unusable{"the file is empty"};
  static const char kSqliteHeader[16] = "SQLite format 3";  // 15 chars + NUL
  if (got < 16 || std::memcmp(header, kSqliteHeader, 16) != 0) {
    throw Unusable{"the file is not an SQLite database"};
  }
  if (got < static_cast<std::streamsize>(sizeof header)) throw Unusable{"the file is truncated inside its header"};
  bool wal_mode = header[18] == 2 && header[19] == 2;
  if (!wal_mode || fs::exists(fs::symlink_status(path + "-wal", ec))) return;
  uint32_t page_size = header[16] << 8 | header[17];
  if (page_size == 1) page_size = 65536;
  if (page_size < 512 || (page_size & (page_size - 1)) != 0) throw Unusable{"the file has an invalid page size"};
  uintmax_t size = fs::file_size(path, ec);
  if (ec) fail("cannot read the size of the profile cache ", path, ": ", ec.message());
  if (size % page_size != 0) {
    throw Unusable{
        str_cat("the file is truncated (", size, " bytes is not a whole number of ", page_size, "-byte pages)")};
  }
  uint32_t pages = be32(header + 28);
  bool pages_valid = pages != 0 && be32(header + 24) == be32(header + 92);
  if (pages_valid && size < uintmax_t{pages} * page_size) {
    throw Unusable{
        str_cat("the file is truncated (", size, " bytes, its header says ", uintmax_t{pages} * page_size, ")")};
  }
}

bool path_taken(const std::string& p) {
  std::error_code ec;
  return fs::exists(fs::symlink_status(p, ec));
}

// Renames `path` (and its -wal/-shm/-journal side files, so a stale journal can never be replayed
// into the new database) to PATH.corrupt-<n>; returns the new name.
std::string move_aside(const std::string& path) {
  static const char* const kSideSuffixes[] = {"-wal", "-shm", "-journal"};
  std::string aside;
  for (int n = 1;; ++n) {
    aside = str_cat(path, ".corrupt-", n);
    bool free = !path_taken(aside);
    for (const char* suffix : kSideSuffixes) free = free && !path_taken(aside + suffix);
    if (free) break;
  }
  std::error_code ec;
  if (path_taken(path)) {
    fs::rename(path, aside, ec);
    if (ec) fail("cannot move the damaged profile cache ", path, " aside to ", aside, ": ", ec.message());
  }
  for (const char* suffix : kSideSuffixes) {
    std::string side = path + suffix;
    if (!path_taken(side)) continue;
    fs::rename(side, aside + suffix, ec);
    if (ec) {
      std::error_code ec2;
      fs::remove(side, ec2);
      if (ec2) fail("cannot move the profile cache side file ", side, " aside: ", ec.message());
    }
  }
  return aside;
}

// ---- Schema --------------------------------------------------------------------------------

constexpr const char* kCreateSchema = R"sql(
CREATE TABLE meta(
  key TEXT PRIMARY KEY NOT NULL,
  value TEXT NOT NULL
) WITHOUT ROWID;
CREATE TABLE profiles(
  structural_hash TEXT NOT NULL,   -- 16 lowercase hex digits
  backend TEXT NOT NULL,
  target TEXT NOT NULL,
  versions TEXT NOT NULL,
  implementable INTEGER NOT NULL,
  verified INTEGER NOT NULL,
  median_seconds REAL,             -- NULL for NaN
  samples INTEGER NOT NULL,
  description TEXT NOT NULL,
  schedule INTEGER NOT NULL,       -- the fastest schedule variant (what median_seconds is for)
  link_savings TEXT NOT NULL,      -- encode_link_savings(): layout conversions a link saves
  checksum INTEGER NOT NULL,       -- row_checksum() of the key and the entry, as int64 bits
  stored_at INTEGER NOT NULL,      -- unix seconds
  PRIMARY KEY(structural_hash, backend, target, versions)
) WITHOUT ROWID;
CREATE TABLE solutions(
  partition_hash TEXT NOT NULL,    -- 16 lowercase hex digits
  backend TEXT NOT NULL,
  target TEXT NOT NULL,
  versions TEXT NOT NULL,
  sets TEXT NOT NULL,              -- encode_solution_sets(): the chosen kernels' primitive offsets
  proven_optimal INTEGER NOT NULL, -- 0 or 1
  checksum INTEGER NOT NULL,
  stored_at INTEGER NOT NULL,
  PRIMARY KEY(partition_hash, backend, target, versions)
) WITHOUT ROWID;
CREATE TABLE plan_times(
  plan_hash TEXT NOT NULL,         -- 16 lowercase hex digits
  backend TEXT NOT NULL,
  target TEXT NOT NULL,
  versions TEXT NOT NULL,
  median_seconds REAL NOT NULL,
  rounds INTEGER NOT NULL,
  checksum INTEGER NOT NULL,
  stored_at INTEGER NOT NULL,
  PRIMARY KEY(plan_hash, backend, target, versions)
) WITHOUT ROWID;
)sql";

// A table's prepared statements. lookup: ?1-?4 the key; columns: checksum, then the value's.
// upsert: ?1-?4 the key, ?5 the checksum, ?6... the value's columns.
struct TableStmts {
  Stmt lookup, upsert, count;
};

}  // namespace

struct ProfileCache::Db {
  DbHandle handle;
  TableStmts profiles, solutions, plan_times;
  Stmt begin, commit, rollback;
  sqlite3* get() const { return handle.get(); }
};

struct ProfileCache::Rows {
  std::tuple<std::map<ProfileKey, ProfileEntry>, std::map<SolutionKey, StoredSolution>, std::map<PlanKey, PlanTiming>>
      tables;

  template <class Key, class Value>
  std::map<Key, Value>& of() {
    return std::get<std::map<Key, Value>>(tables);
  }
  size_t size() const {
    return std::apply([](const auto&... t) { return (t.size() + ...); }, tables);
  }
};

namespace {

// ---- Tables --------------------------------------------------------------------------------

// What one table stores: its name and value columns (after the four key columns), where its
// statements are, and how a value is checked before a store, bound, read back (DamagedRow when
// it does not parse) and checksummed.
template <class Key, class Value>
struct Table;

template <>
struct Table<ProfileKey, ProfileEntry> {
  static constexpr const char* kName = "profiles";
  static constexpr const char* kHashColumn = "structural_hash";
  static constexpr const char* kValueColumns =
      "implementable, verified, median_seconds, samples, description, schedule, link_savings";
  static constexpr const char* kRow = "entry for kernel";
  static TableStmts& stmts(ProfileCache::Db& d) { return d.profiles; }
  static uint64_t hash(const ProfileKey& k) { return k.structural_hash; }

  static void check(const ProfileKey& k, const ProfileEntry& e) {
    if (e.implementable && e.verified && !(std::isfinite(e.median_seconds) && e.median_seconds >= 0)) {
      fail("profile cache: refusing to store a verified measurement with an invalid time (", e.median_seconds,
           " s) for kernel ", hash_hex(k.structural_hash));
    }
    for (double v : e.link_savings)
      if (!std::isfinite(v))
        fail("profile cache: refusing to store an invalid layout-link saving (", v, " s) for kernel ",
             hash_hex(k.structural_hash));
    if (e.samples < 0) {
      fail("profile cache: refusing to store a negative sample count for kernel ", hash_hex(k.structural_hash));
    }
  }
  static void bind(sqlite3* db, sqlite3_stmt* s, int i, const ProfileEntry& e) {
    sqlite3_bind_int(s, i, e.implementable ? 1 : 0);
    sqlite3_bind_int(s, i + 1, e.verified ? 1 : 0);
    bind_double_or_null(s, i + 2, e.median_seconds);
    sqlite3_bind_int(s, i + 3, e.samples);
    bind_text(db, s, i + 4, e.description);
    sqlite3_bind_int(s, i + 5, e.schedule);
    bind_text(db, s, i + 6, encode_link_savings(e.link_savings));
  }
  static ProfileEntry read(sqlite3_stmt* s, int i) {
    ProfileEntry e;
    e.implementable = sqlite3_column_int64(s, i) != 0;
    e.verified = sqlite3_column_int64(s, i + 1) != 0;
    e.median_seconds = sqlite3_column_type(s, i + 2) == SQLITE_NULL ? std::numeric_limits<double>::quiet_NaN()
                                                                    : sqlite3_column_double(s, i + 2);
    e.samples = sqlite3_column_int(s, i + 3);
    e.description = column_text(s, i + 4);
    e.schedule = sqlite3_column_int(s, i + 5);
    std::optional<std::vector<double>> links = decode_link_savings(column_text(s, i + 6));
    if (!links) throw DamagedRow{"unreadable link_savings"};
    e.link_savings = std::move(*links);
    return e;
  }
  static void sum(Checksum& c, const ProfileEntry& e) {
    c.integer((e.implementable ? 1 : 0) | (e.verified ? 2 : 0));
    c.real(e.median_seconds);
    c.integer(e.samples);
    c.text(e.description);
    c.integer(e.schedule);
    c.text(encode_link_savings(e.link_savings));
  }
};

template <>
struct Table<SolutionKey, StoredSolution> {
  static constexpr const char* kName = "solutions";
  static constexpr const char* kHashColumn = "partition_hash";
  static constexpr const char* kValueColumns = "sets, proven_optimal";
  static constexpr const char* kRow = "solution for partition";
  static TableStmts& stmts(ProfileCache::Db& d) { return d.solutions; }
  static uint64_t hash(const SolutionKey& k) { return k.partition_hash; }

  static void check(const SolutionKey& k, const StoredSolution& v) {
    auto refuse = [&](const char* why) {
      fail("profile cache: refusing to store a solution with ", why, " for partition ", hash_hex(k.partition_hash));
    };
    if (v.sets.empty()) refuse("no kernels");
    for (const std::vector<int>& set : v.sets) {
      if (set.empty()) refuse("an empty kernel");
      for (int offset : set)
        if (offset < 0) refuse("a negative primitive offset");
    }
  }
  static void bind(sqlite3* db, sqlite3_stmt* s, int i, const StoredSolution& v) {
    bind_text(db, s, i, encode_solution_sets(v.sets));
    sqlite3_bind_int(s, i + 1, v.proven_optimal ? 1 : 0);
  }
  static StoredSolution read(sqlite3_stmt* s, int i) {
    StoredSolution v;
    std::optional<std::vector<std::vector<int>>> sets =
        sqlite3_column_type(s, i) == SQLITE_TEXT ? decode_solution_sets(column_text(s, i)) : std::nullopt;
    if (!sets) throw DamagedRow{"unreadable sets"};
    v.sets = std::move(*sets);
    int64_t proven = sqlite3_column_int64(s, i + 1);
    if (sqlite3_column_type(s, i + 1) != SQLITE_INTEGER || (proven != 0 && proven != 1)) {
      throw DamagedRow{"unreadable proven_optimal"};
    }
    v.proven_optimal = proven == 1;
    return v;
  }
  static void sum(Checksum& c, const StoredSolution& v) {
    c.text(encode_solution_sets(v.sets));
    c.integer(v.proven_optimal ? 1 : 0);
  }
};

template <>
struct Table<PlanKey, PlanTiming> {
  static constexpr const char* kName = "plan_times";
  static constexpr const char* kHashColumn = "plan_hash";
  static constexpr const char* kValueColumns = "median_seconds, rounds";
  static constexpr const char* kRow = "median for plan";
  static TableStmts& stmts(ProfileCache::Db& d) { return d.plan_times; }
  static uint64_t hash(const PlanKey& k) { return k.plan_hash; }

  static bool valid(const PlanTiming& v) {
    return std::isfinite(v.median_seconds) && v.median_seconds >= 0 && v.rounds >= 1;
  }
  static void check(const PlanKey& k, const PlanTiming& v) {
    if (!valid(v)) {
      fail("profile cache: refusing to store an invalid plan median (", v.median_seconds, " s over ", v.rounds,
           " rounds) for plan ", hash_hex(k.plan_hash));
    }
  }
  static void bind(sqlite3* /*db*/, sqlite3_stmt* s, int i, const PlanTiming& v) {
    sqlite3_bind_double(s, i, v.median_seconds);
    sqlite3_bind_int(s, i + 1, v.rounds);
  }
  static PlanTiming read(sqlite3_stmt* s, int i) {
    int median_type = sqlite3_column_type(s, i);
    int64_t rounds = sqlite3_column_int64(s, i + 1);
    if ((median_type != SQLITE_FLOAT && median_type != SQLITE_INTEGER) ||
        sqlite3_column_type(s, i + 1) != SQLITE_INTEGER || rounds > std::numeric_limits<int>::max()) {
      throw DamagedRow{"unreadable median_seconds or rounds"};
    }
    PlanTiming v{sqlite3_column_double(s, i), static_cast<int>(rounds)};
    if (!valid(v)) throw DamagedRow{"invalid median_seconds or rounds"};
    return v;
  }
  static void sum(Checksum& c, const PlanTiming& v) {
    c.real(v.median_seconds);
    c.integer(v.rounds);
  }
};

template <class Key>
void bind_key(sqlite3* db, sqlite3_stmt* s, uint64_t hash, const Key& k) {
  bind_text(db, s, 1, hash_hex(hash));
  bind_text(db, s, 2, k.backend);
  bind_text(db, s, 3, k.target);
  bind_text(db, s, 4, k.versions);
}

template <class Key, class Value>
int64_t row_checksum(const Key& k, const Value& v) {
  using T = Table<Key, Value>;
  Checksum c;
  uint64_t hash = T::hash(k);
  c.bytes(&hash, sizeof hash);
  c.text(k.backend);
  c.text(k.target);
  c.text(k.versions);
  T::sum(c, v);
  return c.value();
}

template <class Key, class Value>
void prepare_table(sqlite3* db, TableStmts& t) {
  using T = Table<Key, Value>;
  std::string values = T::kValueColumns;
  std::string params;
  for (int i = 0, n = 1 + static_cast<int>(std::count(values.begin(), values.end(), ',')); i < n; ++i) {
    params += str_cat(", ?", 6 + i);
  }
  t.lookup = prepare(db,
                     str_cat("SELECT checksum, ", values, " FROM ", T::kName, " WHERE ", T::kHashColumn,
                             " = ?1 AND backend = ?2 AND target = ?3 AND versions = ?4")
                         .c_str(),
                     "preparing a lookup");
  t.upsert = prepare(
      db,
      str_cat("INSERT OR REPLACE INTO ", T::kName, "(", T::kHashColumn, ", backend, target, versions, checksum, ",
              values, ", stored_at) VALUES(?1, ?2, ?3, ?4, ?5", params, ", CAST(strftime('%s', 'now') AS INTEGER))")
          .c_str(),
      "preparing a store");
  t.count = prepare(db, str_cat("SELECT count(*) FROM ", T::kName).c_str(), "preparing a count");
}

// The stored row for `key`, or nullopt. Throws DamagedRow or SqliteFailure.
template <class Key, class Value>
std::optional<Value> read_row(ProfileCache::Db& d, const Key& key) {
  using T = Table<Key, Value>;
  sqlite3* db = d.get();
  sqlite3_stmt* s = T::stmts(d).lookup.get();
  StmtUse use(s);
  bind_key(db, s, T::hash(key), key);
  if (!step(db, s, str_cat("looking up the ", T::kRow, " ", hash_hex(T::hash(key))))) return std::nullopt;
  Value v = T::read(s, 1);
  if (sqlite3_column_type(s, 0) != SQLITE_INTEGER || sqlite3_column_int64(s, 0) != row_checksum(key, v)) {
    throw DamagedRow{"checksum mismatch"};
  }
  return v;
}

template <class Key, class Value>
void write_table(ProfileCache::Db& d, const std::map<Key, Value>& rows) {
  using T = Table<Key, Value>;
  sqlite3* db = d.get();
  sqlite3_stmt* s = T::stmts(d).upsert.get();
  for (const auto& [key, v] : rows) {
    StmtUse use(s);
    bind_key(db, s, T::hash(key), key);
    sqlite3_bind_int64(s, 5, row_checksum(key, v));
    T::bind(db, s, 6, v);
    step(db, s, str_cat("storing the ", T::kRow, " ", hash_hex(T::hash(key))));
  }
}

// Rows in the table of `pending`'s type, counting those of `pending` whose key is not stored.
template <class Key, class Value>
int64_t count_rows(ProfileCache::Db& d, const std::map<Key, Value>& pending) {
  sqlite3_stmt* s = Table<Key, Value>::stmts(d).count.get();
  int64_t n = 0;
  {
    StmtUse use(s);
    if (step(d.get(), s, "counting rows")) n = sqlite3_column_int64(s, 0);
  }
  for (const auto& [key, v] : pending) {
    bool present = true;  // a damaged row is still a row
    try {
      present = read_row<Key, Value>(d, key).has_value();
    } catch (const DamagedRow&) {
    }
    if (!present) ++n;
  }
  return n;
}

void create_schema(sqlite3* db) {
  exec(db, "BEGIN IMMEDIATE", "starting the schema transaction");
  try {
    // Checked again inside the write transaction, in case another writer got there first.
    Stmt n = prepare(db, "SELECT count(*) FROM sqlite_schema", "reading the schema");
    step(db, n.get(), "reading the schema");
    bool empty = sqlite3_column_int64(n.get(), 0) == 0;
    n.reset();
    if (empty) {
      exec(db, kCreateSchema, "creating the tables");
      std::string meta = str_cat("INSERT INTO meta(key, value) VALUES('magic', '", kMagic, "'), ('schema_version', '",
                                 kSchemaVersion, "')");
      exec(db, meta.c_str(), "writing the meta table");
    }
    exec(db, "COMMIT", "committing the schema");
  } catch (...) {
    sqlite3_exec(db, "ROLLBACK", nullptr, nullptr, nullptr);
    throw;
  }
}

// Every table/index definition in `db` except SQLite's own, one per line, as SQLite stored it.
std::string schema_listing(sqlite3* db) {
  Stmt q = prepare(db,
                   "SELECT type, name, tbl_name, sql FROM sqlite_schema WHERE name NOT LIKE 'sqlite\\_%' ESCAPE '\\' "
                   "ORDER BY type, name",
                   "reading the schema");
  std::string out;
  while (step(db, q.get(), "reading the schema")) {
    for (int i = 0; i < 4; ++i) out += column_text(q.get(), i) + (i < 3 ? "|" : "\n");
  }
  return out;
}

DbHandle open_handle(const std::string& path);

// The listing of a database freshly created by this korch.
const std::string& expected_schema_listing() {
  static const std::string listing = [] {
    DbHandle db = open_handle(":memory:");
    create_schema(db.get());
    return schema_listing(db.get());
  }();
  return listing;
}

// Throws Unusable when `db` is not a korch profile cache of our schema, NewerSchema for a newer
// one. Prepare errors here mean a foreign layout, not an environment problem.
void check_schema(sqlite3* db) {
  auto foreign = [&](const std::string& why) { throw Unusable{"not a korch profile cache: " + why}; };
  Stmt has_meta;
  try {
    has_meta =
        prepare(db, "SELECT count(*) FROM sqlite_schema WHERE type = 'table' AND name = 'meta'", "reading the schema");
  } catch (const SqliteFailure& f) {
    if ((f.code & 0xff) == SQLITE_ERROR) foreign(f.message);
    throw;
  }
  step(db, has_meta.get(), "reading the schema");
  if (sqlite3_column_int64(has_meta.get(), 0) == 0) foreign("it has no meta table");
  has_meta.reset();

  std::optional<std::string> magic, version;
  try {
    Stmt q =
        prepare(db, "SELECT key, value FROM meta WHERE key IN ('magic', 'schema_version')", "reading the meta table");
    while (step(db, q.get(), "reading the meta table")) {
      std::string k = column_text(q.get(), 0);
      (k == "magic" ? magic : version) = column_text(q.get(), 1);
    }
  } catch (const SqliteFailure& f) {
    if ((f.code & 0xff) == SQLITE_ERROR) foreign("unexpected meta table: " + f.message);
    throw;
  }
  if (magic != std::string(kMagic)) foreign("its meta table has no korch magic string");
  int v = 0;
  try {
    size_t used = 0;
    v = version ? std::stoi(*version, &used) : -1;
    if (version && used != version->size()) v = -1;
  } catch (const std::exception&) {
    v = -1;
  }
  if (v <= 0) throw Unusable{"its schema version is missing or invalid"};
  if (v < kSchemaVersion)
    throw Unusable{str_cat("it has the old schema version ", v, " (this korch uses ", kSchemaVersion, ")")};
  if (v > kSchemaVersion) throw NewerSchema{v};
  if (schema_listing(db) != expected_schema_listing()) {
    throw Unusable{str_cat("its tables differ from the schema version ", kSchemaVersion, " layout")};
  }
}

void prepare_statements(ProfileCache::Db& d) {
  sqlite3* db = d.get();
  prepare_table<ProfileKey, ProfileEntry>(db, d.profiles);
  prepare_table<SolutionKey, StoredSolution>(db, d.solutions);
  prepare_table<PlanKey, PlanTiming>(db, d.plan_times);
  d.begin = prepare(db, "BEGIN IMMEDIATE", "preparing BEGIN");
  d.commit = prepare(db, "COMMIT", "preparing COMMIT");
  d.rollback = prepare(db, "ROLLBACK", "preparing ROLLBACK");
}

DbHandle open_handle(const std::string& path) {
  sqlite3* raw = nullptr;
  int rc =
      sqlite3_open_v2(path.c_str(), &raw, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX, nullptr);
  DbHandle db(raw);
  if (rc != SQLITE_OK) throw_sqlite(raw, rc, "opening");
  sqlite3_extended_result_codes(raw, 1);
  sqlite3_busy_timeout(raw, kBusyTimeoutMs);
  return db;
}

std::unique_ptr<ProfileCache::Db> open_memory() {
  auto d = std::make_unique<ProfileCache::Db>();
  d->handle = open_handle(":memory:");
  create_schema(d->get());
  prepare_statements(*d);
  return d;
}

// One attempt at opening an existing-or-absent file. Throws Unusable, NewerSchema,
// SqliteFailure or korch::Error; the connection is closed before any of them propagates.
std::unique_ptr<ProfileCache::Db> open_file(const std::string& path) {
  check_file(path);
  auto d = std::make_unique<ProfileCache::Db>();
  d->handle = open_handle(path);
  sqlite3* db = d->get();
  try {
    Stmt check = prepare(db, "PRAGMA quick_check", "checking integrity");
    std::string first;
    int problems = 0;
    while (step(db, check.get(), "checking integrity")) {
      if (problems++ == 0) first = column_text(check.get(), 0);
    }
    if (first != "ok") {
      throw Unusable{
          str_cat("integrity check failed: ", first, problems > 1 ? str_cat(" (and ", problems - 1, " more)") : "")};
    }
  } catch (const SqliteFailure& f) {
    if (is_damage(f.code)) throw Unusable{f.message};
    throw;
  }
  if (sqlite3_db_readonly(db, "main") == 1) fail("the profile cache ", path, " is read-only");
  try {
    Stmt tables = prepare(db, "SELECT count(*) FROM sqlite_schema", "reading the schema");
    step(db, tables.get(), "reading the schema");
    bool fresh = sqlite3_column_int64(tables.get(), 0) == 0;
    tables.reset();
    if (fresh) {
      create_schema(db);
      // WAL lets readers proceed while another process writes. It is persistent; where the file
      // system cannot do it (network file systems) SQLite stays in rollback mode, also correct.
      sqlite3_exec(db, "PRAGMA journal_mode=WAL", nullptr, nullptr, nullptr);
    }
    check_schema(db);
    try {
      prepare_statements(*d);
    } catch (const SqliteFailure& f) {
      if ((f.code & 0xff) == SQLITE_ERROR) throw Unusable{"its tables do not match: " + f.message};
      throw;
    }
    exec(db, "PRAGMA synchronous=NORMAL", "setting synchronous mode");
  } catch (const SqliteFailure& f) {
    if (is_damage(f.code)) throw Unusable{f.message};
    throw;
  }
  return d;
}

}  // namespace

ProfileCache::ProfileCache(const std::string& path, WarnFn warn)
    : path_(path), warn_(std::move(warn)), pending_(std::make_unique<Rows>()) {
  if (path.empty()) fail("the profile cache path is empty");
  try {
    if (path == ":memory:") {
      db_ = open_memory();
      return;
    }
    fs::path dir = fs::path(path).parent_path();
    if (!dir.empty()) {
      std::error_code ec;
      fs::create_directories(dir, ec);
      if (ec) {
        fail("cannot create the profile cache directory ", dir.string(), ": ", ec.message(),
             " (set KORCH_CACHE_DIR to use another one)");
      }
    }
    FileLock lock(path + ".lock");
    for (int attempt = 0;; ++attempt) {
      try {
        db_ = open_file(path);
        return;
      } catch (const Unusable& u) {
        // A second failure means the freshly created file is unusable: not a damaged cache.
        if (attempt > 0) fail("cannot create a profile cache at ", path, ": ", u.reason);
        std::string aside = move_aside(path);
        this->warn(str_cat("the profile cache ", path, " is unusable (", u.reason, "); moved it to ", aside,
                           " and started a new cache"));
      } catch (const NewerSchema& n) {
        this->warn(str_cat("the profile cache ", path, " was written by a newer korch (schema version ", n.version,
                           ", this korch uses ", kSchemaVersion,
                           "); leaving it alone and using an in-memory cache for this run"));
        path_ = ":memory:";
        db_ = open_memory();
        return;
      }
    }
  } catch (const SqliteFailure& f) {
    fail("cannot open the profile cache ", path, ": ", f.message);
  }
}

ProfileCache::~ProfileCache() {
  std::lock_guard<std::mutex> lock(mu_);
  if (pending_->size() == 0 || !db_) return;
  try {
    try {
      write_rows(*pending_);
    } catch (const std::exception& e) {
      warn(str_cat("profile cache ", path_, ": a pending batch of ", pending_->size(),
                   " entries was not saved: ", e.what()));
    }
  } catch (...) {  // a throwing warn callback must not terminate the program
  }
}

std::string encode_link_savings(const std::vector<double>& savings) {
  std::string text;
  char buf[40];
  for (double v : savings) {
    std::snprintf(buf, sizeof buf, "%.17g", v);
    text += (text.empty() ? "" : " ") + std::string(buf);
  }
  return text;
}

std::optional<std::vector<double>> decode_link_savings(const std::string& text) {
  std::vector<double> savings;
  const char* p = text.c_str();
  while (*p) {
    if (*p == ' ' && !savings.empty()) ++p;
    char* end = nullptr;
    double v = std::strtod(p, &end);
    if (end == p || !std::isfinite(v)) return std::nullopt;
    savings.push_back(v);
    p = end;
  }
  return savings;
}

std::string encode_solution_sets(const std::vector<std::vector<int>>& sets) {
  std::string text;
  for (size_t k = 0; k < sets.size(); ++k) {
    if (k) text += ';';
    for (size_t i = 0; i < sets[k].size(); ++i) text += str_cat(i ? "," : "", sets[k][i]);
  }
  return text;
}

std::optional<std::vector<std::vector<int>>> decode_solution_sets(const std::string& text) {
  std::vector<std::vector<int>> sets(1);
  size_t i = 0;
  while (true) {
    // One offset: "0" or a digit 1-9 followed by digits, at most INT_MAX.
    size_t start = i;
    int64_t value = 0;
    while (i < text.size() && text[i] >= '0' && text[i] <= '9') {
      value = value * 10 + (text[i++] - '0');
      if (value > std::numeric_limits<int>::max()) return std::nullopt;
    }
    if (i == start || (text[start] == '0' && i - start > 1)) return std::nullopt;
    sets.back().push_back(static_cast<int>(value));
    if (i == text.size()) return sets;
    if (text[i] == ';') {
      sets.emplace_back();
    } else if (text[i] != ',') {
      return std::nullopt;
    }
    ++i;
  }
}

std::string ProfileCache::default_path() {
  auto set = [](const char* name) -> const char* {
    const char* v = std::getenv(name);
    return v && *v ? v : nullptr;
  };
  if (const char* d = set("KORCH_CACHE_DIR")) return (fs::path(d) / "profiles.sqlite").string();
  if (const char* x = set("XDG_CACHE_HOME"); x && x[0] == '/') {  // the XDG spec ignores relative paths
    return (fs::path(x) / "korch" / "profiles.sqlite").string();
  }
  std::string home;
  if (const char* h = set("HOME")) {
    home = h;
  } else if (const passwd* pw = ::getpwuid(::getuid()); pw && pw->pw_dir && *pw->pw_dir) {
    home = pw->pw_dir;
  } else {
    fail("cannot find a directory for the profile cache: set KORCH_CACHE_DIR");
  }
  return (fs::path(home) / ".cache" / "korch" / "profiles.sqlite").string();
}

void ProfileCache::warn(const std::string& message) const {
  if (warn_) {
    warn_(message);
  } else {
    std::cerr << "korch: warning: " << message << std::endl;
  }
}

template <class Key, class Value>
std::optional<Value> ProfileCache::lookup_row(const Key& key) {
  using T = Table<Key, Value>;
  std::lock_guard<std::mutex> lock(mu_);
  const std::map<Key, Value>& pending = pending_->of<Key, Value>();
  if (auto it = pending.find(key); it != pending.end()) {
    ++hits_;
    return it->second;
  }
  std::optional<Value> v = [&]() -> std::optional<Value> {
    try {
      return read_row<Key, Value>(*db_, key);
    } catch (const DamagedRow& d) {
      warn(str_cat("profile cache ", path_, ": the ", T::kRow, " ", hash_hex(T::hash(key)), " is damaged (", d.reason,
                   "); treating it as a miss"));
    } catch (const SqliteFailure& f) {
      if (!is_damage(f.code)) fail("profile cache ", path_, ": ", f.message);
      warn(str_cat("profile cache ", path_, " is damaged (", f.message,
                   "); treating the lookup as a miss (the file is checked again when next opened)"));
    }
    return std::nullopt;
  }();
  ++(v ? hits_ : misses_);
  return v;
}

template <class Key, class Value>
void ProfileCache::store_row(const Key& key, const Value& value) {
  Table<Key, Value>::check(key, value);
  std::lock_guard<std::mutex> lock(mu_);
  if (batch_depth_ > 0) {
    pending_->of<Key, Value>()[key] = value;
    return;
  }
  Rows one;
  one.of<Key, Value>().emplace(key, value);
  write_rows(one);
}

std::optional<ProfileEntry> ProfileCache::lookup(const ProfileKey& key) {
  return lookup_row<ProfileKey, ProfileEntry>(key);
}

void ProfileCache::store(const ProfileKey& key, const ProfileEntry& entry) { store_row(key, entry); }

std::optional<StoredSolution> ProfileCache::lookup_solution(const SolutionKey& key) {
  return lookup_row<SolutionKey, StoredSolution>(key);
}

void ProfileCache::store_solution(const SolutionKey& key, const StoredSolution& solution) { store_row(key, solution); }

std::optional<PlanTiming> ProfileCache::lookup_plan_time(const PlanKey& key) {
  return lookup_row<PlanKey, PlanTiming>(key);
}

void ProfileCache::store_plan_time(const PlanKey& key, const PlanTiming& timing) { store_row(key, timing); }

void ProfileCache::write_rows(const Rows& rows) {
  sqlite3* db = db_->get();
  size_t count = rows.size();
  bool many = count > 1;
  try {
    if (many) {
      StmtUse use(db_->begin.get());
      step(db, db_->begin.get(), "starting a transaction");
    }
    try {
      std::apply([&](const auto&... table) { (write_table(*db_, table), ...); }, rows.tables);
      if (many) {
        StmtUse use(db_->commit.get());
        step(db, db_->commit.get(), "committing");
      }
    } catch (...) {
      if (many && !sqlite3_get_autocommit(db)) {
        StmtUse use(db_->rollback.get());
        sqlite3_step(db_->rollback.get());
      }
      throw;
    }
  } catch (const SqliteFailure& f) {
    if (is_damage(f.code)) {
      warn(str_cat("profile cache ", path_, " is damaged (", f.message, "); ", count,
                   " entries were not saved (the file is checked again when next opened)"));
      return;
    }
    if ((f.code & 0xff) == SQLITE_BUSY) {
      fail("profile cache ", path_, " stayed locked by another process for more than ", kBusyTimeoutMs / 1000,
           " s: ", f.message);
    }
    fail("profile cache ", path_, ": ", f.message);
  }
}

void ProfileCache::begin_batch() {
  std::lock_guard<std::mutex> lock(mu_);
  ++batch_depth_;
}

void ProfileCache::commit_batch() {
  std::lock_guard<std::mutex> lock(mu_);
  if (batch_depth_ == 0) fail("profile cache: commit_batch() without begin_batch()");
  if (--batch_depth_ > 0) return;
  Rows rows;
  std::swap(rows, *pending_);  // on failure the batch is dropped, not retried by the destructor
  if (rows.size() > 0) write_rows(rows);
}

int64_t ProfileCache::size() {
  std::lock_guard<std::mutex> lock(mu_);
  try {
    int64_t n = 0;
    std::apply([&](const auto&... pending) { ((n += count_rows(*db_, pending)), ...); }, pending_->tables);
    return n;
  } catch (const SqliteFailure& f) {
    fail("profile cache ", path_, ": ", f.message);
  }
}

int ProfileCache::hits() const {
  std::lock_guard<std::mutex> lock(mu_);
  return hits_;
}

int ProfileCache::misses() const {
  std::lock_guard<std::mutex> lock(mu_);
  return misses_;
}

std::string ProfileCache::path() const {
  std::lock_guard<std::mutex> lock(mu_);
  return path_;
}

}  // namespace korch
