// Tests of the persistent profile cache: round trips, key separation (incl. hashes >= 2^63),
// persistence, counters, refusals, batches, damaged/foreign files, errors and concurrency; the
// partition-solution and plan-median tables alike.
#include "cost/profile_cache.h"

#include <gtest/gtest.h>
#include <sqlite3.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>
#include <thread>
#include <vector>

#include "cost/profiler.h"
#include "util/error.h"

namespace korch {
namespace {

namespace fs = std::filesystem;

ProfileKey key(uint64_t hash, std::string backend = "cpu", std::string target = "x86-64 avx512f 2 threads",
               std::string versions = "halide14 onednn2.6.3 korch0.1") {
  return ProfileKey{hash, std::move(backend), std::move(target), std::move(versions)};
}

ProfileEntry measured(double seconds, std::string description = "halide: tile 32x8, vectorize 16") {
  return ProfileEntry{true, true, seconds, 11, std::move(description), 0, {}};
}

SolutionKey solution_key(uint64_t hash, std::string backend = "cpu", std::string target = "x86-64 avx512f 2 threads",
                         std::string versions = "halide14 onednn2.6.3 korch0.1") {
  return SolutionKey{hash, std::move(backend), std::move(target), std::move(versions)};
}

PlanKey plan_key(uint64_t hash, std::string backend = "cpu", std::string target = "x86-64 avx512f 2 threads",
                 std::string versions = "halide14 onednn2.6.3 korch0.1") {
  return PlanKey{hash, std::move(backend), std::move(target), std::move(versions)};
}

StoredSolution solution(std::vector<std::vector<int>> sets, bool proven_optimal = true) {
  return StoredSolution{std::move(sets), proven_optimal};
}

std::string read_all(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

void write_all(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

// Runs SQL on a file with plain SQLite (to build foreign databases or tamper with a cache).
void sql(const std::string& path, const std::string& statements) {
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
  char* err = nullptr;
  int rc = sqlite3_exec(db, statements.c_str(), nullptr, nullptr, &err);
  std::string msg = err ? err : "";
  sqlite3_free(err);
  sqlite3_close(db);
  ASSERT_EQ(rc, SQLITE_OK) << msg;
}

class ProfileCacheTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl = (fs::temp_directory_path() / "korch_pcache_XXXXXX").string();
    ASSERT_NE(::mkdtemp(tmpl.data()), nullptr);
    dir_ = tmpl;
    path_ = (fs::path(dir_) / "profiles.sqlite").string();
  }
  void TearDown() override {
    std::error_code ec;
    fs::permissions(dir_, fs::perms::owner_all, fs::perm_options::add, ec);
    fs::remove_all(dir_, ec);
  }

  ProfileCache::WarnFn collect() {
    return [this](const std::string& m) { warnings_.push_back(m); };
  }

  // The damaged-file scenario shared by the corruption tests: opening warns once, moves the file
  // to PATH.corrupt-1 with its bytes intact, and the new cache works and persists.
  void expect_rebuilt(const std::string& original_bytes) {
    warnings_.clear();
    {
      ProfileCache cache(path_, collect());
      ASSERT_EQ(warnings_.size(), 1u);
      EXPECT_NE(warnings_[0].find(path_), std::string::npos) << warnings_[0];
      EXPECT_NE(warnings_[0].find(path_ + ".corrupt-1"), std::string::npos) << warnings_[0];
      EXPECT_EQ(cache.size(), 0);
      EXPECT_FALSE(cache.lookup(key(1)));
      cache.store(key(1), measured(2e-3));
      EXPECT_EQ(cache.lookup(key(1))->median_seconds, 2e-3);
    }
    ASSERT_TRUE(fs::exists(path_ + ".corrupt-1"));
    EXPECT_EQ(read_all(path_ + ".corrupt-1"), original_bytes);
    warnings_.clear();
    ProfileCache again(path_, collect());
    EXPECT_TRUE(warnings_.empty()) << warnings_[0];
    EXPECT_EQ(again.size(), 1);
    EXPECT_EQ(again.lookup(key(1))->median_seconds, 2e-3);
  }

  // A cache file holding kernel 1 and partition 1 whose meta table claims schema `version`;
  // returns its bytes.
  std::string cache_of_schema_version(const std::string& version) {
    {
      ProfileCache cache(path_);
      cache.store(key(1), measured(1.0));
      cache.store_solution(SolutionKey{1, "cpu", "t", "v"}, StoredSolution{{{0}}, true});
    }
    sql(path_, "UPDATE meta SET value = '" + version + "' WHERE key = 'schema_version';");
    return read_all(path_);
  }

  std::string dir_, path_;
  std::vector<std::string> warnings_;
};

TEST_F(ProfileCacheTest, StoreLookupRoundTrip) {
  ProfileCache cache(path_, collect());
  EXPECT_EQ(cache.path(), path_);
  ProfileEntry e{true, true, 1.25e-4, 17, "onednn: matmul 'gemm' \"avx512\" \xce\xbc-kernel", 2, {1.0 / 3, -1, 2.5e-6}};
  cache.store(key(42), e);
  auto got = cache.lookup(key(42));
  ASSERT_TRUE(got);
  EXPECT_TRUE(got->implementable);
  EXPECT_TRUE(got->verified);
  EXPECT_EQ(got->median_seconds, 1.25e-4);
  EXPECT_EQ(got->samples, 17);
  EXPECT_EQ(got->description, e.description);
  EXPECT_EQ(got->schedule, 2);
  EXPECT_EQ(got->link_savings, e.link_savings);  // bit-exact through the text column
  EXPECT_EQ(cache.size(), 1);
  EXPECT_TRUE(warnings_.empty());
}

TEST(LinkSavingsText, RoundTripsAndRejectsGarbage) {
  std::vector<double> v = {0.1, -1, 1e-300, 12345.678};
  EXPECT_EQ(decode_link_savings(encode_link_savings(v)), v);
  EXPECT_EQ(decode_link_savings(""), std::vector<double>{});
  EXPECT_FALSE(decode_link_savings("0.5 x"));
  EXPECT_FALSE(decode_link_savings("nan"));
  EXPECT_FALSE(decode_link_savings("1 inf"));
}

TEST_F(ProfileCacheTest, StoreIsAnUpsert) {
  ProfileCache cache(path_);
  cache.store(key(7), measured(1.0));
  cache.store(key(7), measured(0.5, "retuned"));
  EXPECT_EQ(cache.size(), 1);
  EXPECT_EQ(cache.lookup(key(7))->median_seconds, 0.5);
  EXPECT_EQ(cache.lookup(key(7))->description, "retuned");
}

TEST_F(ProfileCacheTest, EveryKeyPartSeparatesEntries) {
  ProfileCache cache(path_);
  const uint64_t big = 0xFFFFFFFFFFFFFFF0ull;  // > 2^63
  cache.store(key(big), measured(1.0));
  cache.store(key(0x8000000000000000ull), measured(2.0));
  EXPECT_EQ(cache.lookup(key(big))->median_seconds, 1.0);
  EXPECT_EQ(cache.lookup(key(0x8000000000000000ull))->median_seconds, 2.0);
  EXPECT_FALSE(cache.lookup(key(big & 0x7FFFFFFFFFFFFFFFull)));  // same low 63 bits
  EXPECT_FALSE(cache.lookup(key(0)));
  EXPECT_FALSE(cache.lookup(key(big + 1)));
  EXPECT_FALSE(cache.lookup(key(big, "gpu")));
  EXPECT_FALSE(cache.lookup(key(big, "cpu", "x86-64 avx512f 4 threads")));
  EXPECT_FALSE(cache.lookup(key(big, "cpu", "x86-64 avx512f 2 threads", "halide15 onednn2.6.3 korch0.1")));
  EXPECT_FALSE(cache.lookup(key(big, "", "", "")));
  EXPECT_EQ(cache.size(), 2);
}

TEST_F(ProfileCacheTest, PersistsAcrossReopen) {
  const uint64_t big = 0xDEADBEEFCAFEF00Dull;
  {
    ProfileCache cache(path_);
    cache.store(key(big), measured(3.5e-6));
    cache.store(key(5), ProfileEntry{false, false, std::nan(""), 0, "reduce over a transposed axis", 0, {}});
  }
  ProfileCache cache(path_, collect());
  EXPECT_TRUE(warnings_.empty());
  EXPECT_EQ(cache.size(), 2);
  EXPECT_EQ(cache.lookup(key(big))->median_seconds, 3.5e-6);
  EXPECT_FALSE(cache.lookup(key(5))->implementable);
}

TEST_F(ProfileCacheTest, HitAndMissCounters) {
  ProfileCache cache(path_);
  EXPECT_EQ(cache.hits(), 0);
  EXPECT_EQ(cache.misses(), 0);
  EXPECT_FALSE(cache.lookup(key(1)));
  cache.store(key(1), measured(1e-3));
  EXPECT_TRUE(cache.lookup(key(1)));
  EXPECT_TRUE(cache.lookup(key(1)));
  EXPECT_FALSE(cache.lookup(key(2)));
  EXPECT_EQ(cache.hits(), 2);
  EXPECT_EQ(cache.misses(), 2);
}

TEST_F(ProfileCacheTest, RefusalsAndFailedVerificationAreCached) {
  {
    ProfileCache cache(path_);
    cache.store(key(1), ProfileEntry{false, false, std::nan(""), 0, "cpu backend: gather with a dynamic index", 0, {}});
    cache.store(key(2),
                ProfileEntry{true, false, 4e-3, 5, "halide: output differs from reference (max err 0.3)", 0, {}});
  }
  ProfileCache cache(path_);
  auto refused = cache.lookup(key(1));
  ASSERT_TRUE(refused);
  EXPECT_FALSE(refused->implementable);
  EXPECT_FALSE(refused->verified);
  EXPECT_TRUE(std::isnan(refused->median_seconds));
  EXPECT_EQ(refused->description, "cpu backend: gather with a dynamic index");
  auto wrong = cache.lookup(key(2));
  ASSERT_TRUE(wrong);
  EXPECT_TRUE(wrong->implementable);
  EXPECT_FALSE(wrong->verified);
  EXPECT_EQ(cache.hits(), 2);
}

TEST_F(ProfileCacheTest, RejectsInvalidMeasurements) {
  ProfileCache cache(path_);
  EXPECT_THROW(cache.store(key(1), measured(std::nan(""))), Error);
  EXPECT_THROW(cache.store(key(1), measured(-1.0)), Error);
  EXPECT_THROW(cache.store(key(1), measured(INFINITY)), Error);
  EXPECT_THROW(cache.store(key(1), ProfileEntry{true, true, 1.0, -3, "", 0, {}}), Error);
  EXPECT_EQ(cache.size(), 0);
}

TEST_F(ProfileCacheTest, BatchWritesOnCommitAndIsVisibleBefore) {
  ProfileCache cache(path_);
  ProfileCache other(path_);  // a second connection, as another process would have
  cache.store(key(0), measured(1.0));
  cache.begin_batch();
  for (uint64_t i = 1; i <= 500; ++i) cache.store(key(i * 0x9E3779B97F4A7C15ull), measured(i * 1e-6));
  cache.store(key(0), measured(0.25));  // overwrite an existing row inside the batch
  EXPECT_EQ(cache.lookup(key(7 * 0x9E3779B97F4A7C15ull))->median_seconds, 7e-6);
  EXPECT_EQ(cache.lookup(key(0))->median_seconds, 0.25);
  EXPECT_EQ(cache.size(), 501);
  EXPECT_EQ(other.size(), 1);            // nothing written yet, no lock held
  other.store(key(999), measured(9.0));  // another writer is not blocked by the open batch
  cache.commit_batch();
  EXPECT_EQ(other.size(), 502);
  EXPECT_EQ(other.lookup(key(0))->median_seconds, 0.25);
  EXPECT_EQ(other.lookup(key(500 * 0x9E3779B97F4A7C15ull))->median_seconds, 500e-6);
  EXPECT_THROW(cache.commit_batch(), Error);
}

TEST_F(ProfileCacheTest, BatchesNestAndTheDestructorFlushes) {
  {
    ProfileCache cache(path_);
    cache.begin_batch();
    cache.begin_batch();
    cache.store(key(1), measured(1.0));
    cache.commit_batch();  // inner: nothing written yet
    EXPECT_EQ(ProfileCache(path_).size(), 0);
    cache.store(key(2), measured(2.0));
    // Destroyed with the outer batch still open: the measurements are kept.
  }
  ProfileCache cache(path_);
  EXPECT_EQ(cache.size(), 2);
}

TEST_F(ProfileCacheTest, InMemoryCache) {
  ProfileCache cache(":memory:");
  cache.store(key(~0ull), measured(1.0));
  EXPECT_EQ(cache.lookup(key(~0ull))->median_seconds, 1.0);
  EXPECT_EQ(cache.path(), ":memory:");
  EXPECT_TRUE(fs::is_empty(dir_));
  EXPECT_EQ(ProfileCache(":memory:").size(), 0);  // private to each object
}

TEST_F(ProfileCacheTest, CreatesParentDirectories) {
  std::string nested = (fs::path(dir_) / "a" / "b" / "profiles.sqlite").string();
  ProfileCache cache(nested);
  cache.store(key(1), measured(1.0));
  EXPECT_TRUE(fs::is_regular_file(nested));
}

TEST_F(ProfileCacheTest, RandomBytesAreMovedAside) {
  std::mt19937 rng(1234);
  std::string bytes(8192, '\0');
  for (char& c : bytes) c = static_cast<char>(rng());
  write_all(path_, bytes);
  expect_rebuilt(bytes);
}

TEST_F(ProfileCacheTest, EmptyFileIsMovedAside) {
  write_all(path_, "");
  expect_rebuilt("");
}

TEST_F(ProfileCacheTest, UnrelatedSqliteDatabaseIsMovedAside) {
  sql(path_, "CREATE TABLE users(id INTEGER PRIMARY KEY, name TEXT); INSERT INTO users VALUES(1, 'ada');");
  std::string bytes = read_all(path_);
  expect_rebuilt(bytes);
  // The foreign data is intact in the moved file.
  sql(path_ + ".corrupt-1", "SELECT name FROM users;");
}

TEST_F(ProfileCacheTest, ForeignMetaTablesAreMovedAside) {
  sql(path_, "CREATE TABLE meta(id INTEGER, blob BLOB);");
  {
    ProfileCache cache(path_, collect());
    ASSERT_EQ(warnings_.size(), 1u);
  }
  sql(path_, "DELETE FROM meta WHERE key = 'magic'; INSERT INTO meta VALUES('magic', 'some-other-tool');");
  warnings_.clear();
  {
    ProfileCache cache(path_, collect());
    ASSERT_EQ(warnings_.size(), 1u);
    EXPECT_NE(warnings_[0].find("magic"), std::string::npos) << warnings_[0];
    EXPECT_NE(warnings_[0].find(".corrupt-2"), std::string::npos) << warnings_[0];
  }
  sql(path_, "UPDATE meta SET value = 'x' WHERE key = 'schema_version';");
  warnings_.clear();
  {
    ProfileCache cache(path_, collect());
    ASSERT_EQ(warnings_.size(), 1u);
    EXPECT_NE(warnings_[0].find("schema version"), std::string::npos) << warnings_[0];
  }
  // Right magic and version, same column names, but no primary key: upserts would duplicate.
  sql(path_,
      "DROP TABLE profiles; CREATE TABLE profiles(structural_hash TEXT, backend TEXT, target TEXT, versions TEXT, "
      "implementable INTEGER, verified INTEGER, median_seconds REAL, samples INTEGER, description TEXT, "
      "checksum INTEGER, stored_at INTEGER);");
  warnings_.clear();
  {
    ProfileCache cache(path_, collect());
    ASSERT_EQ(warnings_.size(), 1u);
    EXPECT_NE(warnings_[0].find("tables differ"), std::string::npos) << warnings_[0];
  }
  sql(path_, "CREATE TABLE extra(x);");
  warnings_.clear();
  ProfileCache cache(path_, collect());
  ASSERT_EQ(warnings_.size(), 1u);
  EXPECT_TRUE(fs::exists(path_ + ".corrupt-5"));
  cache.store(key(1), measured(1.0));
  EXPECT_TRUE(cache.lookup(key(1)));
}

TEST_F(ProfileCacheTest, NewerSchemaIsLeftAloneAndMemoryIsUsed) {
  std::string bytes = cache_of_schema_version("99");
  {
    ProfileCache cache(path_, collect());
    ASSERT_EQ(warnings_.size(), 1u);
    EXPECT_NE(warnings_[0].find("newer"), std::string::npos) << warnings_[0];
    EXPECT_EQ(cache.path(), ":memory:");
    EXPECT_FALSE(cache.lookup(key(1)));
    EXPECT_FALSE(cache.lookup_solution(SolutionKey{1, "cpu", "t", "v"}));
    cache.store(key(2), measured(2.0));
    cache.store_solution(SolutionKey{2, "cpu", "t", "v"}, StoredSolution{{{0}}, true});
    cache.store_plan_time(PlanKey{2, "cpu", "t", "v"}, PlanTiming{1.0, 3});
    EXPECT_TRUE(cache.lookup(key(2)));
    EXPECT_TRUE(cache.lookup_solution(SolutionKey{2, "cpu", "t", "v"}));
    EXPECT_TRUE(cache.lookup_plan_time(PlanKey{2, "cpu", "t", "v"}));
  }
  EXPECT_EQ(read_all(path_), bytes);
  EXPECT_FALSE(fs::exists(path_ + ".corrupt-1"));
}

TEST_F(ProfileCacheTest, TruncatedCacheIsMovedAside) {
  {
    ProfileCache cache(path_);
    cache.begin_batch();
    for (uint64_t i = 0; i < 3000; ++i) {
      cache.store(key(i * 0x9E3779B97F4A7C15ull), measured(i * 1e-6, std::string(100, 'a' + i % 26)));
    }
    cache.commit_batch();
  }
  ASSERT_FALSE(fs::exists(path_ + "-wal"));  // checkpointed on close: everything is in the file
  auto full = fs::file_size(path_);
  ASSERT_GT(full, 100000u);
  std::string whole = read_all(path_);
  fs::resize_file(path_, full / 2);
  expect_rebuilt(read_all(path_));

  // Other cut points, on and off page boundaries, down to losing only the last byte.
  for (size_t cut : {size_t{100}, size_t{4096}, full / 10, full / 3 + 17, full * 9 / 10, full - 4096, full - 1}) {
    SCOPED_TRACE(cut);
    fs::remove(path_);
    fs::remove(path_ + ".corrupt-1");
    write_all(path_, whole.substr(0, cut));
    expect_rebuilt(whole.substr(0, cut));
  }
}

TEST_F(ProfileCacheTest, PageDamageIsDetected) {
  {
    ProfileCache cache(path_);
    cache.begin_batch();
    for (uint64_t i = 0; i < 3000; ++i) cache.store(key(i), measured(i * 1e-6, std::string(100, 'x')));
    cache.commit_batch();
  }
  std::string bytes = read_all(path_);
  // Scribble over the middle of the file (page headers and cell pointers included).
  for (size_t i = bytes.size() / 2; i < bytes.size() / 2 + 3000; ++i) bytes[i] = static_cast<char>(i * 7);
  write_all(path_, bytes);
  expect_rebuilt(bytes);
}

TEST_F(ProfileCacheTest, DamagedRowsReadAsMisses) {
  {
    ProfileCache cache(path_);
    cache.store(key(1), measured(1e-3));
    cache.store(key(2), measured(2e-3));
    cache.store(key(3), measured(3e-3));
  }
  // Row content changed behind the cache's back: structurally valid, so only the row checksum
  // can tell.
  sql(path_,
      "UPDATE profiles SET median_seconds = 5e-9 WHERE structural_hash = '0000000000000001';"
      "UPDATE profiles SET backend = 'cpu' WHERE structural_hash = '0000000000000002';"  // unchanged
      "UPDATE profiles SET target = 'x86-64 avx512f 8 threads' WHERE structural_hash = '0000000000000003';");
  ProfileCache cache(path_, collect());
  EXPECT_TRUE(warnings_.empty());
  EXPECT_FALSE(cache.lookup(key(1)));
  ASSERT_EQ(warnings_.size(), 1u);
  EXPECT_NE(warnings_[0].find("checksum"), std::string::npos) << warnings_[0];
  EXPECT_EQ(cache.lookup(key(2))->median_seconds, 2e-3);
  EXPECT_FALSE(cache.lookup(key(3, "cpu", "x86-64 avx512f 8 threads")));  // moved to another key
  EXPECT_EQ(cache.hits(), 1);
  EXPECT_EQ(cache.misses(), 2);
  EXPECT_EQ(cache.size(), 3);
  cache.store(key(1), measured(1.5e-3));  // re-measuring repairs the row
  EXPECT_EQ(cache.lookup(key(1))->median_seconds, 1.5e-3);
}

TEST_F(ProfileCacheTest, StaleJournalFilesMoveWithTheDamagedFile) {
  write_all(path_, "not a database at all, just text");
  write_all(path_ + "-wal", "stale wal");
  write_all(path_ + "-journal", "stale journal");
  {
    ProfileCache cache(path_, collect());
    ASSERT_EQ(warnings_.size(), 1u);
    cache.store(key(1), measured(1.0));
  }
  EXPECT_EQ(read_all(path_ + ".corrupt-1-wal"), "stale wal");
  EXPECT_EQ(read_all(path_ + ".corrupt-1-journal"), "stale journal");
  EXPECT_FALSE(fs::exists(path_ + "-journal"));
  EXPECT_EQ(ProfileCache(path_).size(), 1);
}

TEST_F(ProfileCacheTest, DefaultWarningGoesToStderr) {
  write_all(path_, "garbage");
  ::testing::internal::CaptureStderr();
  { ProfileCache cache(path_); }
  std::string err = ::testing::internal::GetCapturedStderr();
  EXPECT_NE(err.find("warning"), std::string::npos) << err;
  EXPECT_NE(err.find(".corrupt-1"), std::string::npos) << err;
}

TEST_F(ProfileCacheTest, UnwritableLocationIsAClearError) {
  write_all((fs::path(dir_) / "file").string(), "x");
  std::string under_file = (fs::path(dir_) / "file" / "sub" / "profiles.sqlite").string();
  try {
    ProfileCache cache(under_file);
    FAIL() << "expected korch::Error";
  } catch (const Error& e) {
    std::string msg = e.what();
    EXPECT_NE(msg.find("cannot create the profile cache directory"), std::string::npos) << msg;
    EXPECT_NE(msg.find((fs::path(dir_) / "file" / "sub").string()), std::string::npos) << msg;
  }
  // A directory as the cache path is an error too, not "corruption" to move aside.
  fs::create_directory(path_);
  EXPECT_THROW(ProfileCache{path_}, Error);
  EXPECT_TRUE(fs::is_directory(path_));
  EXPECT_THROW(ProfileCache{""}, Error);
}

TEST_F(ProfileCacheTest, ReadOnlyDirectoryIsAClearError) {
  if (::geteuid() == 0) GTEST_SKIP() << "root ignores directory permissions";
  std::string ro = (fs::path(dir_) / "ro").string();
  fs::create_directory(ro);
  fs::permissions(ro, fs::perms::owner_read | fs::perms::owner_exec);
  try {
    ProfileCache cache((fs::path(ro) / "profiles.sqlite").string());
    FAIL() << "expected korch::Error";
  } catch (const Error& e) {
    std::string msg = e.what();
    EXPECT_NE(msg.find(ro), std::string::npos) << msg;
    EXPECT_NE(msg.find("writable"), std::string::npos) << msg;
  }
  fs::permissions(ro, fs::perms::owner_all);
}

TEST_F(ProfileCacheTest, DefaultPathFollowsTheEnvironment) {
  struct Saved {
    const char* name;
    std::optional<std::string> value;
  };
  std::vector<Saved> saved;
  for (const char* n : {"KORCH_CACHE_DIR", "XDG_CACHE_HOME", "HOME"}) {
    const char* v = std::getenv(n);
    saved.push_back({n, v ? std::optional<std::string>(v) : std::nullopt});
  }
  ::setenv("KORCH_CACHE_DIR", "/k", 1);
  ::setenv("XDG_CACHE_HOME", "/x", 1);
  ::setenv("HOME", "/h", 1);
  EXPECT_EQ(ProfileCache::default_path(), "/k/profiles.sqlite");
  ::setenv("KORCH_CACHE_DIR", "", 1);
  EXPECT_EQ(ProfileCache::default_path(), "/x/korch/profiles.sqlite");
  ::unsetenv("KORCH_CACHE_DIR");
  ::setenv("XDG_CACHE_HOME", "relative", 1);
  EXPECT_EQ(ProfileCache::default_path(), "/h/.cache/korch/profiles.sqlite");
  ::unsetenv("XDG_CACHE_HOME");
  EXPECT_EQ(ProfileCache::default_path(), "/h/.cache/korch/profiles.sqlite");
  for (const Saved& s : saved) {
    if (s.value) {
      ::setenv(s.name, s.value->c_str(), 1);
    } else {
      ::unsetenv(s.name);
    }
  }
}

TEST_F(ProfileCacheTest, ConcurrentOpensOfANewFileAgree) {
  std::vector<std::thread> threads;
  std::vector<std::vector<std::string>> warnings(8);
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&, t] {
      ProfileCache cache(path_, [&warnings, t](const std::string& m) { warnings[t].push_back(m); });
      cache.store(key(t), measured(t + 1.0));
    });
  }
  for (auto& th : threads) th.join();
  for (const auto& w : warnings) EXPECT_TRUE(w.empty()) << w[0];
  EXPECT_EQ(ProfileCache(path_).size(), 8);
  EXPECT_FALSE(fs::exists(path_ + ".corrupt-1"));
}

