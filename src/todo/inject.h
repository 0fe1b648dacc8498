// The open-task block at the tail of every model request (SEMANTICS 2.4;
// pi-todo-loop `inject.ts` and the `context` hook).
//
// The block is never stored: it travels in ModelRequest::tail. It is the
// whole open list (bounded), because after a compaction the model has no
// other way to learn the list still exists.
//
// Thread-safety: pure functions.
#pragma once

#include <string>
#include <string_view>

#include "agentloop/provider.h"

#include "todo/loop.h"
#include "todo/snapshot.h"

namespace agentloop::todo {

inline constexpr std::string_view kInjectTag = "todo_loop_state";

// One line of model-authored text made safe to render inside the tag, with
// JavaScript (UTF-16) semantics on UTF-8 text:
//  1. each run of CR, LF, TAB, U+2028, U+2029, U+0085 becomes one space;
//  2. C0/C1 controls, U+200B-U+200F (zero-width, LRM/RLM), U+202A-U+202E,
//     U+2066-U+2069 (bidi embeddings, overrides, isolates) and U+FEFF are deleted;
//  3. every '<' becomes "&lt;" ('>' and '&' are left alone);
//  4. the result is cut to 480 UTF-16 units (bounds the work: a 1 MB subject
//     is only read as far as needed);
//  5. the first 120 code points are kept;
//  6. unpaired surrogates are removed and the result is trimmed (JS trim()).
// Invalid UTF-8 is dropped; CESU-8 encoded surrogates are read as UTF-16
// surrogates (a lone one is removed in step 6, a pair becomes its code point).
// The result is valid UTF-8.
std::string SanitizeLabel(std::string_view text);

// activeForm while in_progress (when non-empty), else the subject, else
// "(untitled)". The fallback happens before sanitising.
std::string TaskLabel(const SnapshotTask& task);

// The block:
//   <todo_loop_state>
//   N tracked task(s) are still open on this branch:
//     <id>. [<status>] <label>            (first max_injected_tasks open tasks)
//     ... and K more                       (when K > 0)
//   <five fixed lines>
//   <two reconcile lines>                  (only when `reconcile`)
//   </todo_loop_state>
std::string RenderInjection(const TodoSnapshot& snapshot, const LoopConfig& config, bool reconcile);

// Puts `block` at the tail of `request` (history followed by tail):
//  - markers are kept only when both neighbours exist and neither is
//    user-role (between two assistant turns); others (at the end, next to a
//    human message, two in a row) are dropped from the request (never from
//    the store);
//  - if what is left ends in a user-role message, the block is appended to
//    that message as a text block (a stored message is copied into the tail
//    with uid 0 and history is shortened); else a new user message with the
//    block is appended to the tail.
// Returns false and leaves the request untouched when nothing would be left.
// Dropping a marker deep in the history moves the messages after it into the
// tail (a copy); markers normally sit at the end, so this is rare.
bool InjectIntoRequest(ModelRequest& request, const std::string& block);

}  // namespace agentloop::todo
