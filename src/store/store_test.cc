// Sessions, the event log, Load (round trip, compaction, crash recovery,
// corrupt rows) and key/value state of the SQLite store.
#include <sqlite3.h>

#include "agentloop/session_tree.h"

#include "store/replay.h"
#include "store/store_test_util.h"

namespace agentloop::store {
namespace {

SessionListOptions Listing(std::optional<std::filesystem::path> workspace, int limit,
                           std::optional<std::string> tenant = {},
                           std::optional<std::string> agent = {}, std::string after_id = {}) {
  SessionListOptions o;
  o.workspace = std::move(workspace);
  o.limit = limit;
  o.tenant = std::move(tenant);
  o.agent = std::move(agent);
  o.after_id = std::move(after_id);
  return o;
}

using ::testing::HasSubstr;

// The SQLite store's own format and pragmas.
class SqliteStoreTest : public StoreTest {};
AL_SQLITE_ONLY(SqliteStoreTest);
AL_STORE_CONFORMANCE(StoreTest);

TEST(DefaultDataDirTest, Precedence) {
  EXPECT_EQ(*DefaultDataDir({{"AGENTLOOP_HOME", "/a"}, {"XDG_DATA_HOME", "/x"}, {"HOME", "/h"}}),
            std::filesystem::path("/a"));
  EXPECT_EQ(*DefaultDataDir({{"XDG_DATA_HOME", "/x"}, {"HOME", "/h"}}),
            std::filesystem::path("/x/agentloop"));
  // A relative XDG_DATA_HOME is invalid per the XDG spec.
  EXPECT_EQ(*DefaultDataDir({{"XDG_DATA_HOME", "rel"}, {"HOME", "/h"}}),
            std::filesystem::path("/h/.local/share/agentloop"));
  EXPECT_EQ(*DefaultDataDir({{"AGENTLOOP_HOME", ""}, {"HOME", "/h"}}),
            std::filesystem::path("/h/.local/share/agentloop"));
  auto none = DefaultDataDir({});
  ASSERT_FALSE(none.ok());
  EXPECT_EQ(none.error().code(), Code::kFailedPrecondition);
}

TEST(DefaultDataDirTest, OpenDefaultStoreCreatesPrivateDir) {
  TempDir dir;
  auto home = dir.path() / "nested" / "home";
  auto store = OpenDefaultStore({{"AGENTLOOP_HOME", home.string()}}, {});
  ASSERT_TRUE(store.ok()) << store.status().ToString();
  EXPECT_TRUE(std::filesystem::exists(home / "sessions.db"));
  auto perms = std::filesystem::status(home).permissions();
  EXPECT_EQ(perms & std::filesystem::perms::all, std::filesystem::perms::owner_all);
}

// store.sync: the pragma is in effect on the store's own connection, also
// through OpenDefaultStore, and a second connection (another process) keeps
// its own choice.
TEST_P(SqliteStoreTest, SyncModeSetsThePragmaOfTheConnection) {
  auto* sqlite_store = dynamic_cast<SqliteStore*>(store_.get());
  ASSERT_NE(sqlite_store, nullptr);
  auto full = sqlite_store->Synchronous();
  ASSERT_TRUE(full.ok()) << full.status().ToString();
  EXPECT_EQ(*full, 2);  // FULL: the default

  SqliteStoreOptions o = Options();
  o.sync = StoreSync::kNormal;
  auto normal = SqliteStore::Open(db_path(), o);
  ASSERT_TRUE(normal.ok()) << normal.status().ToString();
  auto mode = (*normal)->Synchronous();
  ASSERT_TRUE(mode.ok()) << mode.status().ToString();
  EXPECT_EQ(*mode, 1);  // NORMAL
  EXPECT_EQ(*sqlite_store->Synchronous(), 2);

  // Commits on the NORMAL connection work and are seen by the FULL one.
  NewSessionParams p;
  p.workspace = "/work/ws";
  p.provider = "script";
  auto created = (*normal)->CreateSession(p);
  ASSERT_TRUE(created.ok()) << created.status().ToString();
  EXPECT_TRUE(store_->GetSession(created->id).ok());
}

TEST(DefaultDataDirTest, OpenDefaultStorePassesTheSyncMode) {
  TempDir dir;
  SqliteStoreOptions o;
  o.lock_heartbeat = false;
  o.sync = StoreSync::kNormal;
  auto store = OpenDefaultStore({{"AGENTLOOP_HOME", dir.path().string()}}, o);
  ASSERT_TRUE(store.ok()) << store.status().ToString();
  auto* sqlite = dynamic_cast<SqliteStore*>(store->get());
  ASSERT_NE(sqlite, nullptr);
  EXPECT_EQ(*sqlite->Synchronous(), 1);
}

TEST(MakeTitleTest, CollapsesAndCuts) {
  EXPECT_EQ(MakeTitle("  fix\n\tthe   bug  "), "fix the bug");
  std::string long_text(100, 'x');
  EXPECT_EQ(MakeTitle(long_text), std::string(80, 'x'));
  // 80 code points, not bytes: each 'é' is 2 bytes.
  std::string accents;
  for (int i = 0; i < 90; ++i) accents += "\xc3\xa9";
  EXPECT_EQ(MakeTitle(accents).size(), 160u);
  EXPECT_EQ(MakeTitle(std::string(79, 'a') + " b"), std::string(79, 'a'));
}

TEST_P(StoreTest, CreateGetListFindRemove) {
  std::string a = NewSession("/w/one");
  clock_ms_ += 10;
  std::string b = NewSession("/w/two/");
  clock_ms_ += 10;
  std::string c = NewSession("/w/one");

  auto got = store_->GetSession(b);
  ASSERT_TRUE(got.ok());
  EXPECT_EQ(got->workspace, std::filesystem::path("/w/two"));  // trailing slash dropped
  EXPECT_EQ(got->provider, "script");
  EXPECT_EQ(got->model, "m1");
  EXPECT_EQ(got->command, "code");
  EXPECT_EQ(got->last_seq, 0u);

  auto all = store_->ListSessions({});
  ASSERT_TRUE(all.ok());
  ASSERT_EQ(all->size(), 3u);
  EXPECT_EQ((*all)[0].id, c);  // newest first
  EXPECT_EQ((*all)[2].id, a);

  auto one = store_->ListSessions(Listing("/w/one", 0));
  ASSERT_TRUE(one.ok());
  ASSERT_EQ(one->size(), 2u);
  auto limited = store_->ListSessions(Listing({}, 1));
  ASSERT_EQ(limited->size(), 1u);

  // Appending makes a session the newest of its workspace.
  clock_ms_ += 10;
  ASSERT_TRUE(store_->Append(a, std::vector<Event>{MessageEvent(1, Message::User("hi"))}).ok());
  auto newest = store_->NewestInWorkspace("/w/one");
  ASSERT_TRUE(newest.ok());
  EXPECT_EQ(newest->id, a);
  EXPECT_EQ(store_->NewestInWorkspace("/w/none").error().code(), Code::kNotFound);

  EXPECT_EQ(*store_->FindSession(b.substr(0, 8)), b);
  EXPECT_EQ(*store_->FindSession(b), b);
  EXPECT_EQ(store_->FindSession("abc").error().code(), Code::kInvalidArgument);
  EXPECT_EQ(store_->FindSession("zzzzzzzz").error().code(), Code::kNotFound);

  ASSERT_TRUE(store_->RemoveSession(a).ok());
  EXPECT_EQ(store_->GetSession(a).error().code(), Code::kNotFound);
  EXPECT_EQ(store_->RemoveSession(a).code(), Code::kNotFound);
  EXPECT_EQ(store_->ListSessions({})->size(), 2u);
}

// A server's sessions carry their tenant, agent and metadata; a listing
// filters by them and pages with the id of the previous page's last session.
TEST_P(StoreTest, ServedSessionsAreLabelledFilteredAndPaged) {
  std::vector<std::string> ids;
  for (int i = 0; i < 5; ++i) {
    NewSessionParams p;
    p.workspace = "/w";
    p.tenant = i < 4 ? "acme" : "other";
    p.agent = i % 2 == 0 ? "coder" : "reviewer";
    p.metadata = Json{{"n", i}};
    auto s = store_->CreateSession(p);
    ASSERT_TRUE(s.ok()) << s.status().ToString();
    ids.push_back(s->id);
    clock_ms_ += 10;
  }
  auto got = store_->GetSession(ids[1]);
  ASSERT_TRUE(got.ok());
  EXPECT_EQ(got->tenant, "acme");
  EXPECT_EQ(got->agent, "reviewer");
  EXPECT_EQ(got->metadata, (Json{{"n", 1}}));

  auto acme = store_->ListSessions(Listing({}, 0, "acme"));
  ASSERT_EQ(acme->size(), 4u);
  EXPECT_EQ((*acme)[0].id, ids[3]);
  auto coders = store_->ListSessions(Listing({}, 0, "acme", "coder"));
  ASSERT_EQ(coders->size(), 2u);
  EXPECT_EQ((*coders)[0].id, ids[2]);
  EXPECT_EQ((*coders)[1].id, ids[0]);

  auto page1 = store_->ListSessions(Listing({}, 3, "acme"));
  ASSERT_EQ(page1->size(), 3u);
  auto page2 = store_->ListSessions(Listing({}, 3, "acme", {}, page1->back().id));
  ASSERT_EQ(page2->size(), 1u);
  EXPECT_EQ((*page2)[0].id, ids[0]);

  EXPECT_EQ(store_->ListSessions(Listing({}, 3, "acme", {}, "gone")).status().code(),
            Code::kNotFound);
  NewSessionParams bad;
  bad.workspace = "/w";
  bad.metadata = Json::array({1});
  EXPECT_EQ(store_->CreateSession(bad).status().code(), Code::kInvalidArgument);
  EXPECT_EQ(store_->CreateLockedSession(bad, getpid()).status().code(), Code::kInvalidArgument);
  bad.metadata = nullptr;
  bad.settings = Json::array();
  bad.id = "never-created";
  EXPECT_EQ(store_->CreateSession(bad).status().code(), Code::kInvalidArgument);
  EXPECT_EQ(store_->CreateLockedSession(bad, getpid()).status().code(), Code::kInvalidArgument);
  EXPECT_EQ(store_->GetSession("never-created").status().code(), Code::kNotFound);
}

// A subagent's session names its parent; the children of a session are
// listed by parent, a root session has none.
TEST_P(StoreTest, ChildSessionsNameTheirParent) {
  NewSessionParams root;
  root.workspace = "/w";
  auto r = store_->CreateSession(root);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->parent_id, "");
  std::vector<std::string> kids;
  for (int i = 0; i < 2; ++i) {
    NewSessionParams c;
    c.workspace = "/w";
    c.parent_id = r->id;
    auto s = store_->CreateSession(c);
    ASSERT_TRUE(s.ok());
    kids.push_back(s->id);
    clock_ms_ += 10;
  }
  auto got = store_->GetSession(kids[0]);
  ASSERT_TRUE(got.ok());
  EXPECT_EQ(got->parent_id, r->id);
  SessionListOptions children;
  children.parent_id = r->id;
  children.limit = 0;
  auto listed = store_->ListSessions(children);
  ASSERT_TRUE(listed.ok());
  ASSERT_EQ(listed->size(), 2u);
  EXPECT_EQ((*listed)[0].id, kids[1]);
  EXPECT_EQ((*listed)[1].id, kids[0]);
  children.parent_id = kids[0];
  EXPECT_TRUE(store_->ListSessions(children)->empty());
}

// The tree of a session's children: depth first, oldest child first, each
// node "new" before a turn ended; past max_nodes the rest are counted, not
// loaded; a tree deeper than max_depth is refused as corrupt.
TEST_P(StoreTest, ASessionTreeListsDescendantsOldestFirst) {
  auto child_of = [&](const std::string& parent) {
    NewSessionParams c;
    c.workspace = "/w";
    c.parent_id = parent;
    auto s = store_->CreateSession(c);
    EXPECT_TRUE(s.ok());
    clock_ms_ += 10;
    return s.ok() ? s->id : std::string();
  };
  const std::string root = NewSession("/w");
  clock_ms_ += 10;
  const std::string a = child_of(root);
  const std::string b = child_of(root);
  const std::string a1 = child_of(a);
  Result<SessionTreeNode> tree = LoadSessionTree(*store_, root);
  ASSERT_TRUE(tree.ok()) << tree.error().ToString();
  ASSERT_EQ(tree->children.size(), 2u);
  EXPECT_EQ(tree->children[0].info.id, a);
  EXPECT_EQ(tree->children[1].info.id, b);
  ASSERT_EQ(tree->children[0].children.size(), 1u);
  EXPECT_EQ(tree->children[0].children[0].info.id, a1);
  Json j = SessionTreeJson(*tree);
  EXPECT_EQ(j["children"][0]["status"], "new");
  EXPECT_EQ(j["children"][0]["parent_id"], root);
  EXPECT_EQ(j["children"][0]["children"][0]["id"], a1);
  EXPECT_FALSE(j.contains("omitted_children"));

  SessionTreeOptions small;
  small.max_nodes = 2;  // the root and `a`
  tree = LoadSessionTree(*store_, root, small);
  ASSERT_TRUE(tree.ok()) << tree.error().ToString();
  ASSERT_EQ(tree->children.size(), 1u);
  EXPECT_EQ(tree->omitted_children, 1);
  EXPECT_EQ(tree->children[0].omitted_children, 1);
  EXPECT_EQ(SessionTreeJson(*tree)["omitted_children"], 1);

  SessionTreeOptions shallow;
  shallow.max_depth = 1;
  EXPECT_EQ(LoadSessionTree(*store_, root, shallow).status().code(), Code::kDataLoss);
  EXPECT_EQ(LoadSessionTree(*store_, "no-such-session").status().code(), Code::kNotFound);
}

// A commit writes events only: the session's last activity and last seq are
// read from its newest event. Its row's updated_at_ms (the indexed list
// order) moves only when another session sorted first, and the list order
// stays the order of last activity.
TEST_P(SqliteStoreTest, ActivityAndLastSeqComeFromTheEventLog) {
  const int64_t created = clock_ms_.load();
  std::string a = NewSession("/w/one");
  clock_ms_ += 100;
  std::string b = NewSession("/w/one");
  clock_ms_ += 100;
  ASSERT_TRUE(store_
                  ->Append(a, std::vector<Event>{MessageEvent(1, Message::User("first words")),
                                                 MessageEvent(2, Message::Assistant("ok"))})
                  .ok());
  auto got = store_->GetSession(a);
  ASSERT_TRUE(got.ok());
  EXPECT_EQ(got->updated_at_ms, created + 200);
  EXPECT_EQ(got->last_seq, 2u);
  EXPECT_EQ(got->title, "first words");
  auto list = store_->ListSessions({});
  ASSERT_TRUE(list.ok());
  ASSERT_EQ(list->size(), 2u);
  EXPECT_EQ((*list)[0].id, a);  // the newer activity first, though b was created later
  EXPECT_EQ((*list)[0].last_seq, 2u);
  EXPECT_EQ((*list)[1].last_seq, 0u);

  auto db = Db::Open(db_path(), 1000);
  ASSERT_TRUE(db.ok());
  auto row_of = [&](const std::string& id) {
    auto st = (*db)->Prepare("SELECT updated_at_ms, last_seq FROM sessions WHERE id = ?");
    EXPECT_TRUE(st.ok());
    st->Bind(1, id);
    EXPECT_TRUE(*st->Step());
    return std::pair<int64_t, int64_t>(st->Int(0), st->Int(1));
  };
  EXPECT_EQ(row_of(a), std::make_pair(created + 200, int64_t{0}));  // moved above b once
  // a is first now: its next commit leaves the row alone.
  clock_ms_ += 100;
  ASSERT_TRUE(
      store_->Append(a, std::vector<Event>{MessageEvent(3, Message::Assistant("more"))}).ok());
  EXPECT_EQ(row_of(a), std::make_pair(created + 200, int64_t{0}));
  EXPECT_EQ(store_->GetSession(a)->updated_at_ms, created + 300);
  EXPECT_EQ(store_->GetSession(a)->last_seq, 3u);
  // b commits: it moves above a (same millisecond: one above).
  ASSERT_TRUE(store_->Append(b, std::vector<Event>{MessageEvent(1, Message::User("b"))}).ok());
  EXPECT_EQ(store_->NewestInWorkspace("/w/one")->id, b);
  EXPECT_EQ(row_of(b).first, created + 300);
  ASSERT_TRUE(
      store_->Append(a, std::vector<Event>{MessageEvent(4, Message::Assistant("a again"))}).ok());
  EXPECT_EQ(store_->NewestInWorkspace("/w/one")->id, a);
  EXPECT_EQ(row_of(a).first, created + 301);
}

TEST_P(StoreTest, RelabelReplacesTitleAndMetadata) {
  std::string id = NewSession();
  ASSERT_TRUE(store_->RelabelSession(id, "named", Json{{"k", 1}}).ok());
  SessionInfo s = *store_->GetSession(id);
  EXPECT_EQ(s.title, "named");
  EXPECT_EQ(s.metadata, (Json{{"k", 1}}));
  ASSERT_TRUE(store_->RelabelSession(id, std::nullopt, Json(nullptr)).ok());
  s = *store_->GetSession(id);
  EXPECT_EQ(s.title, "named");
  EXPECT_TRUE(s.metadata.is_null());
  EXPECT_EQ(store_->RelabelSession(id, std::nullopt, Json::array()).code(), Code::kInvalidArgument);
  EXPECT_EQ(store_->RelabelSession("nope", "x", std::nullopt).code(), Code::kNotFound);
}

TEST_P(StoreTest, DuplicateExplicitIdRejected) {
  NewSessionParams p;
  p.id = "fixed-id";
  p.workspace = "/w";
  ASSERT_TRUE(store_->CreateSession(p).ok());
  EXPECT_EQ(store_->CreateSession(p).error().code(), Code::kAlreadyExists);
}

TEST_P(StoreTest, RemoveDeletesEveryRow) {
  std::string id = NewSession();
  ASSERT_TRUE(store_->Append(id, std::vector<Event>{MessageEvent(1, Message::User("x"))}).ok());
  ASSERT_TRUE(store_->SetState(id, "todo", Json{{"a", 1}}).ok());
  Checkpoint cp;
  cp.session_id = id;
  cp.outstanding.push_back(
      {"pend-1", PendingKind::kApproval, "tu1", "bash", Json::object(), "r", "", ""});
  ASSERT_TRUE(store_->SaveCheckpoint(cp).ok());
  ASSERT_TRUE(store_->RemoveSession(id).ok());

  const std::vector<std::string> tables =
      sqlite() ? std::vector<std::string>{"events", "session_locks", "checkpoints", "pending_index",
                                          "session_state"}
               : std::vector<std::string>{"session_events", "checkpoints", "pending_index",
                                          "session_state"};
  for (const std::string& table : tables) {
    EXPECT_EQ(QueryInt("SELECT COUNT(*) FROM " + table), 0) << table;
  }
}

TEST_P(StoreTest, AppendLoadRoundTrip) {
  std::string id = NewSession();
  Message user = Message::User("  Please fix\nthe failing test in src/a.cc  ");
  Message asst = AssistantWithTools({"tu_1"});
  asst.content[1].meta = Json{{"item_id", "fc_1"}};
  Message result;
  result.role = Role::kUser;
  result.content.push_back(ContentBlock::ToolResult("tu_1", "file body", false));
  Message final_msg = Message::Assistant("Done.");

  std::vector<Event> events{
      MakeEvent(EventType::kTurnBegin, 1, Json{{"input", "user"}}),
      MessageEvent(2, user),
      MakeEvent(EventType::kTextDelta, 3, Json{{"text", "let"}}),  // not persisted
      MessageEvent(4, asst),
      MakeEvent(EventType::kToolCallBegin, 5, Json{{"id", "tu_1"}, {"tool", "read"}}),
      MakeEvent(EventType::kToolCallEnd, 6, Json{{"id", "tu_1"}, {"is_error", false}}),
      MessageEvent(7, result),
      MessageEvent(8, final_msg),
      MakeEvent(EventType::kTurnEnd, 9,
                Json{{"stop", "completed"},
                     {"reason", ""},
                     {"final_text", "Done."},
                     {"counters", ToJson(TurnCounters{1, 1234, 2, {}})}}),
  };
  ASSERT_TRUE(store_->Append(id, events).ok());

  auto snap = store_->Load(id, {});
  ASSERT_TRUE(snap.ok()) << snap.status().ToString();
  ASSERT_EQ(snap->messages.size(), 4u);
  EXPECT_EQ(snap->messages[0], user);
  EXPECT_EQ(snap->messages[1], asst);
  EXPECT_EQ(snap->messages[2], result);
  EXPECT_EQ(snap->messages[3], final_msg);
  EXPECT_EQ(snap->last_seq, 9u);
  EXPECT_FALSE(snap->recovered);
  EXPECT_TRUE(snap->warnings.empty());
  ASSERT_TRUE(snap->last_turn_end.has_value());
  EXPECT_EQ(snap->last_turn_end->stop, StopReason::kCompleted);
  EXPECT_EQ(snap->last_turn_end->final_text, "Done.");
  EXPECT_EQ(snap->last_turn_end->counters.tokens, 1234);
  EXPECT_EQ(snap->last_turn_end->seq, 9u);
  EXPECT_EQ(snap->info.title, "Please fix the failing test in src/a.cc");
  EXPECT_EQ(snap->info.last_seq, 9u);

  auto stored = store_->Events(id, 0);
  ASSERT_TRUE(stored.ok());
  ASSERT_EQ(stored->size(), 8u);  // the delta is not stored
  EXPECT_EQ((*stored)[0].type, "turn_begin");
  EXPECT_EQ((*stored)[2].seq, 4u);
  auto j = ParseJson((*stored)[1].json);
  ASSERT_TRUE(j.ok());
  EXPECT_EQ((*j)["session_id"], id);
  EXPECT_EQ((*j)["seq"], 2);
  EXPECT_EQ(store_->Events(id, 7)->size(), 2u);
}

TEST_P(StoreTest, AppendIsAtomicOnDuplicateSeq) {
  std::string id = NewSession();
  ASSERT_TRUE(store_->Append(id, std::vector<Event>{MessageEvent(1, Message::User("a"))}).ok());
  // seq 2 is new but seq 1 collides: nothing of the batch may be stored.
  std::vector<Event> batch{MessageEvent(2, Message::Assistant("b")),
                           MessageEvent(1, Message::User("dup"))};
  Status s = store_->Append(id, batch);
  EXPECT_EQ(s.code(), Code::kAlreadyExists) << s.ToString();
  EXPECT_THAT(s.message(), HasSubstr("seq 1"));
  EXPECT_EQ(store_->Events(id, 0)->size(), 1u);
  EXPECT_EQ(store_->GetSession(id)->last_seq, 1u);
}

// Seqs only grow: a seq below the last stored one is refused even where it
// is a gap, so a reader that has seen seq N never misses a lower one.
TEST_P(StoreTest, AppendRefusesASeqBelowTheLastStoredOne) {
  std::string id = NewSession();
  ASSERT_TRUE(store_
                  ->Append(id, std::vector<Event>{MessageEvent(1, Message::User("a")),
                                                  MessageEvent(3, Message::Assistant("c"))})
                  .ok());
  Status s = store_->Append(id, std::vector<Event>{MessageEvent(2, Message::User("gap"))});
  EXPECT_EQ(s.code(), Code::kAlreadyExists) << s.ToString();
  EXPECT_THAT(s.message(), HasSubstr("seq 2"));
  // Within a batch as well: each event above the one before it.
  Status unordered = store_->Append(id, std::vector<Event>{MessageEvent(5, Message::User("e")),
                                                           MessageEvent(4, Message::User("d"))});
  EXPECT_EQ(unordered.code(), Code::kAlreadyExists) << unordered.ToString();
  EXPECT_EQ(store_->Events(id, 0)->size(), 2u);
  EXPECT_EQ(store_->GetSession(id)->last_seq, 3u);
}

// The reads that grow with the log are queries: a page of the log, one
// turn's boundaries, the newest turn_begin or turn_end (whether the newest
// turn is unfinished), each answering what reading the log and cutting it
// would.
TEST_P(StoreTest, QueryEventsAnswersAsTheWholeLogWould) {
  std::string id = NewSession();
  std::vector<Event> log = {MakeEvent(EventType::kTurnBegin, 1, Json::object(), "t1"),
                            MessageEvent(2, Message::User("a"), "t1"),
                            MakeEvent(EventType::kTurnEnd, 3, Json::object(), "t1"),
                            MakeEvent(EventType::kTurnBegin, 4, Json::object(), "t2"),
                            MessageEvent(5, Message::User("b"), "t2")};
  ASSERT_TRUE(store_->Append(id, log).ok());
  auto all = store_->Events(id, 0);
  ASSERT_TRUE(all.ok());
  auto seqs = [](const Result<std::vector<StoredEvent>>& r) {
    std::vector<uint64_t> out;
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    if (r.ok()) {
      for (const StoredEvent& e : *r) out.push_back(e.seq);
    }
    return out;
  };

  EventQuery page;
  page.after_seq = 1;
  page.limit = 2;
  EXPECT_EQ(seqs(store_->QueryEvents(id, page)), (std::vector<uint64_t>{2, 3}));
  page.after_seq = 3;
  page.limit = 10;
  auto tail = store_->QueryEvents(id, page);
  EXPECT_EQ(seqs(tail), (std::vector<uint64_t>{4, 5}));
  ASSERT_EQ(tail->size(), 2u);
  EXPECT_EQ((*tail)[0].json, (*all)[3].json);
  EXPECT_EQ((*tail)[0].type, "turn_begin");
  EXPECT_EQ((*tail)[0].turn_id, "t2");

  EventQuery bounds;
  bounds.turn_id = "t1";
  bounds.types = {"turn_begin", "turn_end"};
  EXPECT_EQ(seqs(store_->QueryEvents(id, bounds)), (std::vector<uint64_t>{1, 3}));

  // The newest turn began and never ended: as UnfinishedTurn of the log.
  auto newest = store_->QueryEvents(id, NewestTurnBoundary());
  ASSERT_TRUE(newest.ok());
  ASSERT_EQ(newest->size(), 1u);
  ASSERT_NE(UnfinishedTurn(*all), nullptr);
  EXPECT_EQ((*newest)[0].seq, UnfinishedTurn(*all)->seq);
  EXPECT_EQ((*newest)[0].type, "turn_begin");
  ASSERT_TRUE(
      store_
          ->Append(id, std::vector<Event>{MakeEvent(EventType::kTurnEnd, 6, Json::object(), "t2"),
                                          MessageEvent(7, Message::User("c"), "t3")})
          .ok());
  newest = store_->QueryEvents(id, NewestTurnBoundary());
  ASSERT_TRUE(newest.ok());
  ASSERT_EQ(newest->size(), 1u);
  EXPECT_EQ((*newest)[0].type, "turn_end");  // every turn ended
  EXPECT_EQ(UnfinishedTurn(*store_->Events(id, 0)), nullptr);

  EXPECT_EQ(store_->QueryEvents("nope", page).status().code(), Code::kNotFound);
  EXPECT_TRUE(store_->QueryEvents(NewSession(), NewestTurnBoundary())->empty());
}

TEST_P(StoreTest, AppendValidates) {
  EXPECT_EQ(store_->Append("nope", std::vector<Event>{MessageEvent(1, Message::User("a"))}).code(),
            Code::kNotFound);
  std::string id = NewSession();
  Event e = MessageEvent(1, Message::User("a"));
  e.session_id = "other";
  EXPECT_EQ(store_->Append(id, std::vector<Event>{e}).code(), Code::kInvalidArgument);
  // Whoever numbers an event stamps its time: an event without ts is refused.
  Event no_ts = MessageEvent(1, Message::User("a"));
  no_ts.ts = 0;
  Status s = store_->Append(id, std::vector<Event>{no_ts});
  EXPECT_EQ(s.code(), Code::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("seq 1 (message) has no ts"));
  EXPECT_EQ(store_->GetSession(id)->last_seq, 0u);
  // Only non-persisted events: OK and nothing stored.
  EXPECT_TRUE(store_->Append(id, std::vector<Event>{MakeEvent(EventType::kTextDelta, 1, {})}).ok());
  EXPECT_EQ(store_->GetSession(id)->last_seq, 0u);
  // ...but not on a session that does not exist.
  EXPECT_EQ(
      store_->Append("nope", std::vector<Event>{MakeEvent(EventType::kTextDelta, 1, {})}).code(),
      Code::kNotFound);
  EXPECT_EQ(store_->UpdateSettings("nope", Json::object(), {}).code(), Code::kNotFound);
}

TEST_P(StoreTest, TitleSkipsTaggedMessages) {
  std::string id = NewSession();
  Message marker = Message::User("continue");
  marker.tag = "todo-loop:continue";
  ASSERT_TRUE(store_->Append(id, std::vector<Event>{MessageEvent(1, marker)}).ok());
  EXPECT_EQ(store_->GetSession(id)->title, "");
  ASSERT_TRUE(store_->Append(id, std::vector<Event>{MessageEvent(2, Message::User("real"))}).ok());
  EXPECT_EQ(store_->GetSession(id)->title, "real");
  ASSERT_TRUE(store_->Append(id, std::vector<Event>{MessageEvent(3, Message::User("later"))}).ok());
  EXPECT_EQ(store_->GetSession(id)->title, "real");
}

TEST_P(StoreTest, CompactionReplay) {
  std::string id = NewSession();
  Message summary = Message::User("summary of 1-3");
  summary.tag = "compaction-summary";
  std::vector<Event> events{
      MessageEvent(1, Message::User("m1")),
      MessageEvent(2, Message::Assistant("m2")),
      MessageEvent(3, Message::User("m3")),
      MessageEvent(4, Message::Assistant("m4")),
      // Informational compaction event (no drop_prefix): no effect.
      MakeEvent(EventType::kCompaction, 5, Json{{"from", 4}, {"to", 2}, {"attempt", 1}}),
      MakeEvent(EventType::kCompaction, 6, Json{{"drop_prefix", 3}, {"summary", ToJson(summary)}}),
      MessageEvent(7, Message::User("m5")),
      // Drop without a summary.
      MakeEvent(EventType::kCompaction, 8, Json{{"drop_prefix", 1}, {"summary", nullptr}}),
  };
  ASSERT_TRUE(store_->Append(id, events).ok());
  auto snap = store_->Load(id, {});
  ASSERT_TRUE(snap.ok()) << snap.status().ToString();
  // [m1 m2 m3 m4] -> [S m4] -> [S m4 m5] -> [m4 m5]
  ASSERT_EQ(snap->messages.size(), 2u);
  EXPECT_EQ(snap->messages[0], Message::Assistant("m4"));
  EXPECT_EQ(snap->messages[1], Message::User("m5"));
}

// A compaction that summarised the running turn's older steps re-inserts
// the user's request after the summary: a reload rebuilds the same view.
TEST_P(StoreTest, CompactionReplayReinsertsTheKeptRequest) {
  std::string id = NewSession();
  Message summary = Message::User("[compacted 3 earlier message(s)]\nsteps");
  summary.tag = "compaction-summary";
  Message request = Message::User("the request");
  std::vector<Event> events{
      MessageEvent(1, request),
      MessageEvent(2, Message::Assistant("step 1")),
      MessageEvent(3, Message::User("result 1")),
      MessageEvent(4, Message::Assistant("step 2")),
      MakeEvent(EventType::kCompaction, 5,
                Json{{"drop_prefix", 3},
                     {"summary", ToJson(summary)},
                     {"kept", Json::array({ToJson(request)})}}),
  };
  ASSERT_TRUE(store_->Append(id, events).ok());
  auto snap = store_->Load(id, {});
  ASSERT_TRUE(snap.ok()) << snap.status().ToString();
  // [R s1 r1 s2] -> [S R s2]
  ASSERT_EQ(snap->messages.size(), 3u);
  EXPECT_EQ(snap->messages[0].tag, "compaction-summary");
  EXPECT_EQ(snap->messages[1], request);
  EXPECT_EQ(snap->messages[2], Message::Assistant("step 2"));
}

TEST_P(StoreTest, CompactionBeyondHistoryIsDataLoss) {
  std::string id = NewSession();
  std::vector<Event> events{MessageEvent(1, Message::User("m1")),
                            MakeEvent(EventType::kCompaction, 2, Json{{"drop_prefix", 5}})};
  ASSERT_TRUE(store_->Append(id, events).ok());
  auto snap = store_->Load(id, {});
  ASSERT_FALSE(snap.ok());
  EXPECT_EQ(snap.error().code(), Code::kDataLoss);
  EXPECT_THAT(snap.error().message(), HasSubstr("seq 2"));
}

class CrashRecoveryTest : public StoreTest {
 protected:
  // user, assistant(tu_a, tu_b), with `tu_a` begun and, if `end_a`, ended.
  std::string SessionWithOpenCalls(bool begin_a, bool end_a) {
    std::string id = NewSession();
    std::vector<Event> events{MessageEvent(1, Message::User("go")),
                              MessageEvent(2, AssistantWithTools({"tu_a", "tu_b"}), "turn_9")};
    uint64_t seq = 3;
    if (begin_a) {
      events.push_back(MakeEvent(EventType::kToolCallBegin, seq++, Json{{"id", "tu_a"}}));
    }
    if (end_a) events.push_back(MakeEvent(EventType::kToolCallEnd, seq++, Json{{"id", "tu_a"}}));
    EXPECT_TRUE(store_->Append(id, events).ok());
    return id;
  }
};
AL_STORE_CONFORMANCE(CrashRecoveryTest);

TEST_P(CrashRecoveryTest, NotBegunAndBegun) {
  std::string id = SessionWithOpenCalls(/*begin_a=*/true, /*end_a=*/false);
  auto snap = store_->Load(id, {});
  ASSERT_TRUE(snap.ok()) << snap.status().ToString();
  EXPECT_TRUE(snap->recovered);
  ASSERT_EQ(snap->messages.size(), 3u);
  const Message& repair = snap->messages.back();
  EXPECT_EQ(repair.role, Role::kUser);
  EXPECT_EQ(repair.tag, "crash-recovery");
  ASSERT_EQ(repair.content.size(), 2u);
  EXPECT_EQ(repair.content[0].type, BlockType::kToolResult);
  EXPECT_EQ(repair.content[0].tool_use_id, "tu_a");
  EXPECT_TRUE(repair.content[0].is_error);
  EXPECT_EQ(repair.content[0].text, kStartedNotFinished);
  EXPECT_EQ(repair.content[1].tool_use_id, "tu_b");
  EXPECT_TRUE(repair.content[1].is_error);
  EXPECT_EQ(repair.content[1].text, "not run: the process stopped before this tool call started");
  EXPECT_EQ(snap->last_seq, 4u);  // events 1..3 plus the repair
  ASSERT_FALSE(snap->warnings.empty());

  // Persisted once: the stored log now holds the repair, a second Load does
  // not add another, and it carries the assistant message's turn id.
  auto stored = store_->Events(id, 0);
  ASSERT_EQ(stored->size(), 4u);
  EXPECT_EQ(stored->back().type, "message");
  EXPECT_EQ(stored->back().turn_id, "turn_9");
  EXPECT_EQ(Json::parse(stored->back().json)["ts"], clock_ms_.load()) << "the store's clock";
  auto again = store_->Load(id, {});
  ASSERT_TRUE(again.ok());
  EXPECT_FALSE(again->recovered);
  EXPECT_EQ(again->messages.size(), 3u);
  EXPECT_EQ(again->messages.back(), repair);
  EXPECT_EQ(store_->Events(id, 0)->size(), 4u);
}

TEST_P(CrashRecoveryTest, EndedButResultLost) {
  std::string id = SessionWithOpenCalls(/*begin_a=*/true, /*end_a=*/true);
  auto snap = store_->Load(id, {});
  ASSERT_TRUE(snap.ok());
  EXPECT_EQ(snap->messages.back().content[0].text, kRanResultLost);
  EXPECT_TRUE(snap->messages.back().content[0].is_error);
}

TEST_P(CrashRecoveryTest, ReadOnlyLoadDoesNotRepair) {
  std::string id = SessionWithOpenCalls(false, false);
  auto snap = store_->Load(id, {.repair = false});
  ASSERT_TRUE(snap.ok());
  EXPECT_FALSE(snap->recovered);
  EXPECT_EQ(snap->messages.size(), 2u);
  EXPECT_EQ(store_->Events(id, 0)->size(), 2u);
}

TEST_P(CrashRecoveryTest, OpenCheckpointCoversMessage) {
  std::string id = SessionWithOpenCalls(false, false);
  Checkpoint cp;
  cp.session_id = id;
  cp.turn_id = "turn_9";
  cp.tool_use_ids = {"tu_a", "tu_b"};
  cp.outstanding.push_back(
      {"p1", PendingKind::kApproval, "tu_a", "read", Json::object(), "ask", "", ""});
  ASSERT_TRUE(store_->SaveCheckpoint(cp).ok());
  auto snap = store_->Load(id, {});
  ASSERT_TRUE(snap.ok());
  EXPECT_FALSE(snap->recovered);
  EXPECT_EQ(snap->messages.size(), 2u);  // the pause keeps the message open
  ASSERT_TRUE(snap->open_checkpoint.has_value());
  EXPECT_EQ(snap->open_checkpoint->outstanding[0].id, "p1");
}

TEST_P(CrashRecoveryTest, DecidedBatchWaitsForItsTurnThenRepairsAsNotRun) {
  // tu_a ran before the pause (its result is in results_so_far); tu_b was
  // approved by a resolver that could not continue the turn.
  std::string id = SessionWithOpenCalls(/*begin_a=*/true, /*end_a=*/true);
  Checkpoint cp;
  cp.session_id = id;
  cp.tool_use_ids = {"tu_a", "tu_b"};
  cp.results_so_far.push_back(ContentBlock::ToolResult("tu_a", "real output", false));
  cp.outstanding.push_back(
      {"pb", PendingKind::kApproval, "tu_b", "read", Json::object(), "ask", "", ""});
  ASSERT_TRUE(store_->SaveCheckpoint(cp).ok());
  auto resolved = store_->Resolve("pb", [](Checkpoint& c, const PendingItem& item) {
    c.decisions.push_back(BatchDecision{item, ApprovalDecision::Allow("test")});
    return Result<ResolveAction>(ResolveAction::kResolved);
  });
  ASSERT_TRUE(resolved.ok() && resolved->closed);

  // Decided: the message stays open for the turn that continues it.
  auto decided = store_->Load(id, {});
  ASSERT_TRUE(decided.ok());
  EXPECT_FALSE(decided->recovered);
  EXPECT_EQ(decided->messages.size(), 2u);
  EXPECT_FALSE(decided->open_checkpoint.has_value());
  ASSERT_TRUE(decided->decided_checkpoint.has_value());
  ASSERT_EQ(decided->decided_checkpoint->decisions.size(), 1u);
  EXPECT_EQ(decided->decided_checkpoint->decisions[0].item.id, "pb");

  // Exactly one claimer gets it.
  auto claimed = store_->ClaimDecided(id);
  ASSERT_TRUE(claimed.ok() && claimed->has_value());
  EXPECT_EQ((*claimed)->decisions.size(), 1u);
  auto again = store_->ClaimDecided(id);
  ASSERT_TRUE(again.ok());
  EXPECT_FALSE(again->has_value());

  // The claimer died before tu_b began: the repair keeps what is known and
  // answers tu_b as not run.
  auto snap = store_->Load(id, {});
  ASSERT_TRUE(snap.ok());
  ASSERT_TRUE(snap->recovered);
  EXPECT_FALSE(snap->decided_checkpoint.has_value());
  const Message& repair = snap->messages.back();
  ASSERT_EQ(repair.content.size(), 2u);
  EXPECT_EQ(repair.content[0].text, "real output");
  EXPECT_FALSE(repair.content[0].is_error);
  EXPECT_EQ(repair.content[1].text, kNotRunNotStarted);
  EXPECT_TRUE(repair.content[1].is_error);
}

TEST_P(CrashRecoveryTest, NoRepairWhileAnotherLiveProcessHoldsTheLock) {
  std::string id = SessionWithOpenCalls(true, false);
  // Our parent (the test runner's shell or ctest) is a live process that is
  // not us: its calls may still be running.
  auto lock = store_->AcquireLock(id, getppid());
  ASSERT_TRUE(lock.ok()) << lock.status().ToString();
  auto snap = store_->Load(id, {});
  ASSERT_TRUE(snap.ok());
  EXPECT_FALSE(snap->recovered);
  EXPECT_EQ(snap->messages.size(), 2u);
  ASSERT_EQ(snap->warnings.size(), 1u);
  EXPECT_THAT(snap->warnings[0].message, HasSubstr("not repairing"));
  lock->reset();
  // Released: the next Load repairs.
  EXPECT_TRUE(store_->Load(id, {})->recovered);
}

TEST_P(CrashRecoveryTest, RepairWhenWeHoldTheLock) {
  std::string id = SessionWithOpenCalls(false, false);
  auto lock = store_->AcquireLock(id, getpid());
  ASSERT_TRUE(lock.ok());
  EXPECT_TRUE(store_->Load(id, {})->recovered);
}

TEST_P(StoreTest, CorruptNonHistoryRowIsReportedNotDropped) {
  std::string id = NewSession();
  std::vector<Event> events{
      MessageEvent(1, Message::User("a")),
      MakeEvent(EventType::kNotice, 2, Json{{"level", "info"}, {"text", "hello"}}),
      MessageEvent(3, Message::Assistant("b")),
  };
  ASSERT_TRUE(store_->Append(id, events).ok());
  CorruptRow(id, 2);
  auto snap = store_->Load(id, {});
  ASSERT_TRUE(snap.ok()) << snap.status().ToString();
  EXPECT_EQ(snap->messages.size(), 2u);
  ASSERT_EQ(snap->warnings.size(), 1u);
  EXPECT_EQ(snap->warnings[0].seq, 2u);
  EXPECT_THAT(snap->warnings[0].message, HasSubstr("corrupt"));
  // Export still shows the row verbatim.
  auto stored = store_->Events(id, 0);
  ASSERT_EQ(stored->size(), 3u);
  EXPECT_EQ((*stored)[1].json, "{\"type\":\"mess");
}

TEST_P(StoreTest, CorruptMessageRowIsDataLoss) {
  std::string id = NewSession();
  std::vector<Event> events{MessageEvent(1, Message::User("a")),
                            MessageEvent(2, Message::Assistant("b"))};
  ASSERT_TRUE(store_->Append(id, events).ok());
  CorruptRow(id, 2);
  auto snap = store_->Load(id, {});
  ASSERT_FALSE(snap.ok());
  EXPECT_EQ(snap.error().code(), Code::kDataLoss);
  EXPECT_THAT(snap.error().message(), HasSubstr("seq 2"));
  EXPECT_THAT(snap.error().message(), HasSubstr(id));
}

TEST_P(StoreTest, PinnedSettingsAreStoredWithTheSessionAndReplacedWithTheirEvent) {
  NewSessionParams p;
  p.workspace = "/work/ws";
  p.settings = Json{{"model", "m1"}, {"deny", Json::array({Json{{"rule", "bash(rm*)"}}})}};
  auto created = store_->CreateSession(p);
  ASSERT_TRUE(created.ok()) << created.status().ToString();
  auto got = store_->GetSettings(created->id);
  ASSERT_TRUE(got.ok() && got->has_value());
  EXPECT_EQ(**got, p.settings);

  // The settings and their `settings` event commit together...
  Json changed = p.settings;
  changed["model"] = "m2";
  Event ev = MakeEvent(EventType::kSettings, 1, Json{{"changes", Json::array()}});
  ASSERT_TRUE(store_->UpdateSettings(created->id, changed, {&ev, 1}).ok());
  EXPECT_EQ(**store_->GetSettings(created->id), changed);
  auto events = store_->Events(created->id, 0);
  ASSERT_TRUE(events.ok());
  ASSERT_EQ(events->size(), 1u);
  EXPECT_EQ((*events)[0].type, "settings");

  // ...or not at all: a seq that is already stored leaves the settings as
  // they were.
  Json again = changed;
  again["model"] = "m3";
  Status dup = store_->UpdateSettings(created->id, again, {&ev, 1});
  EXPECT_EQ(dup.code(), Code::kAlreadyExists) << dup.ToString();
  EXPECT_EQ(**store_->GetSettings(created->id), changed);

  EXPECT_EQ(store_->UpdateSettings(created->id, Json::array(), {}).code(), Code::kInvalidArgument);
  EXPECT_EQ(store_->GetSettings("no-such-session").status().code(), Code::kNotFound);
  // A session created without settings has none pinned.
  auto plain = store_->GetSettings(NewSession());
  ASSERT_TRUE(plain.ok());
  EXPECT_FALSE(plain->has_value());
}

TEST_P(StoreTest, State) {
  std::string id = NewSession();
  auto missing = store_->GetState(id, "todo");
  ASSERT_TRUE(missing.ok());
  EXPECT_FALSE(missing->has_value());
  ASSERT_TRUE(store_->SetState(id, "todo", Json{{"tasks", Json::array({"a"})}}).ok());
  ASSERT_TRUE(store_->SetState(id, "todo", Json{{"tasks", Json::array({"a", "b"})}}).ok());
  ASSERT_TRUE(store_->SetState(id, "nudge", "check the tests").ok());
  auto todo = store_->GetState(id, "todo");
  ASSERT_TRUE(todo.ok() && todo->has_value());
  EXPECT_EQ((**todo)["tasks"].size(), 2u);
  EXPECT_EQ(**store_->GetState(id, "nudge"), "check the tests");
  EXPECT_EQ(store_->SetState("nope", "k", 1).code(), Code::kNotFound);
}

// Stored text that is not what the store wrote is kDataLoss, naming what is
// corrupt; a prefix two sessions share is ambiguous.
TEST_P(StoreTest, CorruptStateAndSettingsAreDataLossAndAPrefixMayBeAmbiguous) {
  std::string id = NewSession();
  ASSERT_TRUE(store_->SetState(id, "todo", Json::object()).ok());
  ExecSql("UPDATE session_state SET json = '{not json' WHERE key = 'todo'");
  auto state = store_->GetState(id, "todo");
  ASSERT_FALSE(state.ok());
  EXPECT_EQ(state.status().code(), Code::kDataLoss);
  EXPECT_THAT(state.status().message(), HasSubstr("todo"));
  ExecSql("UPDATE sessions SET settings = '[1]' WHERE id = '" + id + "'");
  auto settings = store_->GetSettings(id);
  ASSERT_FALSE(settings.ok());
  EXPECT_EQ(settings.status().code(), Code::kDataLoss);
  EXPECT_THAT(settings.status().message(), HasSubstr("not a JSON object"));

  NewSessionParams p;
  p.workspace = "/w";
  p.id = "same-prefix-1";
  ASSERT_TRUE(store_->CreateSession(p).ok());
  p.id = "same-prefix-2";
  ASSERT_TRUE(store_->CreateSession(p).ok());
  auto found = store_->FindSession("same-prefix");
  ASSERT_FALSE(found.ok());
  EXPECT_EQ(found.status().code(), Code::kInvalidArgument);
  EXPECT_THAT(found.status().message(), HasSubstr("ambiguous"));
  EXPECT_EQ(*store_->FindSession("same-prefix-2"), "same-prefix-2");
}

TEST_P(StoreTest, SurvivesReopen) {
  std::string id = NewSession();
  ASSERT_TRUE(store_->Append(id, std::vector<Event>{MessageEvent(1, Message::User("a"))}).ok());
  store_.reset();
  store_ = OpenStore();
  ASSERT_NE(store_, nullptr);
  auto snap = store_->Load(id, {});
  ASSERT_TRUE(snap.ok());
  EXPECT_EQ(snap->messages.size(), 1u);
}

}  // namespace
}  // namespace agentloop::store