TEST_F(ProfileCacheTest, SeveralProcessesShareOneFile) {
  constexpr int kProcs = 4, kRows = 200;
  std::vector<pid_t> kids;
  for (int p = 0; p < kProcs; ++p) {
    pid_t pid = ::fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      int rc = 0;
      try {
        ProfileCache cache(path_, [&](const std::string&) { rc = 3; });
        for (int i = 0; i < kRows; ++i) {
          if (i % 50 == 0) cache.begin_batch();
          cache.store(key(static_cast<uint64_t>(p) << 32 | i), measured(i * 1e-6));
          if (i % 50 == 49) cache.commit_batch();
          cache.lookup(key(static_cast<uint64_t>((p + 1) % kProcs) << 32 | i));
        }
      } catch (...) {
        rc = 2;
      }
      ::_exit(rc);
    }
    kids.push_back(pid);
  }
  for (pid_t pid : kids) {
    int status = 0;
    ASSERT_EQ(::waitpid(pid, &status, 0), pid);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
  }
  ProfileCache cache(path_);
  EXPECT_EQ(cache.size(), kProcs * kRows);
  EXPECT_EQ(cache.lookup(key(uint64_t{3} << 32 | 199))->median_seconds, 199 * 1e-6);
}

TEST(SolutionSetsText, RoundTripsAndIsStrict) {
  std::vector<std::vector<int>> sets = {{0, 1, 2}, {3}, {4, 5}, {2147483647}};
  EXPECT_EQ(encode_solution_sets(sets), "0,1,2;3;4,5;2147483647");
  EXPECT_EQ(decode_solution_sets(encode_solution_sets(sets)), sets);
  EXPECT_EQ(decode_solution_sets("7"), (std::vector<std::vector<int>>{{7}}));
  for (const char* text : {"",     ";",    ",",   "1;", ";1", "1,", "1,,2", "1;;2",       "a",
                           "1 ,2", " 1",   "1\n", "-1", "+1", "01", "0,00", "2147483648", "99999999999999999999",
                           "1|0",  "1;2;x"}) {
    EXPECT_FALSE(decode_solution_sets(text)) << text;
  }
}

