#include "todo/loop.h"

#include <algorithm>
#include <cmath>
#include <optional>

namespace agentloop::todo {
namespace {

// A finite number >= 1, floored and capped; nullopt otherwise.
std::optional<int> Bounded(const Json& value, int ceiling) {
  if (!value.is_number()) return std::nullopt;
  double v = value.get<double>();
  if (!std::isfinite(v) || v < 1) return std::nullopt;
  double floored = std::floor(v);
  if (floored >= ceiling) return ceiling;
  return static_cast<int>(floored);
}

const Json* Field(const Json& raw, const char* camel, const char* snake) {
  if (auto it = raw.find(camel); it != raw.end()) return &*it;
  if (auto it = raw.find(snake); it != raw.end()) return &*it;
  return nullptr;
}

int ClampInt(int value, int fallback, int ceiling) {
  if (value < 1) return fallback;
  return std::min(value, ceiling);
}

Decision Stop(const LoopState& state, std::string reason) {
  return Decision{false, state, std::move(reason)};
}

}  // namespace

LoopConfig ClampConfig(const Json& raw) {
  LoopConfig out;
  if (!raw.is_object()) return out;
  if (const Json* v = Field(raw, "maxRounds", "max_rounds")) {
    if (auto b = Bounded(*v, kMaxRoundsCeiling)) out.max_rounds = *b;
  }
  if (const Json* v = Field(raw, "maxStrikes", "max_strikes")) {
    if (auto b = Bounded(*v, kMaxStrikesCeiling)) out.max_strikes = *b;
  }
  if (const Json* v = Field(raw, "injectState", "inject_state")) {
    if (v->is_boolean()) out.inject_state = v->get<bool>();
  }
  if (const Json* v = Field(raw, "maxInjectedTasks", "max_injected_tasks")) {
    if (auto b = Bounded(*v, kMaxInjectedTasksCeiling)) out.max_injected_tasks = *b;
  }
  return out;
}

LoopConfig ClampConfig(const LoopConfig& config) {
  const LoopConfig defaults;
  LoopConfig out = config;
  out.max_rounds = ClampInt(config.max_rounds, defaults.max_rounds, kMaxRoundsCeiling);
  out.max_strikes = ClampInt(config.max_strikes, defaults.max_strikes, kMaxStrikesCeiling);
  out.max_injected_tasks =
      ClampInt(config.max_injected_tasks, defaults.max_injected_tasks, kMaxInjectedTasksCeiling);
  return out;
}

Decision Decide(const DecisionInput& input) {
  const LoopConfig& config = input.config;

  // A new human message owns a fresh budget: a long conversation cannot
  // inherit the previous turn's spent rounds.
  LoopState current = input.state;
  if (input.anchor != input.state.anchor) {
    current.rounds = 0;
    current.strikes = 0;
    current.last_signature.clear();
    current.stale_settles = 0;
    current.anchor = input.anchor;
  }

  if (input.outcome != "completed") {
    return Stop(current, "stopped: turn outcome was " + input.outcome);
  }
  if (input.open_count == 0) {
    return Stop(current, input.task_count > 0 ? "stopped: list is clear" : "stopped: no list");
  }

  bool progressed = input.tool_result_count > 0 || input.signature != current.last_signature;
  if (progressed) {
    current.strikes = 0;
    current.stale_settles = 0;
  } else {
    current.stale_settles += 1;
    // A budget must never read above the cap it is measured against.
    current.strikes = std::min(current.strikes + 1, config.max_strikes);
    if (current.strikes >= config.max_strikes) {
      return Stop(current, "stopped: " + std::to_string(current.strikes) +
                               " consecutive turns with no progress, " +
                               std::to_string(input.open_count) + " open");
    }
  }

  if (current.rounds >= config.max_rounds) {
    std::string stale;
    if (current.stale_settles >= 2) {
      stale = ", list unchanged for " + std::to_string(current.stale_settles) + " settles";
    }
    return Stop(current, "stopped: round cap " + std::to_string(config.max_rounds) + " reached, " +
                             std::to_string(input.open_count) + " open" + stale);
  }

  current.rounds += 1;
  current.last_signature = input.signature;
  std::string reason = "continuing: round " + std::to_string(current.rounds) + "/" +
                       std::to_string(config.max_rounds) + ", " + std::to_string(input.open_count) +
                       " open";
  return Decision{true, std::move(current), std::move(reason)};
}

Json LoopStateToJson(const LoopState& state) {
  Json j = Json::object();
  j["rounds"] = state.rounds;
  j["strikes"] = state.strikes;
  j["lastSignature"] = state.last_signature;
  j["staleSettles"] = state.stale_settles;
  j["anchor"] = state.anchor;
  return j;
}

LoopState LoopStateFromJson(const Json& j) {
  LoopState s;
  if (!j.is_object()) return s;
  auto int_field = [&](const char* key, int& out) {
    if (auto it = j.find(key); it != j.end() && it->is_number_integer()) {
      int64_t v = it->get<int64_t>();
      if (v >= 0 && v <= 1'000'000) out = static_cast<int>(v);
    }
  };
  auto str_field = [&](const char* key, std::string& out) {
    if (auto it = j.find(key); it != j.end() && it->is_string()) out = it->get<std::string>();
  };
  int_field("rounds", s.rounds);
  int_field("strikes", s.strikes);
  str_field("lastSignature", s.last_signature);
  int_field("staleSettles", s.stale_settles);
  str_field("anchor", s.anchor);
  return s;
}

}  // namespace agentloop::todo
