#include "learning/reflector_hook.h"

#include <exception>

namespace agentloop::learning {

struct ReflectorHook::Job {
  std::string session_id;
  std::string digest;
  std::stop_source stop;  // timeout, shutdown, forget, destruction
  bool done = false;      // Guarded by the hook's mu_.
  // Declared last: destroyed (joined) first, while the fields above live.
  std::jthread watchdog;
  std::jthread worker;
};

ReflectorHook::ReflectorHook(ReflectorOptions options) : options_(std::move(options)) {}

ReflectorHook::~ReflectorHook() {
  std::list<std::unique_ptr<Job>> jobs;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto& j : jobs_) j->stop.request_stop();
    jobs.swap(jobs_);
  }
  jobs.clear();  // joins: the workers finish once the provider honours the stop
}

void ReflectorHook::ReapLocked(std::vector<std::unique_ptr<Job>>& out) {
  for (auto it = jobs_.begin(); it != jobs_.end();) {
    if ((*it)->done) {
      out.push_back(std::move(*it));
      it = jobs_.erase(it);
    } else {
      ++it;
    }
  }
}

void ReflectorHook::BeforeModelCall(const HookContext& ctx, ModelRequest& request) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = sessions_.find(ctx.session_id);
  if (it == sessions_.end() || !it->second.pending) return;
  request.system += *it->second.pending;
  it->second.pending.reset();  // one-shot
}

TurnEndVerdict ReflectorHook::OnTurnEnd(const HookContext& ctx, const TurnEndInfo& info) {
  try {
    if (!options_.enabled || !options_.provider) return {};
    size_t start = TurnStartIndex(info.history);
    std::vector<TurnEvent> events = TurnEventsFromHistory(info.history.subspan(start), info);
    if (!ShouldReflect(events)) return {};
    std::string digest = BuildTurnDigest(events);

    std::vector<std::unique_ptr<Job>> reaped;  // destroyed after the lock is released
    std::lock_guard<std::mutex> lock(mu_);
    ReapLocked(reaped);
    SessionState& s = sessions_[ctx.session_id];
    if (s.used >= 1) return {};
    s.used += 1;  // reserved before any work starts: one attempt per session
    if (digest.empty()) return {};

    auto job = std::make_unique<Job>();
    job->session_id = ctx.session_id;
    job->digest = std::move(digest);
    Job* raw = job.get();
    ++in_flight_;
    try {
      job->watchdog = std::jthread([this, raw](std::stop_token st) {
        bool expired = false;
        if (options_.wait_timeout) {
          expired = options_.wait_timeout(st, options_.timeout);
        } else {
          std::mutex m;
          std::condition_variable_any cv;
          std::unique_lock<std::mutex> lk(m);
          cv.wait_for(lk, st, options_.timeout, [] { return false; });
          expired = !st.stop_requested();
        }
        if (expired) raw->stop.request_stop();
      });
      job->worker = std::jthread([this, raw] { RunJob(*raw); });
    } catch (...) {
      --in_flight_;
      job->stop.request_stop();
      throw;
    }
    jobs_.push_back(std::move(job));
  } catch (...) {
    // A reflection must never break the turn.
  }
  return {};
}

void ReflectorHook::RunJob(Job& job) {
  std::vector<Proposal> proposals;
  Status status;
  try {
    std::vector<Message> messages{Message::User(job.digest)};
    ModelRequest request;
    request.model = options_.model;
    request.system = std::string(kReflectSystemPrompt);
    request.history = messages;
    request.max_output_tokens = kReflectMaxTokens;
    StreamSink sink;
    Result<ModelResponse> r = options_.provider->Complete(request, sink, job.stop.get_token());
    if (!r.ok()) {
      status = r.error();
    } else if (job.stop.stop_requested()) {
      status = Cancelled("reflection timed out or was cancelled");
    } else {
      std::string text;
      for (const auto& b : r->content) {
        if (b.type == BlockType::kText) text += b.text;
      }
      proposals = ParseReflectionReply(text);
    }
  } catch (const std::exception& e) {
    status = Internal(std::string("reflection failed: ") + e.what());
  } catch (...) {
    status = Internal("reflection failed");
  }
  if (job.stop.stop_requested()) {
    proposals.clear();
    if (status.ok()) status = Cancelled("reflection timed out or was cancelled");
  }
  try {
    if (!proposals.empty() && options_.proposals) {
      for (const auto& p : proposals) (void)options_.proposals->Add(p, job.session_id);
    }
    if (!proposals.empty()) {
      std::string nudge = BuildNudgeBlock(proposals);
      std::lock_guard<std::mutex> lock(mu_);
      if (!job.stop.stop_requested()) sessions_[job.session_id].pending = std::move(nudge);
    }
    if (options_.on_done) options_.on_done(job.session_id, proposals, status);
  } catch (...) {
  }
  job.watchdog.request_stop();
  std::lock_guard<std::mutex> lock(mu_);
  job.done = true;
  --in_flight_;
  idle_cv_.notify_all();
  // `job` may be destroyed by a reaper as soon as the lock is released.
}

void ReflectorHook::OnShutdown() {
  std::lock_guard<std::mutex> lock(mu_);
  for (auto& j : jobs_) j->stop.request_stop();
}

bool ReflectorHook::WaitForIdle(std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock(mu_);
  return idle_cv_.wait_for(lock, timeout, [&] { return in_flight_ == 0; });
}

std::optional<std::string> ReflectorHook::PendingNudge(const std::string& session_id) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = sessions_.find(session_id);
  if (it == sessions_.end()) return std::nullopt;
  return it->second.pending;
}

void ReflectorHook::RestoreNudge(const std::string& session_id, std::string nudge) {
  std::lock_guard<std::mutex> lock(mu_);
  if (nudge.empty()) {
    sessions_[session_id].pending.reset();
  } else {
    sessions_[session_id].pending = std::move(nudge);
  }
}

int ReflectorHook::ReflectionsUsed(const std::string& session_id) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = sessions_.find(session_id);
  return it == sessions_.end() ? 0 : it->second.used;
}

void ReflectorHook::RestoreReflectionsUsed(const std::string& session_id, int used) {
  std::lock_guard<std::mutex> lock(mu_);
  sessions_[session_id].used = std::max(0, used);
}

Json ReflectorHook::ExportState(const std::string& session_id) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = sessions_.find(session_id);
  Json out{{"reflections", 0}, {"nudge", nullptr}};
  if (it == sessions_.end()) return out;
  out["reflections"] = it->second.used;
  if (it->second.pending) out["nudge"] = *it->second.pending;
  return out;
}

Status ReflectorHook::ImportState(const std::string& session_id, const Json& state) {
  if (!state.is_object()) return InvalidArgument("reflector state: not an object");
  SessionState s;
  if (auto it = state.find("reflections"); it != state.end() && it->is_number_integer()) {
    s.used = std::max(0, it->get<int>());
  }
  if (auto it = state.find("nudge");
      it != state.end() && it->is_string() && !it->get_ref<const std::string&>().empty()) {
    s.pending = it->get<std::string>();
  }
  std::lock_guard<std::mutex> lock(mu_);
  sessions_[session_id] = std::move(s);
  return Status::Ok();
}

void ReflectorHook::ForgetSession(const std::string& session_id) {
  std::lock_guard<std::mutex> lock(mu_);
  for (auto& j : jobs_) {
    if (j->session_id == session_id) j->stop.request_stop();
  }
  sessions_.erase(session_id);
}

}  // namespace agentloop::learning
