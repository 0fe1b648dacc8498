#include "agentloop/session_tree.h"

#include <algorithm>

#include "agentloop/types.h"

#include "protocol/codec.h"

namespace agentloop {

namespace {

// Adds the descendants of `node` (at `depth`) below it; `loaded` counts the
// nodes loaded so far.
Status AddChildren(SessionStore& store, SessionTreeNode& node, int depth, int& loaded,
                   const SessionTreeOptions& options) {
  SessionListOptions list;
  list.parent_id = node.info.id;
  list.limit = 0;
  AL_ASSIGN_OR_RETURN(std::vector<SessionInfo> children, store.ListSessions(list));
  std::sort(children.begin(), children.end(), [](const SessionInfo& a, const SessionInfo& b) {
    return a.created_at_ms != b.created_at_ms ? a.created_at_ms < b.created_at_ms : a.id < b.id;
  });
  for (const SessionInfo& c : children) {
    if (loaded >= options.max_nodes) {
      ++node.omitted_children;
      continue;
    }
    if (depth + 1 > options.max_depth) {
      return DataLoss("session tree deeper than " + std::to_string(options.max_depth) +
                      " levels at " + c.id);
    }
    LoadOptions lo;
    lo.repair = false;
    AL_ASSIGN_OR_RETURN(SessionSnapshot snap, store.Load(c.id, lo));
    ++loaded;
    SessionTreeNode child;
    child.info = std::move(snap.info);
    child.last_turn_end = std::move(snap.last_turn_end);
    child.paused = snap.open_checkpoint.has_value();
    child.running = snap.unfinished_turn.has_value();
    AL_RETURN_IF_ERROR(AddChildren(store, child, depth + 1, loaded, options));
    node.children.push_back(std::move(child));
  }
  return Status::Ok();
}

}  // namespace

Result<SessionTreeNode> LoadSessionTree(SessionStore& store, const std::string& id,
                                        const SessionTreeOptions& options) {
  LoadOptions lo;
  lo.repair = false;
  AL_ASSIGN_OR_RETURN(SessionSnapshot snap, store.Load(id, lo));
  return LoadSessionTree(store, std::move(snap), options);
}

Result<SessionTreeNode> LoadSessionTree(SessionStore& store, SessionSnapshot root,
                                        const SessionTreeOptions& options) {
  SessionTreeNode node;
  node.info = std::move(root.info);
  node.last_turn_end = std::move(root.last_turn_end);
  node.paused = root.open_checkpoint.has_value();
  node.running = root.unfinished_turn.has_value();
  int loaded = 1;
  AL_RETURN_IF_ERROR(AddChildren(store, node, 0, loaded, options));
  return node;
}

Json SessionTreeJson(const SessionTreeNode& node) {
  const SessionInfo& i = node.info;
  Json j = {{"id", i.id},
            {"agent", i.agent},
            {"title", i.title},
            {"model", i.model},
            {"command", i.command},
            {"parent_id", i.parent_id},
            {"created_at_ms", i.created_at_ms},
            {"updated_at_ms", i.updated_at_ms}};
  if (node.running) {
    j["status"] = "running";
  } else if (node.paused) {
    j["status"] = "paused";
  } else if (node.last_turn_end) {
    j["status"] = std::string(StopReasonName(node.last_turn_end->stop));
  } else {
    j["status"] = "new";
  }
  if (node.last_turn_end) {
    if (!node.last_turn_end->reason.empty()) j["reason"] = node.last_turn_end->reason;
    j["counters"] = ToJson(node.last_turn_end->counters);
  }
  Json kids = Json::array();
  for (const SessionTreeNode& c : node.children) kids.push_back(SessionTreeJson(c));
  j["children"] = std::move(kids);
  if (node.omitted_children > 0) j["omitted_children"] = node.omitted_children;
  return j;
}

}  // namespace agentloop
