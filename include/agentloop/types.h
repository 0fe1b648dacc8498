// Engine value types: messages and their content blocks, tool specs, usage,
// budgets, command kinds and the one stop vocabulary every front end shares.
//
// These are plain values with no behaviour beyond small helpers. They carry no
// wire format: providers map them to and from OpenAI/Anthropic JSON, and
// src/protocol maps them to the engine's own JSON (sessions, events).
//
// Thread-safety: plain values.
#pragma once

#include <chrono>
#include <cstdint>
#include <initializer_list>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "agentloop/json.h"

namespace agentloop {

enum class Role { kSystem, kUser, kAssistant };
std::string_view RoleName(Role role);  // "system" | "user" | "assistant"

enum class BlockType {
  kText,
  kThinking,          // text + opaque signature, carried verbatim, sent back unchanged
  kRedactedThinking,  // opaque `data` only
  kToolUse,           // a model's request to run a tool
  kToolResult,        // the engine's answer to one tool_use (user-role message)
  kImage,             // an image: media type and base64 bytes (user-role content)
};
std::string_view BlockTypeName(BlockType type);

// One block of a message. Fields that do not apply to `type` stay empty.
struct ContentBlock {
  BlockType type = BlockType::kText;

  // kText: the text. kThinking: the reasoning text. kToolResult: the result
  // content the model sees.
  std::string text;

  // kThinking: the provider's opaque signature (Anthropic `signature`,
  // OpenAI Responses `encrypted_content`). Never inspected, sent back as is.
  std::string signature;
  // kRedactedThinking: the opaque `data`. kImage: the image's bytes in
  // standard base64 (RFC 4648, padded).
  std::string data;
  // kImage: "image/png", "image/jpeg", "image/gif" or "image/webp". Images
  // are checked where they enter the engine (protocol/image.h): the media
  // type, the base64 and that the bytes are of that type.
  std::string media_type;

  // kToolUse: the call id, the tool name and the parsed input (a JSON object).
  // When the model's argument string is not valid JSON, `input` is null and
  // `raw_input` holds the string verbatim, so the engine can answer with an
  // is_error result and the transcript can still be replayed.
  std::string id;
  std::string name;
  Json input;
  std::string raw_input;

  // kToolResult: which tool_use this answers, and whether it is an error.
  std::string tool_use_id;
  bool is_error = false;
  // kToolResult: the images the tool returned besides `text` (kImage
  // blocks, in the tool's order). A provider whose model does not accept
  // images sends a line describing each instead; none is dropped.
  std::vector<ContentBlock> images;

  // Engine and provider metadata that is never sent to the model as content:
  // e.g. a Responses item id for a function_call or reasoning item
  // ({"item_id": ...}), a tool's structured details ({"details": ...}, such as
  // the todo snapshot). Providers copy out only the keys they know.
  Json meta;

  static ContentBlock Text(std::string text);
  static ContentBlock Thinking(std::string text, std::string signature);
  static ContentBlock RedactedThinking(std::string data);
  static ContentBlock ToolUse(std::string id, std::string name, Json input);
  static ContentBlock ToolResult(std::string tool_use_id, std::string content, bool is_error);
  static ContentBlock Image(std::string media_type, std::string base64_data);

  bool operator==(const ContentBlock&) const = default;
};

// A message in a session's history. Tool results travel as user-role blocks;
// providers map them to their wire (OpenAI `tool` messages, Anthropic
// user-role tool_result blocks).
struct Message {
  Role role = Role::kUser;
  std::vector<ContentBlock> content;

  // Non-empty for engine-made entries that are not a person's words, e.g.
  // "todo-loop:continue" (continuation marker), "crash-recovery",
  // "budget-nudge", "compaction-summary". Providers send such messages like
  // any other; front ends may hide them; the todo loop recognises its own.
  std::string tag;

  // Identity for per-message caches (e.g. a provider's serialised form). Set
  // by the Transcript that stores the message; 0 means "not cacheable". Two
  // messages with the same non-zero uid have identical content.
  uint64_t uid = 0;

  static Message User(std::string text);
  static Message Assistant(std::string text);

  // Concatenated text of the kText blocks.
  std::string JoinedText() const;
  bool HasToolUse() const;