TEST_F(ProfileCacheTest, SolutionsAndPlanTimesRoundTripAndPersist) {
  const uint64_t big = 0xFEDCBA9876543210ull;  // > 2^63
  {
    ProfileCache cache(path_, collect());
    EXPECT_FALSE(cache.lookup_solution(solution_key(big)));
    EXPECT_FALSE(cache.lookup_plan_time(plan_key(big)));
    cache.store_solution(solution_key(big), solution({{0, 1, 2}, {3}, {4, 5}}, true));
    cache.store_solution(solution_key(5), solution({{1, 0}}, false));  // order within a set is kept
    cache.store_plan_time(plan_key(big), PlanTiming{1.0 / 3, 25});
    cache.store_plan_time(plan_key(6), PlanTiming{0.0, 1});
    auto got = cache.lookup_solution(solution_key(big));
    ASSERT_TRUE(got);
    EXPECT_EQ(got->sets, (std::vector<std::vector<int>>{{0, 1, 2}, {3}, {4, 5}}));
    EXPECT_TRUE(got->proven_optimal);
    EXPECT_EQ(cache.hits(), 1);
    EXPECT_EQ(cache.misses(), 2);
    // Upserts.
    cache.store_solution(solution_key(big), solution({{0, 1, 2, 3, 4, 5}}, false));
    cache.store_plan_time(plan_key(6), PlanTiming{2e-3, 7});
  }
  ProfileCache cache(path_, collect());
  EXPECT_TRUE(warnings_.empty());
  EXPECT_EQ(cache.size(), 4);
  auto sol = cache.lookup_solution(solution_key(big));
  ASSERT_TRUE(sol);
  EXPECT_EQ(sol->sets, (std::vector<std::vector<int>>{{0, 1, 2, 3, 4, 5}}));
  EXPECT_FALSE(sol->proven_optimal);
  EXPECT_EQ(cache.lookup_solution(solution_key(5))->sets, (std::vector<std::vector<int>>{{1, 0}}));
  auto t = cache.lookup_plan_time(plan_key(big));
  ASSERT_TRUE(t);
  EXPECT_EQ(t->median_seconds, 1.0 / 3);  // bit-exact
  EXPECT_EQ(t->rounds, 25);
  EXPECT_EQ(cache.lookup_plan_time(plan_key(6))->median_seconds, 2e-3);
  EXPECT_EQ(cache.lookup_plan_time(plan_key(6))->rounds, 7);
}

