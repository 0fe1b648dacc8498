// The hook adapts engine hook calls into Decide() inputs and applies the
// decisions. Design rule (pi-todo-loop): this hook must never be the reason a
// turn fails — every error path falls back to doing nothing.
#include "todo/todo_loop_hook.h"

#include <cctype>
#include <system_error>

#include "base/env_map.h"
#include "base/strings.h"
#include "todo/inject.h"

namespace agentloop::todo {
namespace {

constexpr const char* kMiddleDot = "\xC2\xB7";  // ·

bool Exists(const std::filesystem::path& p) {
  if (p.empty()) return false;
  std::error_code ec;
  bool present = std::filesystem::exists(p, ec);
  return !ec && present;
}

// Tool names of the last step that produced tool results: the newest
// tool-result message, matched to the assistant tool_use blocks before it.
std::vector<std::string> LastStepToolNames(std::span<const Message> history) {
  std::vector<std::string> names;
  for (size_t i = history.size(); i-- > 0;) {
    const Message& m = history[i];
    if (!IsToolResultMessage(m)) continue;
    const Message* assistant = nullptr;
    for (size_t k = i; k-- > 0;) {
      if (history[k].role == Role::kAssistant) {
        assistant = &history[k];
        break;
      }
    }
    for (const ContentBlock& b : m.content) {
      std::string name;
      if (assistant != nullptr) {
        for (const ContentBlock& u : assistant->content) {
          if (u.type == BlockType::kToolUse && u.id == b.tool_use_id) name = u.name;
        }
      }
      names.push_back(std::move(name));
    }
    break;
  }
  return names;
}

// The figures of a settle decision: the `details` of its `continuation`
// event.
Json DecisionDetails(const Decision& d, const LoopConfig& config, int open) {
  return Json{{"round", d.next.rounds},
              {"max_rounds", config.max_rounds},
              {"strikes", d.next.strikes},
              {"max_strikes", config.max_strikes},
              {"open", open}};
}

Json DecisionJson(const Decision& d, const LoopConfig& config, int open) {
  return Json{{"round", d.next.rounds},
              {"max_rounds", config.max_rounds},
              {"strikes", d.next.strikes},
              {"max_strikes", config.max_strikes},
              {"reason", d.reason},
              {"continue", d.continue_turn},
              {"open", open}};
}

}  // namespace

std::filesystem::path DefaultGlobalKillSwitch(const EnvMap& env) {
  std::optional<std::filesystem::path> dir = XdgUserDir(env, "XDG_CONFIG_HOME", ".config");
  if (!dir) return {};
  return *dir / "agentloop" / "todo-loop-off";
}

Json LoopStatus::ToJson() const {
  Json j = Json::object();
  j["rounds"] = state.rounds;
  j["max_rounds"] = config.max_rounds;
  j["strikes"] = state.strikes;
  j["max_strikes"] = config.max_strikes;
  j["paused"] = paused;
  j["reason"] = reason;
  j["disabled"] = disabled;
  j["anchor"] = state.anchor;
  return j;
}

TodoLoopHook::TodoLoopHook(TodoLoopOptions options) : options_(std::move(options)) {}

LoopConfig TodoLoopHook::CurrentConfig() const {
  if (options_.load_config) {
    try {
      return ClampConfig(options_.load_config());
    } catch (...) {
      return LoopConfig{};  // a broken loader must not fail a turn
    }
  }
  return ClampConfig(options_.config);
}

bool TodoLoopHook::IsDisabled(const std::filesystem::path& workspace) const {
  if (options_.disabled) return true;
  if (Exists(options_.kill_switch_global)) return true;
  const std::filesystem::path& local = options_.kill_switch_local;
  if (local.empty()) return false;
  if (local.is_absolute()) return Exists(local);
  if (workspace.empty()) return false;
  return Exists(workspace / local);
}

bool TodoLoopHook::Paused(const std::string& session_id, const std::filesystem::path& workspace) {
  std::lock_guard<std::mutex> lock(mu_);
  SessionLoop& s = sessions_[session_id];
  if (!workspace.empty()) s.workspace = workspace;
  return s.paused;
}

TodoSnapshot TodoLoopHook::ReadSessionSnapshot(const std::string& session_id,
                                               std::span<const Message> history,
                                               std::span<const Message> tail) {
  SnapshotCursor cursor;
  {
    std::lock_guard<std::mutex> lock(mu_);
    cursor = std::exchange(sessions_[session_id].cursor, SnapshotCursor{});
  }
  TodoSnapshot snapshot = cursor.Read(history, tail);
  std::lock_guard<std::mutex> lock(mu_);
  sessions_[session_id].cursor = std::move(cursor);
  return snapshot;
}

void TodoLoopHook::Deliver(const std::string& session_id, const std::vector<Note>& notes) const {
  if (!options_.notify) return;
  for (const Note& n : notes) {
    try {
      options_.notify(session_id, n.level, n.text);
    } catch (...) {
      // A failing notifier must not fail the turn.
    }
  }
}

void TodoLoopHook::BeforeModelCall(const HookContext& ctx, ModelRequest& request) {
  try {
    if (Paused(ctx.session_id, ctx.workspace) || IsDisabled(ctx.workspace)) return;
    LoopConfig config = CurrentConfig();
    if (!config.inject_state) return;
    TodoSnapshot snapshot = ReadSessionSnapshot(ctx.session_id, request.history, request.tail);
    if (snapshot.open.empty()) return;
    int rounds = 0;
    {
      std::lock_guard<std::mutex> lock(mu_);
      rounds = sessions_[ctx.session_id].state.rounds;
    }
    std::string block = RenderInjection(snapshot, config, /*reconcile=*/rounds >= 1);
    InjectIntoRequest(request, block);
  } catch (...) {
    // Leave the request as it is.
  }
}

void TodoLoopHook::ToolTurn(SessionLoop& s, const TodoSnapshot& snapshot,
                            const std::vector<std::string>& tool_names, const std::string& outcome,
                            std::vector<Note>& notes) {
  int open = static_cast<int>(snapshot.open.size());
  // A list that goes open -> clear in a turn whose only tool calls were
  // `todo` is the loop's success state and its failure state at once: never
  // police it, just say so once.
  if (open == 0 && s.last_open_count > 0 && !tool_names.empty()) {
    bool only_todo = true;
    for (const std::string& n : tool_names) only_todo = only_todo && n == kTodoToolName;
    if (only_todo) {
      notes.push_back(
          {"warning",
           "todo-loop: the list was cleared by todo calls alone in that turn \xE2\x80\x94 "
           "no other tool work accompanied it"});
    }
  }
  s.last_open_count = open;
  if (outcome != "completed") {
    s.reason = "stopped: turn outcome was " + outcome;
    return;
  }
  // A tool turn is still work: it clears a pending strike, and never spends
  // a round (the engine calls the model again anyway).
  s.state.strikes = 0;
}

void TodoLoopHook::AfterStep(const HookContext& ctx, const StepEndInfo& info) {
  try {
    if (Paused(ctx.session_id, ctx.workspace) || IsDisabled(ctx.workspace)) return;
    if (info.tool_names.empty()) return;
    TodoSnapshot snapshot = ReadSessionSnapshot(ctx.session_id, info.history);
    std::vector<Note> notes;
    {
      std::lock_guard<std::mutex> lock(mu_);
      ToolTurn(sessions_[ctx.session_id], snapshot, info.tool_names, "completed", notes);
    }
    Deliver(ctx.session_id, notes);
  } catch (...) {
  }
}

TurnEndVerdict TodoLoopHook::OnTurnEnd(const HookContext& ctx, const TurnEndInfo& info) {
  try {
    if (Paused(ctx.session_id, ctx.workspace) || IsDisabled(ctx.workspace)) return {};
    LoopConfig config = CurrentConfig();
    TodoSnapshot snapshot = ReadSessionSnapshot(ctx.session_id, info.history);
    std::string outcome(StopReasonName(info.stop));
    std::vector<Note> notes;

    if (info.tool_result_count > 0) {
      std::vector<std::string> names = LastStepToolNames(info.history);
      {
        std::lock_guard<std::mutex> lock(mu_);
        ToolTurn(sessions_[ctx.session_id], snapshot, names, outcome, notes);
      }
      Deliver(ctx.session_id, notes);
      return {};
    }

    int open = static_cast<int>(snapshot.open.size());
    Decision decision;
    Json decision_json;
    TurnEndVerdict verdict;  // reason and details: the turn's `continuation` event
    {
      std::lock_guard<std::mutex> lock(mu_);
      SessionLoop& s = sessions_[ctx.session_id];
      s.last_open_count = open;
      DecisionInput in;
      in.outcome = outcome;
      in.tool_result_count = 0;
      in.signature = snapshot.signature;
      in.open_count = open;
      in.task_count = static_cast<int>(snapshot.tasks.size());
      in.anchor = snapshot.anchor;
      in.state = s.state;
      in.config = config;
      decision = Decide(in);
      decision_json = DecisionJson(decision, config, open);
      verdict.reason = decision.reason;
      verdict.details = DecisionDetails(decision, config, open);
      if (decision.continue_turn) {
        // Build the proposal before committing the counters.
        verdict.continue_turn = true;
        verdict.entries.push_back(MakeMarker());
      } else if (s.reason != decision.reason && !snapshot.tasks.empty()) {
        // A stop is otherwise silent until someone runs /todoloop. Without
        // a todo list there is no loop to speak of: nothing is said.
        notes.push_back({"info", "todo-loop: " + decision.reason});
      }
      s.state = decision.next;
      s.reason = decision.reason;
      s.last_decision = decision_json;
    }
    Deliver(ctx.session_id, notes);
    return verdict;
  } catch (...) {
    return {};
  }
}

std::string TodoLoopHook::TodoLoopCommand(const std::string& session_id, std::string_view args,
                                          std::span<const Message> history,
                                          const std::filesystem::path& workspace) {
  std::string raw = ToLower(Trim(args));
  std::vector<std::string> words;
  {
    size_t i = 0;
    while (i < raw.size()) {
      while (i < raw.size() && std::isspace(static_cast<unsigned char>(raw[i]))) ++i;
      size_t j = i;
      while (j < raw.size() && !std::isspace(static_cast<unsigned char>(raw[j]))) ++j;
      if (j > i) words.push_back(raw.substr(i, j - i));
      i = j;
    }
  }
  std::string command = words.empty() ? "" : words[0];
  LoopConfig config = CurrentConfig();

  std::lock_guard<std::mutex> lock(mu_);
  SessionLoop& s = sessions_[session_id];
  if (command == "pause") {
    s.paused = true;
    s.reason = "paused by user";
    return "todo-loop: paused in this session";
  }
  if (command == "resume") {
    s.paused = false;
    s.reason = "resumed by user";
    return "todo-loop: resumed";
  }
  if (command == "reset") {
    s.state = LoopState{};
    s.reason = "counters reset";
    return "todo-loop: counters reset";
  }

  std::string out;
  if (!command.empty() && command != "status") {
    out += "todo-loop: unknown argument \"" + command + "\"; use status, pause, resume or reset\n";
  } else if (words.size() > 1) {
    std::string rest;
    for (size_t i = 1; i < words.size(); ++i) rest += (i > 1 ? " " : "") + words[i];
    out += "todo-loop: ignoring extra arguments \"" + rest +
           "\"; use status, pause, resume or reset\n";
  }
  TodoSnapshot snapshot = ReadSnapshot(history);
  std::string mode;
  if (IsDisabled(workspace.empty() ? s.workspace : workspace)) {
    mode = "DISABLED (kill-switch present)";
  } else if (s.paused) {
    mode = "PAUSED";
  } else if (StartsWith(s.reason, "stopped:")) {
    mode = "stopped (next human message starts a new budget)";
  } else {
    mode = "active";
  }
  out += "todo-loop " + mode + "\n";
  out += "rounds " + std::to_string(s.state.rounds) + "/" + std::to_string(config.max_rounds) +
         " " + kMiddleDot + " strikes " + std::to_string(s.state.strikes) + "/" +
         std::to_string(config.max_strikes) + "\n";
  out += "open " + std::to_string(snapshot.open.size()) + "/" +
         std::to_string(snapshot.tasks.size()) + " tracked " + kMiddleDot + " inject " +
         (config.inject_state ? "on" : "off") + "\n";
  out += "anchor " + (snapshot.anchor.empty() ? std::string("(none)") : snapshot.anchor) + "\n";
  out += "last: " + s.reason + "\n";
  out += "config " + options_.config_source;
  return out;
}

LoopStatus TodoLoopHook::Status(const std::string& session_id) const {
  LoopStatus st;
  st.config = CurrentConfig();
  std::filesystem::path workspace;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (auto it = sessions_.find(session_id); it != sessions_.end()) {
      st.state = it->second.state;
      st.paused = it->second.paused;
      st.reason = it->second.reason;
      st.last_open_count = it->second.last_open_count;
      workspace = it->second.workspace;
    }
  }
  st.disabled = IsDisabled(workspace);
  return st;
}

