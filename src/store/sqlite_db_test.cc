// The statement cache of Db::Prepare: reuse, concurrent copies, statements
// outliving their connection, and bindings cleared between uses.
#include "store/sqlite_db.h"

#include <gtest/gtest.h>
#include <sqlite3.h>

#include "base/testing/files.h"

namespace agentloop::store {
namespace {

std::unique_ptr<Db> OpenDb(const agentloop::testing::TempDir& dir) {
  auto db = Db::Open(dir.path() / "t.db", 1000);
  EXPECT_TRUE(db.ok()) << db.status().ToString();
  EXPECT_TRUE((*db)->Exec("CREATE TABLE t (k INTEGER, v TEXT)").ok());
  return std::move(*db);
}

int64_t CountRows(Db& db) {
  auto st = db.Prepare("SELECT COUNT(*) FROM t");
  EXPECT_TRUE(st.ok());
  auto row = st->Step();
  EXPECT_TRUE(row.ok() && *row);
  return st->Int(0);
}

TEST(SqliteDbTest, CachedStatementComesBackResetWithBindingsCleared) {
  agentloop::testing::TempDir dir;
  auto db = OpenDb(dir);
  for (int i = 0; i < 3; ++i) {
    auto ins = db->Prepare("INSERT INTO t (k, v) VALUES (?, ?)");
    ASSERT_TRUE(ins.ok());
    if (i == 0) ins->Bind(1, int64_t{7}).Bind(2, "x");
    if (i == 1) ins->Bind(1, int64_t{8});  // v left unbound: must be NULL, not "x"
    if (i == 2) ins->Bind(2, "z");
    ASSERT_TRUE(ins->Run().ok());
  }
  EXPECT_EQ(CountRows(*db), 3);
  auto sel = db->Prepare("SELECT k, v FROM t ORDER BY rowid");
  ASSERT_TRUE(sel.ok());
  ASSERT_TRUE(*sel->Step());
  EXPECT_EQ(sel->Int(0), 7);
  EXPECT_EQ(sel->Text(1), "x");
  ASSERT_TRUE(*sel->Step());
  EXPECT_EQ(sel->Int(0), 8);
  EXPECT_TRUE(sel->IsNull(1));
  ASSERT_TRUE(*sel->Step());
  EXPECT_TRUE(sel->IsNull(0));
  EXPECT_EQ(sel->Text(1), "z");
}

TEST(SqliteDbTest, SameTextTakenTwiceAtOnceGivesIndependentStatements) {
  agentloop::testing::TempDir dir;
  auto db = OpenDb(dir);
  ASSERT_TRUE(db->Exec("INSERT INTO t VALUES (1, 'a'), (2, 'b')").ok());
  const char* sql = "SELECT k FROM t ORDER BY k";
  auto a = db->Prepare(sql);
  auto b = db->Prepare(sql);
  ASSERT_TRUE(a.ok() && b.ok());
  ASSERT_TRUE(*a->Step());
  ASSERT_TRUE(*b->Step());
  ASSERT_TRUE(*a->Step());
  EXPECT_EQ(a->Int(0), 2);
  EXPECT_EQ(b->Int(0), 1);  // b's cursor did not move with a's
}

TEST(SqliteDbTest, AbandonedCursorDoesNotHoldAReadTransaction) {
  agentloop::testing::TempDir dir;
  auto db = OpenDb(dir);
  ASSERT_TRUE(db->Exec("INSERT INTO t VALUES (1, 'a'), (2, 'b')").ok());
  {
    auto sel = db->Prepare("SELECT k FROM t");
    ASSERT_TRUE(*sel->Step());  // left mid-result: the cache must reset it
  }
  EXPECT_TRUE(sqlite3_get_autocommit(db->raw()));
  // A checkpoint can only truncate the WAL when no statement reads.
  int log = -1, ckpt = -1;
  ASSERT_EQ(sqlite3_wal_checkpoint_v2(db->raw(), nullptr, SQLITE_CHECKPOINT_TRUNCATE, &log, &ckpt),
            SQLITE_OK);
  EXPECT_EQ(log, 0);
}

TEST(SqliteDbTest, StatementMayOutliveItsConnection) {
  agentloop::testing::TempDir dir;
  Stmt survivor;
  {
    auto db = OpenDb(dir);
    auto st = db->Prepare("SELECT 1");
    ASSERT_TRUE(st.ok());
    survivor = std::move(*st);
  }
  // sqlite3_close_v2 keeps the connection alive until its last statement is
  // finalized: the survivor still runs, against the closed Db's connection.
  Result<bool> row = survivor.Step();
  ASSERT_TRUE(row.ok()) << row.status().ToString();
  ASSERT_TRUE(*row);
  EXPECT_EQ(survivor.Int(0), 1);
  // Destroying it finalizes the statement instead of returning it to the
  // freed Db's cache (ASan watches the freed memory).
  survivor = Stmt();
  EXPECT_FALSE(survivor.Step().ok());
}

TEST(SqliteDbTest, TransactionsCommitAndRollBackThroughCachedStatements) {
  agentloop::testing::TempDir dir;
  auto db = OpenDb(dir);
  for (int i = 0; i < 3; ++i) {
    auto txn = Txn::Begin(*db, true);
    ASSERT_TRUE(txn.ok());
    ASSERT_TRUE(db->Exec("INSERT INTO t VALUES (1, 'a')").ok());
    ASSERT_TRUE(txn->Commit().ok());
  }
  {
    auto txn = Txn::Begin(*db, true);
    ASSERT_TRUE(txn.ok());
    ASSERT_TRUE(db->Exec("INSERT INTO t VALUES (2, 'b')").ok());
  }  // rolled back
  EXPECT_EQ(CountRows(*db), 3);
}

TEST(SqliteDbTest, OpenSetsTheSynchronousPragma) {
  agentloop::testing::TempDir dir;
  auto full = Db::Open(dir.path() / "f.db", 1000);
  ASSERT_TRUE(full.ok()) << full.status().ToString();
  EXPECT_EQ(*(*full)->Synchronous(), 2);  // FULL by default
  auto normal = Db::Open(dir.path() / "n.db", 1000, StoreSync::kNormal);
  ASSERT_TRUE(normal.ok()) << normal.status().ToString();
  EXPECT_EQ(*(*normal)->Synchronous(), 1);  // NORMAL
  // Still WAL: NORMAL is only safe against corruption in WAL mode.
  auto mode = (*normal)->Prepare("PRAGMA journal_mode");
  ASSERT_TRUE(mode.ok());
  ASSERT_TRUE(*mode->Step());
  EXPECT_EQ(mode->Text(0), "wal");
  auto explicit_full = Db::Open(dir.path() / "n.db", 1000, StoreSync::kFull);
  ASSERT_TRUE(explicit_full.ok());
  EXPECT_EQ(*(*explicit_full)->Synchronous(), 2);  // per connection, not per file
}

}  // namespace
}  // namespace agentloop::store
