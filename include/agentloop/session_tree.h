// The tree of sessions that a session's subagents started (docs/subagents.md):
// what `agentloop sessions show ID --tree`, the server's session resource and
// the console show, each node with how its newest turn ended and what it spent.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "agentloop/json.h"
#include "agentloop/status.h"
#include "agentloop/store.h"

namespace agentloop {

struct SessionTreeNode {
  SessionInfo info;
  // The newest turn's end; nullopt while no turn of the session has ended.
  std::optional<LastTurnEnd> last_turn_end;
  // The session waits on a person (a paused batch is open).
  bool paused = false;
  // Its newest turn began and has not ended: it runs (a subagent's child
  // while its caller's call waits on it), or its process stopped in it
  // (until a takeover ends it).
  bool running = false;
  std::vector<SessionTreeNode> children;  // oldest first
  // Children left out because the tree reached SessionTreeOptions::max_nodes.
  int omitted_children = 0;
};

struct SessionTreeOptions {
  // A tree deeper than this is refused as corrupt (subagents nest at most a
  // few levels; a parent cycle in a damaged store must not recurse forever).
  int max_depth = 16;
  // Nodes loaded at most (each is one store load); the rest are counted in
  // their parent's omitted_children.
  int max_nodes = 256;
};

// Loads `id` and its descendants from `store`, depth first. Errors: those of
// SessionStore::Load (kNotFound for `id`), kDataLoss deeper than max_depth.
Result<SessionTreeNode> LoadSessionTree(SessionStore& store, const std::string& id,
                                        const SessionTreeOptions& options = {});
// The same for a root already loaded (`root`, loaded without repair).
Result<SessionTreeNode> LoadSessionTree(SessionStore& store, SessionSnapshot root,
                                        const SessionTreeOptions& options = {});

// {id, agent, title, model, command, parent_id, created_at_ms,
// updated_at_ms, status, reason?, counters?, children, omitted_children?}:
// status is "running" while its newest turn has begun and not ended,
// "paused" while the session waits on a person, else its newest turn's stop
// reason ("completed", "budget_exhausted", ...), "new" before any turn
// began; counters are those of the newest turn that ended.
Json SessionTreeJson(const SessionTreeNode& node);

}  // namespace agentloop