TEST_F(ProfileCacheTest, EveryKeyPartSeparatesSolutionsAndPlanTimes) {
  ProfileCache cache(path_);
  const uint64_t big = 0xFFFFFFFFFFFFFFF0ull;
  cache.store_solution(solution_key(big), solution({{0}}));
  cache.store_plan_time(plan_key(big), PlanTiming{1.0, 9});
  for (uint64_t other : {uint64_t{big & 0x7FFFFFFFFFFFFFFFull}, uint64_t{big + 1}, uint64_t{0}}) {
    EXPECT_FALSE(cache.lookup_solution(solution_key(other)));
    EXPECT_FALSE(cache.lookup_plan_time(plan_key(other)));
  }
  EXPECT_FALSE(cache.lookup_solution(solution_key(big, "gpu")));
  EXPECT_FALSE(cache.lookup_solution(solution_key(big, "cpu", "x86-64 avx512f 4 threads")));
  EXPECT_FALSE(cache.lookup_solution(solution_key(big, "cpu", "x86-64 avx512f 2 threads", "korch0.2")));
  EXPECT_FALSE(cache.lookup_solution(solution_key(big, "", "", "")));
  EXPECT_FALSE(cache.lookup_plan_time(plan_key(big, "gpu")));
  EXPECT_FALSE(cache.lookup_plan_time(plan_key(big, "cpu", "x86-64 avx512f 4 threads")));
  EXPECT_FALSE(cache.lookup_plan_time(plan_key(big, "cpu", "x86-64 avx512f 2 threads", "korch0.2")));
  EXPECT_FALSE(cache.lookup_plan_time(plan_key(big, "", "", "")));
  // The same four-part key in the three tables: three separate rows.
  EXPECT_FALSE(cache.lookup(key(big)));
  cache.store(key(big), measured(5.0));
  EXPECT_EQ(cache.lookup(key(big))->median_seconds, 5.0);
  EXPECT_EQ(cache.lookup_solution(solution_key(big))->sets, (std::vector<std::vector<int>>{{0}}));
  EXPECT_EQ(cache.lookup_plan_time(plan_key(big))->median_seconds, 1.0);
  EXPECT_EQ(cache.size(), 3);
}