  // Equality ignores `uid` (it is cache identity, not content).
  bool operator==(const Message& other) const {
    return role == other.role && content == other.content && tag == other.tag;
  }
};

// What the model is told about a tool, plus how the engine must treat it.
// How a permission rule's pattern, `tool(pattern)`, is matched against a
// call of the tool (docs/permissions.md).
enum class RulePatternKind {
  kNone,     // the tool takes no pattern (rules use a condition instead)
  kCommand,  // a shell command line, split into simple commands (bash)
  kPath,     // a file path, normalised against the workspace (read, write, ...)
};

struct ToolSpec {
  std::string name;
  std::string description;
  Json input_schema = Json::object();  // JSON Schema (object)
  bool mutates = false;                // writes files, runs commands: refused in read-only commands
  bool parallel_safe = false;          // may run concurrently with neighbouring safe calls
  // A mutating tool that is still offered and run in read-only commands
  // because there it confines itself so that it cannot change anything (bash
  // in a read-only sandbox without network; see ToolContext::read_only).
  bool confined_in_read_only = false;
  // The tool runs a call that a permission rule allowed (not a person who
  // saw that exact call) confined (ToolCall::confined): bash in the
  // workspace-write sandbox without network (docs/security.md).
  bool confines_rule_allowed = false;
  // Not empty: the tool would confine rule-allowed calls but cannot here
  // (why: bubblewrap missing or unusable). The turn then asks about such a
  // call instead of running it, unless the policy proved it read-only
  // (PolicyVerdict::read_only).
  std::string confinement_unavailable = {};
  // Every call changes what later sessions are told or allowed (the
  // learning tools' memories and skills, read into every later session's
  // system prompt): the permission policy asks a person about each call,
  // whatever the rules say (also under `*`), and an approval "for this
  // session" does not carry over, as for a write to a protected path.
  bool always_ask = false;

  // What the permission rules see of a call. Permissions read these, never
  // the tool's name, so a tool of an embedder gets path rules
  // (`mytool(src/**)`), the protected-path guard and the session approval
  // cache by path just as the built-in file tools do.
  RulePatternKind pattern_kind = RulePatternKind::kNone;
  // kCommand: the argument holding the command line. kPath: the arguments
  // that may hold the path; the first one given as a string is used.
  std::vector<std::string> pattern_args = {};
  // kPath: the path of a call that gives none of `pattern_args` ("." for
  // the workspace root, as grep, glob and ls search it); empty: such a call
  // has no path and no path pattern matches it.
  std::string default_path = {};
  // The tool reads or lists the files under its path (grep, glob, ls): ask
  // and deny rules for `read` apply to it too.
  bool reads_files = false;

  bool operator==(const ToolSpec&) const = default;
};

// The shared state of a ToolSpecList.
struct ToolSpecListData {
  std::vector<ToolSpec> specs;
  uint64_t uid = 0;
  int64_t chars = 0;
};

// An immutable list of tool specs that copies share: a session's tools are
// handed to every turn and every request without copying their schemas.
// Built from a vector or a braced list (implicitly, so `config.tools =
// registry.Specs()` reads as a vector's assignment); never changed after.
// Thread-safety: immutable; copies may be used from any thread.
class ToolSpecList {
 public:
  ToolSpecList() = default;
  ToolSpecList(std::vector<ToolSpec> specs);           // NOLINT(google-explicit-constructor)
  ToolSpecList(std::initializer_list<ToolSpec> specs)  // NOLINT(google-explicit-constructor)
      : ToolSpecList(std::vector<ToolSpec>(specs)) {}

  std::span<const ToolSpec> view() const;
  const ToolSpec* begin() const { return view().data(); }
  const ToolSpec* end() const { return view().data() + view().size(); }
  size_t size() const { return data_ ? data_->specs.size() : 0; }
  bool empty() const { return size() == 0; }
  const ToolSpec& operator[](size_t i) const { return data_->specs[i]; }
  // The shared vector (null for an empty list); it lives as long as any
  // copy of the list or of this pointer.
  std::shared_ptr<const std::vector<ToolSpec>> shared() const;
  // Identity of the list for per-request caches (ModelRequest::tools_uid):
  // random, non-zero, the same for every copy; 0 for an empty list.
  uint64_t uid() const { return data_ ? data_->uid : 0; }
  // Characters of the names, descriptions and serialized schemas (the
  // part of a request the tools take, for context estimates); computed
  // once, when the list is made.
  int64_t chars() const { return data_ ? data_->chars : 0; }

