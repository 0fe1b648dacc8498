// The continuation policy of the todo loop: configuration, loop state and the
// pure decision function (SEMANTICS 2.2, 2.3; pi-todo-loop `loop.ts` and
// `config.ts`).
//
// Everything that could loop forever lives here so it can be tested without a
// model. TodoLoopHook only adapts engine hook calls into DecisionInput and
// applies the Decision.
//
// Thread-safety: plain values and pure functions.
#pragma once

#include <string>

#include "agentloop/json.h"

namespace agentloop::todo {

// Loop configuration. Defaults 12 / 2 / true / 6 (SEMANTICS 2.2).
struct LoopConfig {
  int max_rounds = 12;         // max auto-continuations per human message (ceiling 1000)
  int max_strikes = 2;         // consecutive no-progress settles tolerated (ceiling 100)
  bool inject_state = true;    // put the open-task block at the tail of every request
  int max_injected_tasks = 6;  // rows rendered in that block (ceiling 50)

  bool operator==(const LoopConfig&) const = default;
};

inline constexpr int kMaxRoundsCeiling = 1000;
inline constexpr int kMaxStrikesCeiling = 100;
inline constexpr int kMaxInjectedTasksCeiling = 50;

// Coerces raw configuration values into a LoopConfig. Keys (camelCase as in
// pi-todo-loop; the snake_case spellings max_rounds, max_strikes,
// inject_state, max_injected_tasks are accepted too, camelCase wins):
// maxRounds, maxStrikes, maxInjectedTasks take a finite JSON number >= 1,
// floored and capped at their ceiling (1000 / 100 / 50), anything else (a
// string, a bool, < 1, non-finite) keeps the default; injectState takes only a
// real boolean. A non-object yields the defaults; unknown keys are ignored.
// "Clamped, not just validated": `maxRounds: 1e9` becomes 1000.
LoopConfig ClampConfig(const Json& raw);

// The same rule for a config already in struct form (e.g. built by the
// config module): values < 1 become the default, values above a ceiling the
// ceiling.
LoopConfig ClampConfig(const LoopConfig& config);

// Loop counters, initial {0, 0, "", 0, ""}.
struct LoopState {
  int rounds = 0;              // continuations started since the last human message
  int strikes = 0;             // consecutive settles that neither ran a tool nor changed the list
  std::string last_signature;  // task signature at the previous continuation
  int stale_settles = 0;       // settles since the list last changed
  std::string anchor;          // id of the human message the budget belongs to

  bool operator==(const LoopState&) const = default;
};

struct DecisionInput {
  std::string outcome;  // the turn's stop reason name; only "completed" may continue
  int tool_result_count = 0;
  std::string signature;  // `id:status` of the tracked tasks joined with ','; "" for no list
  int open_count = 0;     // pending + in_progress
  int task_count = 0;     // tracked (non-deleted) tasks, for the stop reason only
  std::string anchor;     // id of the newest human message
  LoopState state;
  LoopConfig config;
};

struct Decision {
  bool continue_turn = false;
  LoopState next;  // the state to commit (a stop keeps the counters)
  std::string reason;

  bool operator==(const Decision&) const = default;
};

// The decision, in this exact order (SEMANTICS 2.3):
//  1. a new anchor resets rounds, strikes, last_signature, stale_settles;
//  2. outcome != "completed"  -> "stopped: turn outcome was <outcome>";
//  3. open_count == 0         -> "stopped: list is clear" (task_count > 0) or
//                                "stopped: no list";
//  4. no progress (no tool results and an unchanged signature) -> a strike,
//     capped at max_strikes; at the cap -> "stopped: <n> consecutive turns
//     with no progress, <open> open"; progress clears strikes and stale_settles;
//  5. rounds >= max_rounds    -> "stopped: round cap <max> reached, <open> open"
//                                [+ ", list unchanged for <k> settles" when k >= 2];
//  6. continue: rounds += 1, last_signature = signature,
//     "continuing: round <r>/<max>, <open> open".
Decision Decide(const DecisionInput& input);

// Loop state as JSON {rounds, strikes, lastSignature, staleSettles, anchor}
// and back (missing or mistyped fields keep their initial value).
Json LoopStateToJson(const LoopState& state);
LoopState LoopStateFromJson(const Json& j);

}  // namespace agentloop::todo
