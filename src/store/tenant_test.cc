// Tenant views (SessionStore::ForTenant): every by-id call, one table of
// cases, run against both stores. Another tenant's session or pending item is
// an unknown id to a view, and a call on it changes no row.
#include <functional>

#include "store/store_test_util.h"

namespace agentloop::store {
namespace {

// What one tenant owns: a paused session (settings, events, an open
// checkpoint with one pending item) and a session whose last tool calls have
// no results (a Load that may repair would write to it).
struct Victims {
  std::string session;
  std::string pending;
  std::string broken;
};

// Whether a by-id result found its row: OK is found, kNotFound is not; any
// other error fails the test (and counts as found, so it cannot pass).
bool Found(const Status& s) {
  if (s.ok()) return true;
  EXPECT_EQ(s.code(), Code::kNotFound) << s.ToString();
  return s.code() != Code::kNotFound;
}
template <class T>
bool Found(const Result<T>& r) {
  return Found(r.status());
}
template <class T>
bool FoundValue(const Result<std::optional<T>>& r) {
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  return !r.ok() || r->has_value();
}

struct ByIdCase {
  const char* name;
  // Makes the call through `view`; whether it saw the victim's row.
  std::function<bool(TenantStore& view, const Victims& v)> sees;
};

const ByIdCase kByIdCases[] = {
    {"GetSession", [](TenantStore& t, const Victims& v) { return Found(t.GetSession(v.session)); }},
    {"Events", [](TenantStore& t, const Victims& v) { return Found(t.Events(v.session, 0)); }},
    {"QueryEvents",
     [](TenantStore& t, const Victims& v) {
       return Found(t.QueryEvents(v.session, NewestTurnBoundary()));
     }},
    {"LoadWithRepair",
     [](TenantStore& t, const Victims& v) { return Found(t.Load(v.broken, LoadOptions{})); }},
    {"GetSettings",
     [](TenantStore& t, const Victims& v) { return Found(t.GetSettings(v.session)); }},
    {"RelabelSession",
     [](TenantStore& t, const Victims& v) {
       return Found(t.RelabelSession(v.session, "stolen", Json{{"by", "another tenant"}}));
     }},
    {"RemoveSession",
     [](TenantStore& t, const Victims& v) { return Found(t.RemoveSession(v.session)); }},
    {"LookupPending",
     [](TenantStore& t, const Victims& v) { return FoundValue(t.LookupPending(v.pending)); }},
    {"GetPending",
     [](TenantStore& t, const Victims& v) { return FoundValue(t.GetPending(v.pending)); }},
    {"Resolve",
     [](TenantStore& t, const Victims& v) {
       bool ran = false;
       ResolveFn fn = [&](Checkpoint& cp, const PendingItem& item) -> Result<ResolveAction> {
         ran = true;
         cp.results_so_far.push_back(ContentBlock::ToolResult(item.tool_use_id, "ok", false));
         return ResolveAction::kResolved;
       };
       auto out = t.Resolve(v.pending, fn);
       EXPECT_TRUE(out.ok()) << out.status().ToString();
       EXPECT_EQ(ran, out.ok() && !out->already_resolved);
       return !out.ok() || !out->already_resolved;
     }},
};

class TenantStoreTest : public StoreTest {
 protected:
  // A session of `tenant` whose history ends with a call of `tool_use_id`.
  std::string SessionWithCall(const std::string& tenant, const std::string& tool_use_id) {
    NewSessionParams p;
    p.workspace = "/work/ws";
    p.provider = "script";
    p.model = "m1";
    p.tenant = tenant;
    p.settings = Json{{"model", "m1"}};
    auto info = store_->CreateSession(p);
    EXPECT_TRUE(info.ok()) << info.status().ToString();
    const std::string id = info.ok() ? info->id : "";
    EXPECT_TRUE(
        store_
            ->Append(id, std::vector<Event>{MessageEvent(1, Message::User("go")),
                                            MessageEvent(2, AssistantWithTools({tool_use_id}))})
            .ok());
    return id;
  }

  Victims Own(const std::string& tenant) {
    Victims v;
    v.session = SessionWithCall(tenant, "tu_0");
    v.pending = NewId("apr");
    Checkpoint cp;
    cp.session_id = v.session;
    cp.turn_id = "turn_1";
    cp.tool_use_ids.push_back("tu_0");
    cp.outstanding.push_back({v.pending, PendingKind::kApproval, "tu_0", "bash",
                              Json{{"command", "make"}}, "ask rule", "", ""});
    EXPECT_TRUE(store_->SaveCheckpoint(cp).ok());
    v.broken = SessionWithCall(tenant, "tu_a");
    return v;
  }