  // A reference that does not keep the list alive (caches of lists).
  class Weak {
   public:
    Weak() = default;
    explicit Weak(const ToolSpecList& list) : data_(list.data_) {}
    // The list, or an empty one when every copy of it has gone.
    ToolSpecList lock() const;
    bool expired() const { return data_.expired(); }

   private:
    std::weak_ptr<const ToolSpecListData> data_;
  };

 private:
  std::shared_ptr<const ToolSpecListData> data_;
};

struct Usage {
  int64_t input_tokens = 0;   // uncached prompt tokens
  int64_t output_tokens = 0;  // includes reasoning tokens
  int64_t cache_read_tokens = 0;
  int64_t cache_write_tokens = 0;
  int64_t reasoning_tokens = 0;  // part of output_tokens, reported separately

  // Tokens charged against a token budget: everything read or written.
  int64_t Total() const {
    return input_tokens + output_tokens + cache_read_tokens + cache_write_tokens;
  }
  Usage& operator+=(const Usage& o);
  bool operator==(const Usage&) const = default;
};

enum class CommandKind { kCode, kExplain, kFix, kPlan, kBuild };
std::string_view CommandKindName(CommandKind kind);
std::optional<CommandKind> ParseCommandKind(std::string_view name);
// Plan and explain are read-only: mutating tools are neither offered nor run.
bool IsReadOnly(CommandKind kind);

struct Budget {
  int max_tool_calls = 20;
  int64_t max_tokens = 50'000;
  int max_turns = 25;  // model calls per turn
  std::optional<std::chrono::milliseconds> max_wall_time;

  bool operator==(const Budget&) const = default;
};

// The seed's per-command defaults: code 20/50k, explain 5/20k, fix 20/50k,
// plan 8/30k, build 30/80k; max_turns 25 for all.
Budget DefaultBudget(CommandKind kind);

// How a turn ended. One vocabulary for the CLI, the server and embedders.
enum class StopReason {
  kCompleted,
  kBudgetExhausted,
  kMaxTurns,
  kToolRefused,
  kDenied,
  kPendingApproval,
  kPendingQuestion,
  kAborted,
  kFailed,
  kRefused,  // the model refused to answer (FinishReason::kRefused)
};
std::string_view StopReasonName(StopReason reason);  // "completed", "budget_exhausted", ...
std::optional<StopReason> ParseStopReason(std::string_view name);

// An item a paused turn waits for: an approval of a tool call, or an answer
// to an ask_user question. kSubagent: a call of a subagent tool whose child
// session paused durably; the item is decided by the engine once the
// child's own items are (docs/subagents.md), never by a person.
enum class PendingKind { kApproval, kQuestion, kSubagent };
std::string_view PendingKindName(PendingKind kind);

// A new pending id, typed by its kind: "apr_" (approval), "q_" (question) or
// "sub_" (subagent) and 16 random hex digits, e.g. "apr_5f3a9c0d2b1e4a67". The one place
// pending ids are made; people may type any unique prefix of one.
std::string NewPendingId(PendingKind kind);
// Whether `id` has the shape of a whole pending id: a typed id as made by
// NewPendingId, or a UUID (the ids of sessions stored before typed ids).
bool IsWholePendingId(std::string_view id);

struct PendingItem {
  std::string id;  // pending id, unique across sessions
  PendingKind kind = PendingKind::kApproval;
  std::string tool_use_id;
  std::string tool;
  Json arguments;
  std::string reason;  // why it waits (the rule, or the question text)
  // kSubagent: the child session whose durable pause the call waits on.
  std::string child_session_id;
  // The path of agents of the session that asks ("root/reviewer"), set
  // where the engine shows a subagent's item with its root session's
  // (Engine::ListPending, TurnResult::pending); empty: the session's own.
  std::string path;

  bool operator==(const PendingItem&) const = default;
};

// Counters of one turn, carried across a pause so that a resumed turn keeps
// spending the same budget.
struct TurnCounters {
  int tool_calls = 0;
  int64_t tokens = 0;
  int model_calls = 0;
  Usage usage;

  bool operator==(const TurnCounters&) const = default;
};

}  // namespace agentloop