TEST_F(ProfileCacheTest, RejectsInvalidSolutionsAndPlanTimes) {
  ProfileCache cache(path_);
  EXPECT_THROW(cache.store_solution(solution_key(1), solution({})), Error);
  EXPECT_THROW(cache.store_solution(solution_key(1), solution({{0}, {}})), Error);
  EXPECT_THROW(cache.store_solution(solution_key(1), solution({{0, -1}})), Error);
  EXPECT_THROW(cache.store_plan_time(plan_key(1), PlanTiming{std::nan(""), 5}), Error);
  EXPECT_THROW(cache.store_plan_time(plan_key(1), PlanTiming{-1e-3, 5}), Error);
  EXPECT_THROW(cache.store_plan_time(plan_key(1), PlanTiming{INFINITY, 5}), Error);
  EXPECT_THROW(cache.store_plan_time(plan_key(1), PlanTiming{1e-3, 0}), Error);
  cache.begin_batch();  // refused in a batch too, not at commit
  EXPECT_THROW(cache.store_plan_time(plan_key(1), PlanTiming{1e-3, -2}), Error);
  EXPECT_THROW(cache.store_solution(solution_key(1), solution({{}})), Error);
  cache.commit_batch();
  EXPECT_EQ(cache.size(), 0);
}

TEST_F(ProfileCacheTest, BatchHoldsSolutionsAndPlanTimesUntilCommit) {
  ProfileCache cache(path_);
  ProfileCache other(path_);
  cache.store_solution(solution_key(1), solution({{0}}, false));
  cache.begin_batch();
  cache.store(key(2), measured(2.0));
  cache.store_solution(solution_key(1), solution({{0, 1}}, true));  // overwrites a stored row
  cache.store_solution(solution_key(3), solution({{2}, {0, 1}}));
  cache.store_plan_time(plan_key(4), PlanTiming{4e-3, 8});
  // Visible to this object's lookups and counted, not yet written.
  EXPECT_EQ(cache.lookup_solution(solution_key(1))->sets, (std::vector<std::vector<int>>{{0, 1}}));
  EXPECT_EQ(cache.lookup_solution(solution_key(3))->sets, (std::vector<std::vector<int>>{{2}, {0, 1}}));
  EXPECT_EQ(cache.lookup_plan_time(plan_key(4))->rounds, 8);
  EXPECT_EQ(cache.size(), 4);
  EXPECT_EQ(other.size(), 1);
  EXPECT_FALSE(other.lookup_solution(solution_key(1))->proven_optimal);
  EXPECT_FALSE(other.lookup_plan_time(plan_key(4)));
  cache.commit_batch();
  EXPECT_EQ(other.size(), 4);
  EXPECT_TRUE(other.lookup_solution(solution_key(1))->proven_optimal);
  EXPECT_EQ(other.lookup_solution(solution_key(3))->sets, (std::vector<std::vector<int>>{{2}, {0, 1}}));
  EXPECT_EQ(other.lookup_plan_time(plan_key(4))->median_seconds, 4e-3);
  EXPECT_TRUE(other.lookup(key(2)));

  // A batch left open when the object goes away is written by the destructor.
  {
    ProfileCache batch(path_);
    batch.begin_batch();
    batch.store_solution(solution_key(5), solution({{9}}));
    batch.store_plan_time(plan_key(5), PlanTiming{5.0, 3});
  }
  EXPECT_EQ(other.size(), 6);
  EXPECT_EQ(other.lookup_plan_time(plan_key(5))->median_seconds, 5.0);
}

