// Numbered migrations: fresh database, already migrated, newer database.
#include "store/migrations.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sqlite3.h>

#include "store/store_test_util.h"

namespace agentloop::store {
namespace {

using ::testing::HasSubstr;

int64_t Count(Db& db, const std::string& sql) {
  auto st = db.Prepare(sql);
  EXPECT_TRUE(st.ok());
  auto row = st->Step();
  EXPECT_TRUE(row.ok() && *row);
  return st->Int(0);
}

TEST(MigrationsTest, BuiltinListIsAscendingAndGapFree) {
  auto list = BuiltinMigrations();
  ASSERT_FALSE(list.empty());
  for (size_t i = 0; i < list.size(); ++i) {
    EXPECT_EQ(list[i].version, static_cast<int>(i + 1)) << list[i].name;
    EXPECT_FALSE(list[i].sql.empty());
  }
  EXPECT_EQ(list[0].name, "0001_initial.sql");
}

TEST(MigrationsTest, FreshDatabaseGetsEveryMigrationOnce) {
  TempDir dir;
  auto db = Db::Open(dir.path() / "x.db", 1000);
  ASSERT_TRUE(db.ok());
  EXPECT_EQ(*SchemaVersion(**db), 0);
  ASSERT_TRUE(ApplyMigrations(**db, BuiltinMigrations(), 42).ok());
  const int newest = BuiltinMigrations().back().version;
  EXPECT_EQ(*SchemaVersion(**db), newest);
  EXPECT_EQ(Count(**db, "SELECT COUNT(*) FROM schema_migrations"), newest);
  EXPECT_EQ(Count(**db, "SELECT COUNT(*) FROM sqlite_master WHERE name = 'events'"), 1);
  // Already migrated: a second run changes nothing.
  ASSERT_TRUE(ApplyMigrations(**db, BuiltinMigrations(), 43).ok());
  EXPECT_EQ(Count(**db, "SELECT COUNT(*) FROM schema_migrations"), newest);
  EXPECT_EQ(Count(**db, "SELECT COUNT(*) FROM schema_migrations WHERE applied_at_ms = 43"), 0);
}

TEST(MigrationsTest, OnlyNewerMigrationsRunOnAnOlderDatabase) {
  TempDir dir;
  auto db = Db::Open(dir.path() / "x.db", 1000);
  ASSERT_TRUE(db.ok());
  const Migration v1[] = {{1, "0001_a.sql", "CREATE TABLE a (x INTEGER);"}};
  const Migration v2[] = {
      {1, "0001_a.sql", "CREATE TABLE a (x INTEGER);"},
      {2, "0002_b.sql", "ALTER TABLE a ADD COLUMN y TEXT; CREATE TABLE b (z);"}};
  ASSERT_TRUE(ApplyMigrations(**db, v1, 1).ok());
  // Re-running 0001 would fail (table a exists): it must be skipped.
  Status s = ApplyMigrations(**db, v2, 2);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(*SchemaVersion(**db), 2);
  EXPECT_EQ(Count(**db, "SELECT COUNT(*) FROM pragma_table_info('a') WHERE name = 'y'"), 1);
}

TEST(MigrationsTest, FailingMigrationLeavesTheOldVersion) {
  TempDir dir;
  auto db = Db::Open(dir.path() / "x.db", 1000);
  ASSERT_TRUE(db.ok());
  const Migration bad[] = {{1, "0001_a.sql", "CREATE TABLE a (x); CREATE TABLE broken ("}};
  Status s = ApplyMigrations(**db, bad, 1);
  ASSERT_FALSE(s.ok());
  EXPECT_THAT(s.message(), HasSubstr("0001_a.sql"));
  EXPECT_EQ(*SchemaVersion(**db), 0);
  EXPECT_EQ(Count(**db, "SELECT COUNT(*) FROM sqlite_master WHERE name = 'a'"), 0);
}

// 0002 rebuilds the event log as a rowid table: every event of a version-1
// database survives in order, (session_id, seq) stays unique, and deleting a
// session still deletes its events.
TEST(MigrationsTest, EventLogKeepsItsEventsThroughTheRowidRebuild) {
  TempDir dir;
  auto db = Db::Open(dir.path() / "x.db", 1000);
  ASSERT_TRUE(db.ok());
  ASSERT_TRUE(ApplyMigrations(**db, BuiltinMigrations().first(1), 1).ok());
  ASSERT_TRUE((*db)
                  ->Exec("INSERT INTO sessions (id, workspace, created_at_ms, updated_at_ms)"
                         " VALUES ('b', '/w', 1, 1), ('a', '/w', 1, 1);"
                         "INSERT INTO events (session_id, seq, type, json, created_at_ms) VALUES"
                         " ('b', 1, 'message', '{\"n\":\"b1\"}', 5),"
                         " ('a', 2, 'message', '{\"n\":\"a2\"}', 6),"
                         " ('a', 1, 'message', '{\"n\":\"a1\"}', 7),"
                         " ('b', 2, 'step_end', '{\"n\":\"b2\"}', 8);")
                  .ok());
  ASSERT_TRUE(ApplyMigrations(**db, BuiltinMigrations(), 2).ok());
  EXPECT_EQ(*SchemaVersion(**db), BuiltinMigrations().back().version);
  EXPECT_EQ(Count(**db, "SELECT COUNT(*) FROM events"), 4);
  auto st = (*db)->Prepare(
      "SELECT session_id, seq, type, json, created_at_ms FROM events"
      " ORDER BY id");
  ASSERT_TRUE(st.ok());
  std::vector<std::string> rows;
  while (*st->Step()) {
    rows.push_back(st->Text(0) + "/" + std::to_string(st->Int(1)) + "/" + st->Text(2) + "/" +
                   st->Text(3) + "/" + std::to_string(st->Int(4)));
  }
  EXPECT_THAT(rows, ::testing::ElementsAre(
                        "a/1/message/{\"n\":\"a1\"}/7", "a/2/message/{\"n\":\"a2\"}/6",
                        "b/1/message/{\"n\":\"b1\"}/5", "b/2/step_end/{\"n\":\"b2\"}/8"));
  Status dup = (*db)->Exec(
      "INSERT INTO events (session_id, seq, type, json, created_at_ms)"
      " VALUES ('a', 2, 'message', '{}', 9)");
  EXPECT_EQ(dup.code(), Code::kAlreadyExists) << dup.ToString();
  ASSERT_TRUE((*db)->Exec("DELETE FROM sessions WHERE id = 'a'").ok());
  EXPECT_EQ(Count(**db, "SELECT COUNT(*) FROM events"), 2);
  EXPECT_EQ(Count(**db, "SELECT COUNT(*) FROM sqlite_master WHERE name = 'events_by_session'"), 1);
}

// 0003 adds the pinned settings: a version-2 database keeps its sessions,
// whose settings read back as "nothing pinned", and a store opened on it
// can pin settings to new sessions.
TEST(MigrationsTest, SessionsOfAVersion2DatabaseHaveNoPinnedSettings) {
  TempDir dir;
  {
    auto db = Db::Open(dir.path() / "sessions.db", 1000);
    ASSERT_TRUE(db.ok());
    ASSERT_TRUE(ApplyMigrations(**db, BuiltinMigrations().first(2), 1).ok());
    ASSERT_EQ(*SchemaVersion(**db), 2);
    ASSERT_TRUE((*db)
                    ->Exec("INSERT INTO sessions (id, workspace, provider, model,"
                           " created_at_ms, updated_at_ms)"
                           " VALUES ('old-session', '/w', 'openai', 'gpt-4.1', 1, 1);"
                           "INSERT INTO events (session_id, seq, type, json, created_at_ms)"
                           " VALUES ('old-session', 1, 'notice', '{}', 5);")
                    .ok());
  }
  SqliteStoreOptions o;
  o.lock_heartbeat = false;
  auto store = SqliteStore::Open(dir.path() / "sessions.db", o);
  ASSERT_TRUE(store.ok()) << store.status().ToString();
  auto info = (*store)->GetSession("old-session");
  ASSERT_TRUE(info.ok()) << info.status().ToString();
  EXPECT_EQ(info->model, "gpt-4.1");
  EXPECT_EQ(info->last_seq, 1u);
  auto settings = (*store)->GetSettings("old-session");
  ASSERT_TRUE(settings.ok()) << settings.status().ToString();
  EXPECT_FALSE(settings->has_value());

  NewSessionParams p;
  p.workspace = "/w";
  p.settings = Json{{"model", "m"}};
  auto created = (*store)->CreateSession(p);
  ASSERT_TRUE(created.ok()) << created.status().ToString();
  auto pinned = (*store)->GetSettings(created->id);
  ASSERT_TRUE(pinned.ok() && pinned->has_value());
  EXPECT_EQ((**pinned)["model"], "m");

  auto db = Db::Open(dir.path() / "sessions.db", 1000);
  ASSERT_TRUE(db.ok());
  EXPECT_EQ(*SchemaVersion(**db), BuiltinMigrations().back().version);
}

// Every earlier version migrates to the newest, and a store opened on it
// keeps sessions and their queued inputs.
TEST(MigrationsTest, EachEarlierVersionMigratesToTheNewest) {
  auto all = BuiltinMigrations();
  for (size_t k = 0; k <= all.size(); ++k) {
    SCOPED_TRACE("from version " + std::to_string(k));
    TempDir dir;
    const auto path = dir.path() / "sessions.db";
    {
      auto db = Db::Open(path, 1000);
      ASSERT_TRUE(db.ok());
      ASSERT_TRUE(ApplyMigrations(**db, all.first(k), 1).ok());
      EXPECT_EQ(*SchemaVersion(**db), static_cast<int>(k));
    }
    auto store = OpenSqliteStore(path, {});
    ASSERT_TRUE(store.ok()) << store.status().ToString();
    NewSessionParams p;
    p.workspace = "/w";
    auto info = (*store)->CreateSession(p);
    ASSERT_TRUE(info.ok()) << info.status().ToString();
    EXPECT_EQ(*(*store)->EnqueueInput(info->id, "next", false), 1);
    EXPECT_EQ((*store)->ListQueuedInputs(info->id)->size(), 1u);
  }
}

TEST(MigrationsTest, NewerDatabaseIsRefused) {
  TempDir dir;
  auto path = dir.path() / "sessions.db";
  {
    auto store = OpenSqliteStore(path, {});
    ASSERT_TRUE(store.ok());
  }
  {
    auto db = Db::Open(path, 1000);
    ASSERT_TRUE(db.ok());
    ASSERT_TRUE(
        (*db)->Exec("INSERT INTO schema_migrations VALUES (9999, '9999_future.sql', 0)").ok());
  }
  auto store = OpenSqliteStore(path, {});
  ASSERT_FALSE(store.ok());
  EXPECT_EQ(store.error().code(), Code::kFailedPrecondition);
  EXPECT_THAT(store.error().message(), HasSubstr("schema version 9999"));
  EXPECT_THAT(store.error().message(), HasSubstr("newer agentloop"));
  EXPECT_THAT(store.error().message(), HasSubstr(path.string()));
}

TEST(MigrationsTest, DatabaseIsWalWithForeignKeys) {
  TempDir dir;
  auto db = Db::Open(dir.path() / "x.db", 1000);
  ASSERT_TRUE(db.ok());
  auto mode = (*db)->Prepare("PRAGMA journal_mode");
  ASSERT_TRUE(mode.ok() && *mode->Step());
  EXPECT_EQ(mode->Text(0), "wal");
  EXPECT_EQ(Count(**db, "PRAGMA foreign_keys"), 1);
  EXPECT_EQ(Count(**db, "PRAGMA synchronous"), 2);  // FULL
}

TEST(MigrationsTest, NotADatabaseIsAnError) {
  TempDir dir;
  auto path = dir.path() / "junk.db";
  {
    std::FILE* f = std::fopen(path.c_str(), "w");
    ASSERT_NE(f, nullptr);
    std::fputs("this is not a database file, just text, long enough to look like a header", f);
    std::fclose(f);
  }
  auto store = OpenSqliteStore(path, {});
  ASSERT_FALSE(store.ok());
  EXPECT_EQ(store.error().code(), Code::kDataLoss) << store.error().ToString();
}

}  // namespace
}  // namespace agentloop::store