Json TodoLoopHook::LastDecisionJson(const std::string& session_id) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = sessions_.find(session_id);
  return it == sessions_.end() ? Json() : it->second.last_decision;
}

Json TodoLoopHook::ExportState(const std::string& session_id) const {
  SessionLoop s;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (auto it = sessions_.find(session_id); it != sessions_.end()) s = it->second;
  }
  Json j = LoopStateToJson(s.state);
  j["paused"] = s.paused;
  j["reason"] = s.reason;
  j["lastOpenCount"] = s.last_open_count;
  return j;
}

agentloop::Status TodoLoopHook::ImportState(const std::string& session_id, const Json& state) {
  if (!state.is_object()) return InvalidArgument("todo-loop state: expected an object");
  SessionLoop s;
  s.state = LoopStateFromJson(state);
  if (auto it = state.find("paused"); it != state.end() && it->is_boolean()) {
    s.paused = it->get<bool>();
  }
  if (auto it = state.find("reason"); it != state.end() && it->is_string()) {
    s.reason = it->get<std::string>();
  }
  if (auto it = state.find("lastOpenCount"); it != state.end() && it->is_number_integer()) {
    int64_t v = it->get<int64_t>();
    if (v >= 0 && v <= 1'000'000) s.last_open_count = static_cast<int>(v);
  }
  std::lock_guard<std::mutex> lock(mu_);
  SessionLoop& slot = sessions_[session_id];
  s.workspace = slot.workspace;
  slot = std::move(s);
  return Status::Ok();
}

void TodoLoopHook::ForgetSession(const std::string& session_id) {
  std::lock_guard<std::mutex> lock(mu_);
  sessions_.erase(session_id);
}

}  // namespace agentloop::todo
