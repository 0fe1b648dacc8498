// The Engine: opening a session (create or load, lock, pinned settings,
// the end of a cut turn), the inbox of pending items across a tree of
// subagents, and the providers it builds. What a session is built from (the
// tool registry, the permission policy, the hooks, the system prompt) comes
// from the specification through engine/wiring.h; the provider is picked
// here, the approver in session_turns.cc.
#include "agentloop/engine.h"

#include "engine/engine_impl.h"

namespace agentloop {

std::string HowToConfigureProvider() {
  return "No model provider is configured. Choose one of:\n"
         "  export OPENAI_API_KEY=sk-...        (OpenAI; --provider openai, the default)\n"
         "  export ANTHROPIC_API_KEY=sk-ant-... and pass --provider anthropic\n"
         "  --base-url http://127.0.0.1:8080/v1  (a local OpenAI-compatible server: llama.cpp, "
         "vLLM, Ollama)\n"
         "  --provider script --script FILE      (replay a scripted conversation, offline)\n"
         "or set them in ~/.config/agentloop/config.toml:\n"
         "  [provider]\n"
         "  kind = \"anthropic\"\n"
         "  model = \"claude-sonnet-4-5\"\n";
}

namespace {

std::string DefaultModel(ProviderKind provider) {
  switch (provider) {
    case ProviderKind::kAnthropic:
      return "claude-sonnet-4-5";
    case ProviderKind::kOpenAIResponses:
      return "gpt-5";
    case ProviderKind::kScript:
      return "script";
    case ProviderKind::kOpenAI:
      break;
  }
  return "gpt-4.1";
}

// A stored session opens only with the extensions it was created with (by
// name): its history may use their tools, its hooks may have guarded it.
Status CheckExtensions(const std::string& session_id, const Json& stored,
                       const SessionExtensions& given) {
  Result<PinnedExtensions> pinned = PinnedExtensionsFromJson(stored);
  if (!pinned.ok()) return DataLoss("session " + session_id + ": " + pinned.error().message());
  std::vector<std::string> missing;
  for (const std::string& name : pinned->tools) {
    bool found = false;
    for (const auto& t : given.tools) found = found || (t && t->spec().name == name);
    if (!found) missing.push_back("tool '" + name + "'");
  }
  for (const std::string& name : pinned->hooks) {
    bool found = false;
    for (const auto& h : given.hooks) found = found || (h && h->name() == name);
    if (!found) missing.push_back("hook '" + name + "'");
  }
  if (pinned->provider_factory && !given.provider_factory) missing.push_back("a provider factory");
  if (missing.empty()) return Status::Ok();
  std::string list;
  for (const std::string& m : missing) list += (list.empty() ? "" : ", ") + m;
  return FailedPrecondition("session " + session_id +
                            " was created with extensions this process does not give: " + list +
                            " (pass them in SessionOptions::extensions to open it)");
}

// The provider a session's options describe, environment defaults applied.
ProviderConfig ProviderConfigFor(const SessionOptions& o, const EnvMap& env) {
  ProviderConfig pc;
  pc.kind = std::string(ProviderKindName(o.provider));
  pc.model = o.model;
  pc.base_url = o.base_url;
  pc.api_key = o.api_key;
  pc.script_path = o.script_path;
  pc.use_max_tokens_field = o.use_max_tokens_field;
  pc.images = o.images;
  return WithEnvDefaults(pc, env);
}

// A remote provider needs an API key, unless a base URL was given (a local
// server may want none).
bool Configured(const ProviderConfig& pc, const SessionOptions& o) {
  return !pc.api_key.empty() || !o.base_url.empty();
}

}  // namespace

Status EngineImpl::Init() {
  std::filesystem::path dir = options_.data_dir;
  if (dir.empty()) {
    AL_ASSIGN_OR_RETURN(dir, DefaultDataDir(options_.env));
  }
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return Unavailable("cannot create data directory " + dir.string() + ": " + ec.message());
  data_dir_ = dir;
  if (options_.preconnect_for) {
    const ProviderConfig pc = ProviderConfigFor(*options_.preconnect_for, options_.env);
    if (IsRemoteProvider(options_.preconnect_for->provider) &&
        !options_.preconnect_for->extensions.provider_factory &&
        Configured(pc, *options_.preconnect_for) && !pc.base_url.empty()) {
      http()->Preconnect(pc.base_url, pc.connect_timeout);
    }
  }
  if (options_.store) {
    store_ = options_.store;
    return Status::Ok();
  }
  if (!options_.store_url.empty()) {
    if (!IsPostgresUrl(options_.store_url)) {
      return InvalidArgument(
          "store.url must be a postgresql:// (or postgres://) URL; leave it empty for the "
          "SQLite database in the data directory");
    }
    PostgresStoreOptions pg_options;
    pg_options.lock_ttl = options_.store_lease_ttl;
    if (options_.store_connections > 0) pg_options.pool_size = options_.store_connections;
    pg_options.pool_timeout = options_.store_pool_timeout;
    AL_ASSIGN_OR_RETURN(auto pg, OpenPostgresStore(options_.store_url, std::move(pg_options)));
    store_ = std::move(pg);
    return Status::Ok();
  }
  SqliteStoreOptions store_options;
  store_options.sync = options_.store_sync;
  AL_ASSIGN_OR_RETURN(auto store, OpenSqliteStore(dir / kSessionsDbName, store_options));
  store_ = std::move(store);
  return Status::Ok();
}

std::shared_ptr<HttpClient> EngineImpl::http() {
  std::lock_guard<std::mutex> lock(mu_);
  if (!http_) {
    HttpClientOptions o;
    o.io_context = options_.io_context;
    http_ = HttpClient::Create(std::move(o));
  }
  return http_;
}

Result<std::filesystem::path> EngineImpl::CanonicalWorkspace(std::filesystem::path ws) {
  std::error_code ec;
  if (ws.empty()) ws = std::filesystem::current_path(ec);
  auto canon = std::filesystem::canonical(ws, ec);
  if (ec) {
    return InvalidArgument("workspace " + ws.string() +
                           " is not an accessible directory: " + ec.message());
  }
  if (!std::filesystem::is_directory(canon)) {
    return InvalidArgument("workspace " + canon.string() + " is not a directory");
  }
  return canon;
}

Result<std::optional<engine::AppliedSettings>> EngineImpl::PinnedOptions(
    const std::string& session_id, const SessionOptions& caller) {
  AL_ASSIGN_OR_RETURN(std::optional<Json> stored, store_->GetSettings(session_id));
  if (!stored) return std::optional<engine::AppliedSettings>();
  Result<SessionOptions> pinned = PinnedSettingsFromJson(*stored);
  if (!pinned.ok()) {
    return DataLoss("session " + session_id + ": " + pinned.error().message());
  }
  SettingsOverrides overrides = caller.overrides;
  if (overrides.workspace) {
    AL_ASSIGN_OR_RETURN(overrides.workspace, CanonicalWorkspace(*overrides.workspace));
  }
  AL_ASSIGN_OR_RETURN(engine::AppliedSettings applied, engine::ApplyOverrides(*pinned, overrides));
  SessionOptions& o = applied.options;
  o.session_id = caller.session_id;
  o.continue_latest = caller.continue_latest;
  o.interactive = caller.interactive;
  // The secrets come from the variables the settings name (looked up when
  // the provider or approver is built); the caller's are the fallback.
  o.api_key = caller.api_key;
  o.webhook_secret = caller.webhook_secret;
  o.extensions = caller.extensions;
  o.mcp_servers = caller.mcp_servers;
  AL_RETURN_IF_ERROR(CheckExtensions(session_id, *stored, caller.extensions));
  auto ws = CanonicalWorkspace(o.workspace);
  if (!ws.ok()) {
    return FailedPrecondition("session " + session_id + " runs in " + o.workspace.string() +
                              ", which is no longer an accessible directory");
  }
  o.workspace = *ws;
  return std::optional<engine::AppliedSettings>(std::move(applied));
}

Result<std::unique_ptr<SessionImpl>> EngineImpl::OpenImpl(SessionOptions options,
                                                          LockMode lock_mode) {
  AL_ASSIGN_OR_RETURN(options.workspace, CanonicalWorkspace(options.workspace));
  if (options.model.empty()) options.model = DefaultModel(options.provider);

  std::string session_id;
  if (!options.session_id.empty()) {
    AL_ASSIGN_OR_RETURN(session_id, store_->FindSession(options.session_id));
  } else if (options.continue_latest) {
    AL_ASSIGN_OR_RETURN(SessionInfo newest, store_->NewestInWorkspace(options.workspace));
    session_id = newest.id;
  }
  SessionInfo info;
  std::unique_ptr<SessionLock> lock;
  SessionSnapshot snap;
  bool pinned = false;
  std::vector<engine::SettingChange> changes;
  const auto pid = static_cast<int64_t>(getpid());
  if (session_id.empty()) {
    NewSessionParams p;
    p.workspace = options.workspace;
    p.provider = std::string(ProviderKindName(options.provider));
    p.model = options.model;
    p.command = options.command;
    p.tenant = options.tenant;
    p.agent = options.agent;
    p.metadata = options.metadata;
    p.first_message = options.title;
    p.parent_id = options.subagents.parent_id;
    if (options.system_prompt && options.system_prompt_source.empty()) {
      options.system_prompt_source = "(given)";
    }
    p.settings = PinnedSettingsToJson(options);
    pinned = true;
    // Created and locked in one commit.
    AL_ASSIGN_OR_RETURN(auto created, store_->CreateLockedSession(p, pid));
    info = std::move(created.info);
    lock = std::move(created.lock);
    // Created just now and locked by this process: no history yet, so its
    // snapshot is its row (what Load would read back; a store test holds
    // the two equal), without a read of the event log.
    snap.info = info;
  } else {
    AL_ASSIGN_OR_RETURN(info, store_->GetSession(session_id));
    // The pinned settings are checked before the lock is taken: a refused
    // override leaves the session as it was.
    AL_ASSIGN_OR_RETURN(std::optional<engine::AppliedSettings> applied,
                        PinnedOptions(info.id, options));
    if (applied) {
      options = std::move(applied->options);
      changes = std::move(applied->changes);
      pinned = true;
    }
    Result<std::unique_ptr<SessionLock>> locked = store_->AcquireLock(info.id, pid);
    if (locked.ok()) {
      lock = std::move(*locked);
    } else if (lock_mode != LockMode::kIfFree || locked.error().code() != Code::kBusy) {
      return locked.error();
    }
    LoadOptions load;
    load.repair = lock != nullptr;  // the holder's tool calls may be running
    AL_ASSIGN_OR_RETURN(snap, store_->Load(info.id, load));
    // Taken over: a turn its previous holder left unfinished ends first,
    // whatever runs next.
    if (lock) AL_RETURN_IF_ERROR(EndCutTurn(*lock, snap, NowMs()));
    info = snap.info;
  }
  auto session = std::make_unique<SessionImpl>(*this, std::move(options), info, std::move(lock),
                                               std::move(snap), pinned, std::move(changes));
  AL_RETURN_IF_ERROR(session->Init());
  return session;
}

Result<std::optional<PendingRecord>> EngineImpl::FindPending(const std::string& pending_id) {
  AL_ASSIGN_OR_RETURN(std::optional<PendingRecord> exact, store_->GetPending(pending_id));
  if (exact || IsWholePendingId(pending_id)) return exact;
  if (pending_id.size() < 4) {
    return InvalidArgument("pending id prefix '" + pending_id +
                           "' is too short (at least 4 characters)");
  }
  AL_ASSIGN_OR_RETURN(std::vector<PendingRecord> open, store_->ListPending(std::nullopt));
  std::optional<PendingRecord> found;
  for (PendingRecord& r : open) {
    if (!r.item.id.starts_with(pending_id)) continue;
    if (found) return InvalidArgument("pending id prefix '" + pending_id + "' is ambiguous");
    found = std::move(r);
  }
  return found;
}

Result<std::vector<PendingRecord>> EngineImpl::ListPending(std::optional<std::string> session_id) {
  std::vector<PendingRecord> out;
  if (session_id) {
    AL_ASSIGN_OR_RETURN(std::string full, store_->FindSession(*session_id));
    AL_ASSIGN_OR_RETURN(std::vector<PendingRecord> own,
                        store_->ListPending(std::string_view(full)));
    AL_ASSIGN_OR_RETURN(std::string root, RootOf(full));
    for (const PendingRecord& r : own) AL_RETURN_IF_ERROR(ExpandPending(r, root, out, 0));
    return out;
  }
  AL_ASSIGN_OR_RETURN(std::vector<PendingRecord> all, store_->ListPending(std::nullopt));
  std::map<std::string, std::pair<std::string, std::string>> seen;  // id -> root, path
  for (PendingRecord& r : all) {
    if (r.item.kind == PendingKind::kSubagent) continue;
    auto it = seen.find(r.session_id);
    if (it == seen.end()) {
      AL_ASSIGN_OR_RETURN(std::string root, RootOf(r.session_id));
      AL_ASSIGN_OR_RETURN(std::string path, PathOf(r.session_id));
      it = seen.emplace(r.session_id, std::make_pair(root, path)).first;
    }
    r.root_session_id = it->second.first;
    if (r.item.path.empty()) r.item.path = it->second.second;
    out.push_back(std::move(r));
  }
  return out;
}

Result<std::vector<PendingItem>> EngineImpl::PendingOfTree(const std::string& session_id,
                                                           const std::vector<PendingItem>& items) {
  bool any = false;
  for (const PendingItem& p : items) any = any || p.kind == PendingKind::kSubagent;
  if (!any) return items;
  std::vector<PendingRecord> out;
  for (const PendingItem& p : items) {
    PendingRecord r;
    r.session_id = session_id;
    r.item = p;
    AL_RETURN_IF_ERROR(ExpandPending(r, "", out, 0));
  }
  std::vector<PendingItem> flat;
  for (PendingRecord& r : out) flat.push_back(std::move(r.item));
  return flat;
}

Result<std::optional<std::string>> EngineImpl::FindChild(const std::string& parent_id,
                                                         const std::string& turn_id,
                                                         const std::string& tool_use_id) {
  if (turn_id.empty() || tool_use_id.empty()) return std::optional<std::string>();
  SessionListOptions lo;
  lo.parent_id = parent_id;
  lo.limit = 0;
  AL_ASSIGN_OR_RETURN(std::vector<SessionInfo> children, store_->ListSessions(lo));
  for (const SessionInfo& c : children) {
    AL_ASSIGN_OR_RETURN(std::optional<Json> settings, store_->GetSettings(c.id));
    if (!settings || !settings->contains("subagent")) continue;
    const Json& sa = (*settings)["subagent"];
    if (sa.value("parent_turn_id", std::string()) == turn_id &&
        sa.value("tool_use_id", std::string()) == tool_use_id) {
      return std::optional<std::string>(c.id);
    }
  }
  return std::optional<std::string>();
}

Result<std::optional<std::string>> EngineImpl::WakeCallers(const SessionInfo& child) {
  SessionInfo cur = child;
  while (!cur.parent_id.empty()) {
    AL_ASSIGN_OR_RETURN(std::optional<Checkpoint> cp, store_->OpenCheckpoint(cur.parent_id));
    if (!cp) return std::optional<std::string>();
    const PendingItem* waiting = nullptr;
    for (const PendingItem& p : cp->outstanding) {
      if (p.kind == PendingKind::kSubagent && p.child_session_id == cur.id) waiting = &p;
    }
    if (waiting == nullptr) return std::optional<std::string>();
    AL_ASSIGN_OR_RETURN(std::string path, PathOf(cur.id));
    Event logged = MakeEvent(
        DecisionData{.tool_use_id = waiting->tool_use_id,
                     .tool = waiting->tool,
                     .decision = Decision::kAllow,
                     .reason = "the items of subagent " + path + " are decided: it continues",
                     .rule = "",
                     .by = "subagent",
                     .edited = false,
                     .pending_id = waiting->id},
        cur.parent_id, cp->turn_id);
    logged.ts = NowMs();
    auto record = [](Checkpoint& c, const PendingItem& stored) -> Result<ResolveAction> {
      c.decisions.push_back(BatchDecision{stored, ApprovalDecision::Allow("subagent")});
      return ResolveAction::kResolved;
    };
    AL_ASSIGN_OR_RETURN(ResolveOutcome outcome, store_->Resolve(waiting->id, record, {&logged, 1}));
    if (outcome.already_resolved || !outcome.closed) return std::optional<std::string>();
    AL_ASSIGN_OR_RETURN(cur, store_->GetSession(cur.parent_id));
  }
  if (cur.id == child.id) return std::optional<std::string>();
  return std::optional<std::string>(cur.id);
}

Result<PolicyVerdict> EngineImpl::Evaluate(const SessionOptions& options, const ToolCall& call) {
  AL_ASSIGN_OR_RETURN(std::string id, store_->FindSession(options.session_id));
  AL_ASSIGN_OR_RETURN(SessionInfo info, store_->GetSession(id));
  SessionOptions opts = OptionsForStored(info, options);
  AL_ASSIGN_OR_RETURN(std::optional<engine::AppliedSettings> applied, PinnedOptions(id, opts));
  if (applied) opts = std::move(applied->options);
  AL_ASSIGN_OR_RETURN(opts.workspace, CanonicalWorkspace(opts.workspace));
  engine::WiringContext ctx = engine::MakeWiringContext(options_.env, data_dir());
  ctx.hidden_paths = options_.sandbox_hidden;
  if (options_.tenant_user_scopes) ctx.user_scope_tenant = info.tenant;
  ctx.start_mcp_servers = false;
  AL_ASSIGN_OR_RETURN(engine::WiredTools tools, engine::WireTools(opts, ctx));
  const Tool* tool = tools.registry.Find(call.name);
  if (tool == nullptr) {
    return InvalidArgument("session " + id + " has no tool '" + call.name + "'");
  }
  AL_ASSIGN_OR_RETURN(engine::WiredPolicy policy, engine::WirePolicy(opts, tools.registry, ctx));
  return policy.rules->Evaluate(tool->spec(), call);
}

Result<std::string> EngineImpl::RootOf(std::string session_id) {
  for (int hops = 0; hops < kMaxTreeHops; ++hops) {
    AL_ASSIGN_OR_RETURN(SessionInfo info, store_->GetSession(session_id));
    if (info.parent_id.empty()) return info.id;
    session_id = info.parent_id;
  }
  return DataLoss("session " + session_id + ": its chain of parent sessions does not end");
}

Result<std::string> EngineImpl::PathOf(const std::string& session_id) {
  AL_ASSIGN_OR_RETURN(std::optional<Json> settings, store_->GetSettings(session_id));
  if (!settings || !settings->contains("subagent")) return std::string();
  return (*settings)["subagent"].value("path", std::string());
}

Status EngineImpl::ExpandPending(const PendingRecord& r, const std::string& root,
                                 std::vector<PendingRecord>& out, int depth) {
  if (r.item.kind != PendingKind::kSubagent) {
    PendingRecord c = r;
    c.root_session_id = root;
    if (c.item.path.empty()) {
      AL_ASSIGN_OR_RETURN(c.item.path, PathOf(c.session_id));
    }
    out.push_back(std::move(c));
    return Status::Ok();
  }
  if (depth >= kMaxTreeHops) return Status::Ok();
  AL_ASSIGN_OR_RETURN(std::vector<PendingRecord> children,
                      store_->ListPending(std::string_view(r.item.child_session_id)));
  for (const PendingRecord& c : children) {
    AL_RETURN_IF_ERROR(ExpandPending(c, root, out, depth + 1));
  }
  return Status::Ok();
}

Result<std::unique_ptr<ModelProvider>> EngineImpl::MakeModelProvider(const SessionOptions& o,
                                                                     const std::string& who) {
  SessionOptions with_key = o;
  if (!o.api_key_env.empty()) {
    auto it = options_.env.find(o.api_key_env);
    if (it != options_.env.end() && !it->second.empty()) {
      with_key.api_key = it->second;
    } else if (with_key.api_key.empty()) {
      return InvalidArgument("the API key of " + who + " comes from $" + o.api_key_env +
                             ", which is not set");
    }
  }
  const ProviderConfig pc = ProviderConfigFor(with_key, options_.env);
  const bool remote = IsRemoteProvider(o.provider);
  if (remote && !Configured(pc, with_key)) {
    const std::string kind(ProviderKindName(o.provider));
    const std::string var =
        o.provider == ProviderKind::kAnthropic ? "ANTHROPIC_API_KEY" : "OPENAI_API_KEY";
    return InvalidArgument("provider " + kind + " has no API key: " + var +
                           " is not set. Set it (export " + var +
                           "=...), name the variable that holds the key with "
                           "provider.api_key_env, or give --base-url for a server that needs "
                           "none.");
  }
  return MakeProvider(pc, remote ? http() : nullptr);
}

Status EndCutTurn(SessionLock& lock, SessionSnapshot& snapshot, int64_t now_ms) {
  if (!snapshot.unfinished_turn) return Status::Ok();
  const SessionSnapshot::BegunTurn& cut = *snapshot.unfinished_turn;
  TurnEndData end;
  end.stop = StopReason::kFailed;
  end.reason = std::string(kCutTurnReason) +
               " (the session was taken over by another process; tool calls it left without "
               "a result were answered as not known to have completed); continue or retry it";
  end.counters = cut.counters;
  Event e = MakeEvent(end, snapshot.info.id, cut.turn_id);
  e.seq = snapshot.last_seq + 1;
  e.ts = now_ms;
  Status s = lock.Append({&e, 1});
  if (!s.ok()) return s.WithContext("ending the cut turn " + cut.turn_id);
  snapshot.last_turn_end =
      LastTurnEnd{cut.turn_id, e.seq, end.stop, end.reason, "", false, end.counters};
  snapshot.last_seq = e.seq;
  snapshot.info.last_seq = e.seq;
  snapshot.unfinished_turn.reset();
  return Status::Ok();
}

Result<std::unique_ptr<Engine>> Engine::Create(EngineOptions options) {
  auto engine = std::make_unique<EngineImpl>(std::move(options));
  AL_RETURN_IF_ERROR(engine->Init());
  return std::unique_ptr<Engine>(std::move(engine));
}

}  // namespace agentloop