  // Every row a by-id call could change, read through the operator's store.
  struct Rows {
    std::vector<SessionInfo> sessions;
    int64_t events = 0;
    int64_t unresolved = 0;
    int64_t checkpoint_states = 0;
    std::string results_so_far;
  };
  Rows ReadRows() {
    Rows r;
    SessionListOptions all;
    all.limit = 0;
    auto list = store_->ListSessions(all);
    EXPECT_TRUE(list.ok());
    if (list.ok()) r.sessions = *list;
    r.events = QueryInt("SELECT COUNT(*) FROM " + EventsTable());
    r.unresolved = QueryInt("SELECT COUNT(*) FROM pending_index WHERE NOT resolved");
    r.checkpoint_states = QueryInt(std::string("SELECT COALESCE(SUM(") +
                                   (sqlite() ? "closed" : "state") + "), -1) FROM checkpoints");
    for (const SessionInfo& s : r.sessions) {
      auto cp = store_->OpenCheckpoint(s.id);
      if (cp.ok() && cp->has_value()) r.results_so_far += DumpJson(ToJson(**cp));
    }
    return r;
  }
  void ExpectSameRows(const Rows& before, const char* call) {
    Rows after = ReadRows();
    EXPECT_TRUE(after.sessions == before.sessions) << call << " changed a session row";
    EXPECT_EQ(after.events, before.events) << call;
    EXPECT_EQ(after.unresolved, before.unresolved) << call;
    EXPECT_EQ(after.checkpoint_states, before.checkpoint_states) << call;
    EXPECT_EQ(after.results_so_far, before.results_so_far) << call;
  }
};
AL_STORE_CONFORMANCE(TenantStoreTest);

TEST_P(TenantStoreTest, AnotherTenantsIdsAreUnknownAndUntouched) {
  // "acme"'s rows seen by "globex" and by the command line's tenant (""),
  // and a command-line session seen by "acme".
  const Victims acme = Own("acme");
  const Victims cli = Own("");
  const struct {
    const Victims& victims;
    std::string viewer;
  } attempts[] = {{acme, "globex"}, {acme, ""}, {cli, "acme"}};
  for (const auto& a : attempts) {
    auto view = store_->ForTenant(a.viewer);
    ASSERT_NE(view, nullptr);
    EXPECT_EQ(view->tenant(), a.viewer);
    for (const ByIdCase& c : kByIdCases) {
      SCOPED_TRACE(std::string(c.name) + " by '" + a.viewer + "'");
      const Rows before = ReadRows();
      EXPECT_FALSE(c.sees(*view, a.victims));
      ExpectSameRows(before, c.name);
    }
  }
}

TEST_P(TenantStoreTest, TheOwnersViewSeesItsRows) {
  for (const std::string tenant : {"acme", ""}) {
    auto view = store_->ForTenant(tenant);
    for (const ByIdCase& c : kByIdCases) {
      SCOPED_TRACE(std::string(c.name) + " by '" + tenant + "'");
      // Fresh rows for each call: removing, resolving and repairing change them.
      EXPECT_TRUE(c.sees(*view, Own(tenant)));
    }
  }
}

TEST_P(TenantStoreTest, TheOwnersViewWritesAsTheStoreDoes) {
  const Victims v = Own("acme");
  auto view = store_->ForTenant("acme");
  ASSERT_TRUE(view->RelabelSession(v.session, "renamed", Json{{"k", 1}}).ok());
  auto info = store_->GetSession(v.session);
  ASSERT_TRUE(info.ok());
  EXPECT_EQ(info->title, "renamed");
  EXPECT_EQ(info->metadata, (Json{{"k", 1}}));

  auto loaded = view->Load(v.broken, LoadOptions{});
  ASSERT_TRUE(loaded.ok()) << loaded.status().ToString();
  EXPECT_TRUE(loaded->recovered);
  EXPECT_EQ(store_->Events(v.broken, 0)->size(), 3u);

  auto lookup = view->LookupPending(v.pending);
  ASSERT_TRUE(lookup.ok() && lookup->has_value());
  EXPECT_EQ((*lookup)->record.session_id, v.session);
  EXPECT_EQ((*lookup)->state, PendingLookup::State::kOutstanding);

  ASSERT_TRUE(view->RemoveSession(v.session).ok());
  EXPECT_EQ(store_->GetSession(v.session).status().code(), Code::kNotFound);
  EXPECT_FALSE(store_->LookupPending(v.pending)->has_value());
}

}  // namespace
}  // namespace agentloop::store