TEST_F(ProfileCacheTest, DamagedSolutionAndPlanRowsReadAsMisses) {
  {
    ProfileCache cache(path_);
    for (uint64_t h = 1; h <= 6; ++h) {
      cache.store_solution(solution_key(h), solution({{0, 1}, {2}}, true));
      cache.store_plan_time(plan_key(h), PlanTiming{h * 1e-3, 7});
    }
  }
  // Structurally valid edits only the checksum (or the strict parse) can tell.
  sql(path_,
      "UPDATE solutions SET sets = '0,1;3' WHERE partition_hash = '0000000000000001';"
      "UPDATE solutions SET proven_optimal = 0 WHERE partition_hash = '0000000000000002';"
      "UPDATE solutions SET sets = '0,,1' WHERE partition_hash = '0000000000000003';"
      "UPDATE solutions SET proven_optimal = 7 WHERE partition_hash = '0000000000000004';"
      "UPDATE solutions SET target = 'x86-64 avx512f 8 threads' WHERE partition_hash = '0000000000000005';"
      "UPDATE plan_times SET median_seconds = 5e-9 WHERE plan_hash = '0000000000000001';"
      "UPDATE plan_times SET rounds = 8 WHERE plan_hash = '0000000000000002';"
      "UPDATE plan_times SET median_seconds = 'fast' WHERE plan_hash = '0000000000000003';"
      "UPDATE plan_times SET rounds = -1 WHERE plan_hash = '0000000000000004';"
      "UPDATE plan_times SET backend = 'gpu' WHERE plan_hash = '0000000000000005';");
  ProfileCache cache(path_, collect());
  EXPECT_TRUE(warnings_.empty());
  for (uint64_t h = 1; h <= 4; ++h) {
    SCOPED_TRACE(h);
    warnings_.clear();
    EXPECT_FALSE(cache.lookup_solution(solution_key(h)));
    ASSERT_EQ(warnings_.size(), 1u);
    EXPECT_NE(warnings_[0].find("solution for partition 000000000000000" + std::to_string(h)), std::string::npos)
        << warnings_[0];
    EXPECT_NE(warnings_[0].find("damaged"), std::string::npos) << warnings_[0];
    warnings_.clear();
    EXPECT_FALSE(cache.lookup_plan_time(plan_key(h)));
    ASSERT_EQ(warnings_.size(), 1u);
    EXPECT_NE(warnings_[0].find("median for plan 000000000000000" + std::to_string(h)), std::string::npos)
        << warnings_[0];
  }
  warnings_.clear();
  // Rows moved to another key read as misses there too (the checksum covers the key).
  EXPECT_FALSE(cache.lookup_solution(solution_key(5)));
  EXPECT_FALSE(cache.lookup_solution(solution_key(5, "cpu", "x86-64 avx512f 8 threads")));
  EXPECT_FALSE(cache.lookup_plan_time(plan_key(5)));
  EXPECT_FALSE(cache.lookup_plan_time(plan_key(5, "gpu")));
  EXPECT_EQ(warnings_.size(), 2u);
  // Untouched rows are intact, and storing again repairs a damaged one.
  EXPECT_TRUE(cache.lookup_solution(solution_key(6))->proven_optimal);
  EXPECT_EQ(cache.lookup_plan_time(plan_key(6))->median_seconds, 6e-3);
  EXPECT_EQ(cache.size(), 12);
  cache.store_solution(solution_key(3), solution({{0}}));
  cache.store_plan_time(plan_key(3), PlanTiming{3e-3, 7});
  EXPECT_TRUE(cache.lookup_solution(solution_key(3)));
  EXPECT_TRUE(cache.lookup_plan_time(plan_key(3)));
}

