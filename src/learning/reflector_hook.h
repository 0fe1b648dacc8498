// ReflectorHook: the learning loop's driver (SEMANTICS 3.6; moxxy
// reflector-default) on the engine's Hook points.
//
//   OnTurnEnd        builds the turn's events from the history slice of the
//                    turn (reflection.h), applies the gate, and when it passes
//                    and the session has not reflected yet: reserves the
//                    budget (one reflection per session), builds the digest
//                    and starts the reflection on a background thread. Returns
//                    at once: it never waits for the model and never fails the
//                    turn (everything is caught).
//   BeforeModelCall  appends a pending nudge to request.system, once, then
//                    clears it.
//   OnShutdown       cancels every reflection in flight (pending nudges are
//                    kept, so the engine can store them with PendingNudge).
//
// The reflection sends {model, system: kReflectSystemPrompt, one user
// message with the digest, no tools, max_output_tokens 1200} through the
// session's own provider, with a stop token that fires after `timeout`
// (30 s), on OnShutdown/ForgetSession and on destruction. A reply that
// arrives after the stop fired, a provider error and an unparseable reply all
// yield nothing (the budget stays spent: one attempt). Unlike the seed, a
// partial reply of a cancelled call is not parsed. Proposals become the
// pending nudge (sanitised, see BuildNudgeBlock) and, when a ProposalStore is
// given, reviewable items.
//
// No reflection (and no budget spent) when disabled or without a provider.
//
// Thread-safety: all methods are thread-safe; sessions are independent. The
// destructor cancels and joins the background threads; the provider must
// honour its stop token (ModelProvider contract: within 100 ms).
#pragma once

#include <chrono>
#include <condition_variable>
#include <functional>
#include <list>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <stop_token>
#include <string>
#include <thread>
#include <vector>

#include "agentloop/hook.h"
#include "agentloop/provider.h"

#include "learning/proposals.h"
#include "learning/reflection.h"

namespace agentloop::learning {

struct ReflectorOptions {
  std::shared_ptr<ModelProvider> provider;   // null: reflection off
  std::string model;                         // the session's model
  std::shared_ptr<ProposalStore> proposals;  // may be null
  std::chrono::milliseconds timeout{kReflectTimeoutMs};
  // Blocks until `timeout` has elapsed (then returns true: the reflection is
  // cancelled) or `stop` fired (returns false). Null: a real timer. Tests
  // inject one they control instead of waiting for time to pass.
  std::function<bool(std::stop_token stop, std::chrono::milliseconds timeout)> wait_timeout;
  bool enabled = true;
  // Called on the reflection thread when a reflection ends, with its
  // proposals (empty when none) and the provider's status (OK, or the error,
  // kCancelled on timeout/shutdown). For notices and tests; must not call
  // back into the hook's waiting methods.
  std::function<void(const std::string& session_id, const std::vector<Proposal>& proposals,
                     const Status& status)>
      on_done;
};

class ReflectorHook : public Hook {
 public:
  explicit ReflectorHook(ReflectorOptions options);
  ~ReflectorHook() override;
  ReflectorHook(const ReflectorHook&) = delete;
  ReflectorHook& operator=(const ReflectorHook&) = delete;

  std::string_view name() const override { return "reflector"; }
  std::chrono::milliseconds timeout() const override { return {}; }  // inline: never blocks
  void BeforeModelCall(const HookContext& ctx, ModelRequest& request) override;
  TurnEndVerdict OnTurnEnd(const HookContext& ctx, const TurnEndInfo& info) override;
  void OnShutdown() override;

  // Waits until no reflection is in flight, at most `timeout`. Returns true
  // when idle. A one-shot `run` calls it before exiting.
  bool WaitForIdle(std::chrono::milliseconds timeout);

  // The session's undelivered nudge (to store with the session), and its
  // restoration in a later process. RestoreNudge with "" clears it.
  std::optional<std::string> PendingNudge(const std::string& session_id) const;
  void RestoreNudge(const std::string& session_id, std::string nudge);

  // Reflections started in this session (0 or 1), and its restoration so the
  // one-per-session budget survives a restart.
  int ReflectionsUsed(const std::string& session_id) const;
  void RestoreReflectionsUsed(const std::string& session_id, int used);

  // {"reflections": n, "nudge": "..."|null}: what the engine stores with the
  // session (SessionStore::SetState key "reflector"), and its import.
  Json ExportState(const std::string& session_id) const;
  Status ImportState(const std::string& session_id, const Json& state);

  // Cancels the session's reflection and drops its state.
  void ForgetSession(const std::string& session_id);

 private:
  struct Job;
  struct SessionState {
    int used = 0;
    std::optional<std::string> pending;
  };

  void RunJob(Job& job);
  void ReapLocked(std::vector<std::unique_ptr<Job>>& out);

  const ReflectorOptions options_;
  mutable std::mutex mu_;
  std::condition_variable idle_cv_;
  std::map<std::string, SessionState> sessions_;  // Guarded by mu_.
  std::list<std::unique_ptr<Job>> jobs_;          // Guarded by mu_.
  int in_flight_ = 0;                             // Guarded by mu_.
};

}  // namespace agentloop::learning