TEST_F(ProfileCacheTest, OlderSchemaIsMovedAsideAndRebuilt) {
  std::string bytes = cache_of_schema_version("3");
  {
    ProfileCache cache(path_, collect());
    ASSERT_EQ(warnings_.size(), 1u);
    EXPECT_NE(warnings_[0].find("old schema version 3"), std::string::npos) << warnings_[0];
    EXPECT_NE(warnings_[0].find(".corrupt-1"), std::string::npos) << warnings_[0];
    EXPECT_EQ(cache.path(), path_);
    EXPECT_EQ(cache.size(), 0);
    cache.store_solution(solution_key(1), solution({{0}}));
  }
  EXPECT_EQ(read_all(path_ + ".corrupt-1"), bytes);  // the old rows stay readable there
  warnings_.clear();
  ProfileCache cache(path_, collect());
  EXPECT_TRUE(warnings_.empty());
  EXPECT_TRUE(cache.lookup_solution(solution_key(1)));
}

TEST_F(ProfileCacheTest, SolutionAndPlanTableLayoutsAreChecked) {
  const char* const kBreakages[] = {
      "DROP TABLE solutions;",
      "DROP TABLE plan_times;",
      // Same columns, no primary key: upserts would duplicate.
      "DROP TABLE solutions; CREATE TABLE solutions(partition_hash TEXT, backend TEXT, target TEXT, versions TEXT, "
      "sets TEXT, proven_optimal INTEGER, checksum INTEGER, stored_at INTEGER);",
      "ALTER TABLE plan_times ADD COLUMN note TEXT;",
      "CREATE INDEX plan_times_by_median ON plan_times(median_seconds);",
  };
  int n = 0;
  for (const char* breakage : kBreakages) {
    SCOPED_TRACE(breakage);
    { ProfileCache cache(path_); }
    sql(path_, breakage);
    warnings_.clear();
    ProfileCache cache(path_, collect());
    ASSERT_EQ(warnings_.size(), 1u);
    EXPECT_NE(warnings_[0].find("tables differ"), std::string::npos) << warnings_[0];
    EXPECT_TRUE(fs::exists(str_cat(path_, ".corrupt-", ++n)));
    cache.store_solution(solution_key(1), solution({{0}}));
    cache.store_plan_time(plan_key(1), PlanTiming{1.0, 1});
    EXPECT_EQ(cache.size(), 2);
  }
}

TEST(ProfilerSolutions, RoundTripThroughTheSolutionTable) {
  ProfileCache cache(":memory:");
  auto cpu2 = make_backend("cpu", BackendOptions{2});
  Profiler profiler(*cpu2, &cache);
  EXPECT_FALSE(profiler.stored_solution(42).has_value());
  KernelMeasurer::StoredSolution s;
  s.sets = {{0, 1, 2}, {3}, {4, 5}};
  s.proven_optimal = true;
  profiler.store_solution(42, s);
  auto back = profiler.stored_solution(42);
  ASSERT_TRUE(back.has_value());
  EXPECT_EQ(back->sets, s.sets);
  EXPECT_TRUE(back->proven_optimal);
  EXPECT_FALSE(profiler.stored_solution(43).has_value());
  // Kept in the solution table under the backend's name, target and versions.
  auto row = cache.lookup_solution(SolutionKey{42, "cpu", cpu2->target(), cpu2->versions()});
  ASSERT_TRUE(row);
  EXPECT_EQ(row->sets, s.sets);
  EXPECT_FALSE(cache.lookup(ProfileKey{42, "cpu", cpu2->target(), cpu2->versions()}));
  // Another thread count is another target: not shared.
  auto cpu1 = make_backend("cpu", BackendOptions{1});
  Profiler other(*cpu1, &cache);
  EXPECT_FALSE(other.stored_solution(42).has_value());
  // A solution without kernels is not stored (the cache would refuse it).
  profiler.store_solution(44, KernelMeasurer::StoredSolution{});
  EXPECT_FALSE(profiler.stored_solution(44).has_value());
  // A kernel row under the same hash is not a solution.
  cache.store(ProfileKey{7, "cpu", cpu2->target(), cpu2->versions()}, measured(1.0, "1|0,1"));
  EXPECT_FALSE(profiler.stored_solution(7).has_value());
}

}  // namespace
}  // namespace korch
