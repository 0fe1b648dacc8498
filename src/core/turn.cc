// The turn state machine. Sequence of one step:
//
//   PrepareModelCall: cancellation, wall time, max turns, token budget
//     (budget_check event), request built over a view of the history,
//     BeforeModelCall hooks ──▶ CallModel
//   OnModelResult: prompt-too-long → compact prior history and retry;
//     tokens counted (usage, or the chars/4 estimate); assistant message
//     appended; no tool calls → settle (turn-end hooks may continue)
//   ProcessBatch: every call of the batch is decided before any runs
//     (budget, arguments, plan mode, stuck guard, hooks, rules) ──▶ Decide
//   OnDecisions: approvals, denials, deferrals
//   ResolveBatch: a denial cancels the batch; the rest runs ──▶ RunTools
//   AfterTools: pending items → checkpoint and pause; otherwise one user
//     message with every result in model order, then the next step.
//
// Everything that decides about a tool call is in this file.
#include "agentloop/turn.h"

#include <algorithm>
#include <deque>
#include <mutex>
#include <type_traits>

#include "agentloop/budget_ledger.h"
#include "agentloop/event_data.h"

#include "base/ids.h"
#include "base/strings.h"
#include "core/compaction.h"
#include "core/hook_runner.h"
#include "protocol/codec.h"
#include "protocol/image.h"

namespace agentloop {

std::string Turn::CheckEditedArguments(CommandKind command, const PermissionPolicy& policy,
                                       const ToolSpec& spec, const ToolCall& call) {
  if (std::string refusal = CheckReadOnly(command, spec); !refusal.empty()) return refusal;
  if (!call.input.is_object()) return "the edited arguments are invalid: expected a JSON object";
  if (Status v = ValidateAgainstSchema(call.input, spec.input_schema); !v.ok()) {
    return "the edited arguments are invalid: " + v.message();
  }
  PolicyVerdict v = policy.Evaluate(spec, call);
  if (v.decision == Decision::kDeny) {
    return "the edited arguments are denied: " + v.reason;
  }
  return {};
}

std::string Turn::CheckReadOnly(CommandKind command, const ToolSpec& spec) {
  if (!IsReadOnly(command) || !spec.mutates || spec.confined_in_read_only) return {};
  return std::string(kPlanModeRefused) + " tool '" + spec.name +
         "' can change the workspace and the '" + std::string(CommandKindName(command)) +
         "' command is read-only; nothing was executed";
}

namespace {

enum class Phase {
  kIdle,
  kNeedModel,
  kAwaitModel,
  kAwaitSummary,  // the side request that writes a compaction summary
  kAwaitDecisions,
  kAwaitTools,
  kFinished
};

// The context budget band (SEMANTICS 4.6): at or over kSoftRatio of the
// window the history is compacted before a model call and the wrap-up
// message is sent; kHardRatio is the hard band.
constexpr double kSoftRatio = 0.7;
constexpr double kHardRatio = 0.92;
// The smallest output-token cap a request asks for when the window is
// nearly full (the prompt-too-long recovery handles what does not fit).
constexpr int64_t kMinOutputTokens = 256;

int64_t CeilQuarter(int64_t chars) { return chars <= 0 ? 0 : (chars + 3) / 4; }

// Tokens a call costs against the token budget when the provider reports
// cache figures (and for a turn's first request): its output and the input
// the provider did not read from its cache.
int64_t NewTokens(const Usage& u) {
  return u.input_tokens + u.cache_write_tokens + u.output_tokens;
}

enum class SlotState { kReady, kToRun, kNeedsDecision, kPending, kDenied };

struct Slot {
  std::string id;
  std::string name;
  Json input;
  const ToolSpec* spec = nullptr;
  SlotState state = SlotState::kReady;
  ContentBlock result;  // valid when kReady or kDenied
  PendingKind ask_kind = PendingKind::kApproval;
  std::string reason;  // decision reason (rule) or denial reason
  std::string rule;
  std::string pending_id;
  // kSubagent: the child session the call waits on, and whether the child
  // waits for an approval (else an answer).
  std::string child_session_id;
  bool child_waits_for_approval = false;
  // Runs because a rule allowed it (ToolCall::confined).
  bool confined = false;
};

struct StopAfter {
  StopReason stop;
  std::string reason;
};

}  // namespace

Message EngineStopMessage(std::string text) {
  Message m = Message::Assistant(std::move(text));
  m.tag = std::string(kEngineStopTag);
  return m;
}

namespace {

Message WrapUpMessage() {
  Message m;
  m.role = Role::kSystem;
  m.content.push_back(ContentBlock::Text(std::string(kWrapUpText)));
  return m;
}

// Gives a tool result the images of its tool's output. A tool's image that
// fails the checks of protocol/image.h (an embedder's tool may return
// anything) is described in the text instead: a provider would refuse the
// request, and every later request of the session with it.
void AttachImages(ContentBlock& result, const std::vector<ContentBlock>& images) {
  for (const ContentBlock& image : images) {
    Status valid =
        image.type == BlockType::kImage
            ? ValidateImage(image.media_type, image.data)
            : InvalidArgument("a block of type " + std::string(BlockTypeName(image.type)));
    if (valid.ok()) {
      result.images.push_back(image);
      continue;
    }
    if (!result.text.empty()) result.text += "\n";
    result.text += DescribeImage(image, "not a valid image: " + valid.message());
  }
}

std::string SummaryLine(const std::string& content) {
  std::string_view s = content;
  size_t nl = s.find('\n');
  if (nl != std::string_view::npos) s = s.substr(0, nl);
  return std::string(TruncateUtf8(s, 200));
}

// A command's non-zero exit code from a tool's details, for tool_call_end.
std::optional<int64_t> FailedExitCode(const ToolOutput& out) {
  if (!out.details.is_object()) return std::nullopt;
  auto it = out.details.find("exit_code");
  if (it == out.details.end() || !it->is_number_integer() || it->get<int64_t>() == 0) {
    return std::nullopt;
  }
  return it->get<int64_t>();
}

// The unified diff a file tool reports in its details, for tool_call_end.
std::string DiffOf(const ToolOutput& out) {
  if (!out.details.is_object()) return "";
  auto it = out.details.find("diff");
  return it != out.details.end() && it->is_string() ? it->get<std::string>() : "";
}

}  // namespace

class Turn::Impl {
 public:
  Impl(TurnConfig config, Transcript& transcript)
      : cfg_(std::move(config)), tr_(transcript), counters_(cfg_.counters), seq_(cfg_.first_seq) {
    if (cfg_.turn_id.empty()) cfg_.turn_id = NewId("turn");
    if (!cfg_.policy) cfg_.policy = std::make_shared<DefaultPermissionPolicy>();
    if (!cfg_.clock) cfg_.clock = [] { return std::chrono::steady_clock::now(); };
    if (!cfg_.now_ms) cfg_.now_ms = SystemNowMs;
    // The session's list itself when every tool is offered (no copy of the
    // schemas, and its identity for the providers' caches); a filtered copy
    // in a read-only command that leaves some out.
    ToolSpecList offered = cfg_.tools;
    const bool all_offered = std::all_of(
        cfg_.tools.begin(), cfg_.tools.end(),
        [&](const ToolSpec& t) { return Turn::CheckReadOnly(cfg_.command, t).empty(); });
    if (!all_offered) {
      std::vector<ToolSpec> kept;
      for (const auto& t : cfg_.tools) {
        if (Turn::CheckReadOnly(cfg_.command, t).empty()) kept.push_back(t);
      }
      offered = ToolSpecList(std::move(kept));
    }
    offered_ =
        offered.shared() ? offered.shared() : std::make_shared<const std::vector<ToolSpec>>();
    offered_uid_ = offered.uid() != 0 ? offered.uid() : RandomU64() | 1;
    hook_ctx_.session_id = cfg_.session_id;
    hook_ctx_.turn_id = cfg_.turn_id;
    hook_ctx_.workspace = cfg_.workspace;
    hook_ctx_.command = cfg_.command;
    // The part of every request that is not history, for the chars/4
    // context estimate (once per turn, never per step).
    fixed_chars_ = static_cast<int64_t>(cfg_.system_prompt.size()) + offered.chars();
    measure_ = cfg_.context_measure;
  }

  // ---- public surface -------------------------------------------------------

  Status Start(TurnInput input) {
    if (phase_ != Phase::kIdle) return FailedPrecondition("turn already started");
    if (input.decided) AL_RETURN_IF_ERROR(CheckDecided(*input.decided));
    if (input.is_retry && (tr_.empty() || tr_.back().role != Role::kUser)) {
      return InvalidArgument(
          "retry: the history does not end with a prompt or tool results to answer");
    }
    if ((input.decided || input.is_retry) && counters_.model_calls > 0) {
      // A continued turn's previous request is the history before its last
      // answer.
      answered_chars_ = PreviousRequestChars();
    }
    start_time_ = cfg_.clock();
    Emit([&] {
      return TurnBeginData{.input = input.is_retry  ? "retry"
                                    : input.decided ? "resume"
                                    : input.compact ? "compact"
                                                    : "user",
                           .command = cfg_.command,
                           .budget = cfg_.budget,
                           .counters = counters_};
    });
    if (!cfg_.start_notice.empty()) {
      Emit([&] { return NoticeData{"warning", cfg_.start_notice}; });
    }
    if (input.compact) {
      compact_only_ = true;
      if (!input.focus.empty()) cfg_.compaction_focus = std::move(input.focus);
      request_index_ = tr_.empty() ? std::nullopt : LatestRequest(tr_.messages(), tr_.size() - 1);
    } else if (!input.is_retry && !input.decided) {
      AppendMessage(std::move(input.message));
      request_index_ = tr_.size() - 1;
    } else {
      request_index_ = LatestRequest(tr_.messages(), tr_.size() - 1);
    }
    protect_from_ = tr_.empty() ? 0 : tr_.size() - 1;
    phase_ = Phase::kNeedModel;
    OpenRound();
    if (input.decided) RestoreBatch(*input.decided);
    return Status::Ok();
  }

  TurnAction Next(std::stop_token stop) {
    if (phase_ == Phase::kFinished) return turn_action::Finished{result_};
    if (!sink_error_.ok()) return FinishNow(StopReason::kFailed, sink_error_.ToString());
    if (phase_ != Phase::kNeedModel) {
      return FinishNow(StopReason::kFailed, "internal: Next() called while waiting for a result");
    }
    return PrepareModelCall(stop);
  }

  void OnModelResult(Result<ModelResponse> result) {
    if (phase_ == Phase::kAwaitSummary) return OnSummaryResult(std::move(result));
    if (phase_ != Phase::kAwaitModel) return;
    phase_ = Phase::kNeedModel;
    if (!result.ok()) return OnModelError(result.error());
    step_tool_results_ = 0;
    compactions_ = 0;
    ModelResponse& resp = *result;
    counters_.model_calls++;
    int64_t response_chars = 0;
    for (const auto& b : resp.content) {
      response_chars += static_cast<int64_t>(b.text.size() + b.raw_input.size());
      if (b.type == BlockType::kToolUse && !b.input.is_null()) {
        response_chars += static_cast<int64_t>(b.input.dump().size());
      }
    }
    if (resp.has_usage && resp.usage.Total() > 0) {
      AddTokens(ChargedTokens(resp));
      counters_.usage += resp.usage;
      // The context as the provider counted it; what is appended from now
      // on is estimated on top (ContextTokens).
      measure_ = ContextMeasure{.tokens = resp.usage.input_tokens + resp.usage.cache_read_tokens +
                                          resp.usage.cache_write_tokens,
                                .history_chars = tr_.chars(),
                                .fixed_chars = fixed_chars_};
    } else {
      // No usage reported: chars / 4 of what this call added to the
      // history (the turn's input, tool results since the last call, and
      // the response), so the cap still trips.
      AddTokens(CeilQuarter(uncounted_chars_ + response_chars));
    }
    answered_chars_ = request_chars_;
    Message assistant;
    assistant.role = Role::kAssistant;
    assistant.content = std::move(resp.content);
    for (auto& b : assistant.content) {
      if (b.type == BlockType::kToolUse && b.id.empty()) b.id = NewId("call");
    }
    bool has_tools = assistant.HasToolUse();
    std::string text = assistant.JoinedText();
    Emit([&] {
      return StepEndData{.step = counters_.model_calls,
                         .finish = resp.finish,
                         .usage = resp.usage,
                         .has_usage = resp.has_usage,
                         .tokens = counters_.tokens};
    });

    bool over_tokens = counters_.tokens > cfg_.budget.max_tokens;
    bool truncated = resp.finish == FinishReason::kLength;
    if (over_tokens || truncated) {
      std::string why = over_tokens ? "token budget exceeded (" + std::to_string(counters_.tokens) +
                                          " > " + std::to_string(cfg_.budget.max_tokens) + ")"
                                    : "the response was cut off by the output-token limit";
      AppendMessage(std::move(assistant));
      uncounted_chars_ = 0;  // counted above (usage or response_chars)
      if (has_tools) AnswerOpenCalls("not run: " + why);
      if (!sink_error_.ok()) return;
      if (over_tokens) {
        FinishNow(StopReason::kBudgetExhausted, why, has_tools ? "" : text);
      } else {
        truncated_ = true;
        Settle(text);
      }
      return;
    }
    if (resp.finish == FinishReason::kRefused) {
      // Nothing of a refused answer runs, and no hook may continue the turn.
      AppendMessage(std::move(assistant));
      uncounted_chars_ = 0;
      if (has_tools) AnswerOpenCalls("not run: the model refused to answer");
      if (!sink_error_.ok()) return;
      FinishNow(StopReason::kRefused,
                "the model refused to answer (stop reason reported by the provider)", text);
      return;
    }
    AppendMessage(std::move(assistant));
    uncounted_chars_ = 0;  // counted above (usage or response_chars)
    if (!has_tools) return Settle(text);
    ProcessBatch();
  }

  void OnDecisions(std::vector<ApprovalDecision> decisions) {
    if (phase_ != Phase::kAwaitDecisions) return;
    size_t k = 0;
    bool denied = false;
    for (auto& slot : slots_) {
      if (slot.state != SlotState::kNeedsDecision) continue;
      if (k >= decisions.size()) {
        if (denied) {
          // Not asked after a denial: skipped with the batch below.
          slot.state = SlotState::kToRun;
        } else {
          // Never run what nobody decided on.
          SetReady(slot, "not run: no decision was made about this call", true);
        }
        continue;
      }
      ApplyDecision(slot, decisions[k++]);
      denied = denied || slot.state == SlotState::kDenied;
    }
    ResolveBatch();
  }

  void OnToolResults(std::vector<Result<ToolOutput>> outputs) {
    if (phase_ != Phase::kAwaitTools) return;
    size_t k = 0;
    Status engine_error;
    for (auto& slot : slots_) {
      if (slot.state != SlotState::kToRun) continue;
      ToolOutput out;
      if (k < outputs.size() && outputs[k].ok()) {
        out = std::move(*outputs[k]);
      } else {
        Status s = k < outputs.size() ? outputs[k].error() : Internal("missing tool output");
        if (engine_error.ok()) engine_error = s.WithContext("tool '" + slot.name + "'");
        out = ToolOutput::Error("not run: engine failure: " + s.ToString());
      }
      ++k;
      // What a subagent spent counts against this turn too (its ledger
      // node already carries it).
      counters_.tool_calls += out.charged.tool_calls;
      counters_.tokens += out.charged.tokens;
      counters_.usage += out.charged.usage;
      if (!out.waiting_session.empty()) {
        // The call waits for a person in another session (a subagent's
        // durable pause): it stays outstanding and the batch pauses with
        // it; it has not ended, so no tool_call_end and no hooks yet.
        slot.state = SlotState::kPending;
        slot.ask_kind = PendingKind::kSubagent;
        slot.pending_id = NewPendingId(PendingKind::kSubagent);
        slot.reason = out.content;
        slot.child_session_id = out.waiting_session;
        slot.child_waits_for_approval = out.waiting_for != PendingKind::kQuestion;
        continue;
      }
      slot.result = ContentBlock::ToolResult(slot.id, out.content, out.is_error);
      AttachImages(slot.result, out.images);
      if (!out.details.is_null()) slot.result.meta = Json{{"details", out.details}};
      slot.state = SlotState::kReady;
      Emit([&] {
        return ToolCallEndData{
            .id = slot.id,
            .tool = slot.name,
            .is_error = out.is_error,
            .content_bytes = static_cast<int64_t>(out.content.size()),
            .summary = SummaryLine(out.content),
            .diff = DiffOf(out),
            .exit_code = FailedExitCode(out),
            .cancelled = out.details.is_object() && out.details.value("cancelled", false)};
      });
      ToolCall call{slot.id, slot.name, slot.input};
      for (auto& h : cfg_.hooks) {
        auto hook = h;
        RunHook(*hook, "after_tool_result",
                [hook, ctx = hook_ctx_, call, out] { hook->AfterToolResult(ctx, call, out); });
      }
    }
    if (!engine_error.ok()) {
      PushResults("the turn failed: " + engine_error.ToString());
      FinishNow(StopReason::kFailed, engine_error.ToString());
      return;
    }
    AfterTools();
  }

  // A report of a running call (ToolContext::report): emitted now, between
  // the call's tool_call_begin and its tool_call_end, when the call is one
  // the turn waits for and the type is persisted; dropped otherwise.
  void OnToolEvent(std::string_view call_id, Event event) {
    if (phase_ != Phase::kAwaitTools || !ShouldPersist(event.type)) return;
    for (const Slot& slot : slots_) {
      if (slot.id == call_id && slot.state == SlotState::kToRun) {
        EmitRaw(std::move(event));
        return;
      }
    }
  }

  // A summary side request streams too: its text is not the answer.
  void EmitTextDelta(std::string_view text) {
    if (phase_ == Phase::kAwaitSummary) return;
    Emit([&] { return TextDeltaData{std::string(text)}; });
  }
  void EmitThinkingDelta(std::string_view text) {
    if (phase_ == Phase::kAwaitSummary) return;
    Emit([&] { return ThinkingDeltaData{std::string(text)}; });
  }
  void EmitRetry(const RetryData& retry) {
    Emit([&] { return retry; });
  }

  // What an answered model call costs against the token budget: its output
  // plus the input new since the turn's previous request. With cache
  // figures, the input the provider did not read from its cache; without
  // them (a server that reports only the prompt's total, which repeats the
  // whole context every call), chars / 4 of the messages appended since the
  // previous request and of the request's tail (sent after the history, so
  // never a prefix a server could reuse). The turn's first request, and the
  // first after a compaction, count their whole input.
  int64_t ChargedTokens(const ModelResponse& resp) const {
    const Usage& u = resp.usage;
    if (resp.has_cache_usage || !answered_chars_ || request_chars_ < *answered_chars_) {
      return NewTokens(u);
    }
    return u.output_tokens + CeilQuarter(request_chars_ - *answered_chars_ + request_tail_chars_);
  }

  // The estimated tokens of the next request: the input the provider
  // reported for the last one (in this turn or one before) plus chars / 4
  // of what was appended since and of a change of the system text and
  // tools; without a usable report, chars / 4 of the system text, tools and
  // history. O(1): the transcript keeps its character count.
  int64_t ContextTokens() const {
    if (measure_ && tr_.chars() >= measure_->history_chars) {
      int64_t t = measure_->tokens + CeilQuarter(tr_.chars() - measure_->history_chars);
      if (measure_->fixed_chars >= 0) {
        const int64_t d = fixed_chars_ - measure_->fixed_chars;
        t += d >= 0 ? CeilQuarter(d) : -CeilQuarter(-d);
      }
      return std::max<int64_t>(t, 0);
    }
    return CeilQuarter(fixed_chars_ + tr_.chars());
  }

  std::span<const ToolSpec> offered() const { return *offered_; }
  const TurnConfig& config() const { return cfg_; }

 private:
  // ---- events -------------------------------------------------------------

  // An event whose data was made elsewhere (a tool's report).
  // Emits `e` (of a persisted type) numbered and stamped here.
  void EmitRaw(Event e) {
    if (cfg_.sink == nullptr) {
      ++seq_;
      return;
    }
    e.session_id = cfg_.session_id;
    e.turn_id = cfg_.turn_id;
    e.seq = seq_++;
    e.ts = cfg_.now_ms();
    Status s = cfg_.sink->OnEvent(e);
    if (!s.ok() && sink_error_.ok()) sink_error_ = s.WithContext("event sink");
  }

  // Emits the event `make()` returns the data of (an event_data.h struct;
  // built only when there is a sink), numbered and stamped here.
  template <typename MakeData>
  void Emit(MakeData&& make) {
    using Data = std::invoke_result_t<MakeData>;
    // Persisted events are numbered without gaps (a reader that saw seq N
    // and then N+2 knows it missed one); deltas, which are never stored,
    // carry 0 and take no number.
    const bool numbered = ShouldPersist(Data::kType);
    if (cfg_.sink == nullptr) {
      if (numbered) ++seq_;
      return;
    }
    Event e(make(), cfg_.session_id, cfg_.turn_id, numbered ? seq_++ : 0, cfg_.now_ms());
    Status s = cfg_.sink->OnEvent(e);
    if (!s.ok() && sink_error_.ok()) sink_error_ = s.WithContext("event sink");
  }

  // The history's characters before its last assistant message: what the
  // request that message answered carried (none without one).
  std::optional<int64_t> PreviousRequestChars() const {
    int64_t chars = tr_.chars();
    const auto msgs = tr_.messages();
    for (size_t i = msgs.size(); i > 0; --i) {
      chars -= Transcript::MessageChars(msgs[i - 1]);
      if (msgs[i - 1].role == Role::kAssistant) return chars;
    }
    return std::nullopt;
  }

  void AppendMessage(Message m) {
    const Message& stored = tr_.Append(std::move(m));
    uncounted_chars_ += Transcript::MessageChars(stored);
    Emit([&] { return MessageData{stored}; });
  }

  // ---- hooks --------------------------------------------------------------

  using OwnedHistory = std::shared_ptr<const std::vector<Message>>;

  // The history `hook` is handed. An inline hook (timeout zero) returns
  // before the transcript changes and sees `history` itself. A timed hook
  // runs on the helper thread and may be abandoned after its timeout while
  // it still reads its arguments: it sees an owned, immutable copy, which
  // `keep` holds (the call's closure captures it, so the copy lives until
  // the hook returns). One copy per hook point, shared through `owned`, made
  // only when a timed hook is registered.
  static std::span<const Message> HistoryFor(const Hook& hook, std::span<const Message> history,
                                             OwnedHistory& owned, OwnedHistory& keep) {
    if (hook.timeout() <= std::chrono::milliseconds::zero()) return history;
    if (!owned)
      owned = std::make_shared<const std::vector<Message>>(history.begin(), history.end());
    keep = owned;
    return *owned;
  }

  // A timed hook saw `copy`, a copy of `source`: the range of the copy it
  // left in its request is the same range of `source`. Any other span is the
  // hook's own (ModelRequest::tail is where a hook puts messages it made).
  static std::span<const Message> Rebase(std::span<const Message> seen,
                                         const std::vector<Message>& copy,
                                         std::span<const Message> source) {
    if (seen.empty()) return {};
    std::less_equal<const Message*> le;
    const Message* begin = copy.data();
    if (!le(begin, seen.data()) || !le(seen.data() + seen.size(), begin + copy.size())) {
      return seen;
    }
    return source.subspan(static_cast<size_t>(seen.data() - begin), seen.size());
  }

  bool RunHook(Hook& hook, const char* point, std::function<void()> fn) {
    bool ok = hooks_.Run(point, hook.timeout(), std::move(fn),
                         [&](const std::string& p, const std::string& err) {
                           Emit([&] { return HookErrorData{std::string(hook.name()), p, err}; });
                         });
    DrainNotices();
    return ok;
  }

 public:
  // Tokens the turn spent itself: counted, and charged to its ledger node.
  void AddTokens(int64_t n) {
    counters_.tokens += n;
    if (cfg_.ledger) cfg_.ledger->Charge(0, n);
  }

  void PostNotice(NoticeData notice) {
    std::lock_guard<std::mutex> lock(notices_mu_);
    notices_.push_back(std::move(notice));
  }

 private:
  void DrainNotices() {
    std::vector<NoticeData> posted;
    {
      std::lock_guard<std::mutex> lock(notices_mu_);
      posted.swap(notices_);
    }
    for (auto& notice : posted) Emit([&] { return std::move(notice); });
  }

  void OpenRound() {
    round_open_ = true;
    prompt_too_long_ = 0;
    for (auto& h : cfg_.hooks) {
      auto hook = h;
      RunHook(*hook, "turn_start", [hook, ctx = hook_ctx_] { hook->OnTurnStart(ctx); });
    }
  }

  // Calls OnTurnEnd on every hook (pairing with OnTurnStart) and emits a
  // `continuation` event for each verdict that asks for another round or
  // gives a reason. Returns the merged verdict (honoured by Settle only).
  TurnEndVerdict CloseRound(StopReason stop, const std::string& reason) {
    TurnEndVerdict merged;
    if (!round_open_) return merged;
    round_open_ = false;
    OwnedHistory owned;
    for (auto& h : cfg_.hooks) {
      auto hook = h;
      auto verdict = std::make_shared<TurnEndVerdict>();
      TurnEndInfo info;
      OwnedHistory keep;
      info.stop = stop;
      info.reason = reason;
      info.history = HistoryFor(*hook, tr_.messages(), owned, keep);
      info.tool_result_count = step_tool_results_;
      info.counters = counters_;
      info.truncated = truncated_;
      info.prompt_too_long = prompt_too_long_;
      bool ok = RunHook(*hook, "turn_end", [hook, ctx = hook_ctx_, info, verdict, keep] {
        *verdict = hook->OnTurnEnd(ctx, info);
      });
      if (!ok) continue;
      if (verdict->continue_turn || !verdict->reason.empty()) {
        const bool continues = verdict->continue_turn && stop == StopReason::kCompleted;
        Emit([&] {
          return ContinuationData{
              .by = std::string(hook->name()),
              .continue_turn = continues,
              .reason = verdict->reason,
              .entries = continues ? static_cast<int64_t>(verdict->entries.size()) : 0,
              .model_calls = counters_.model_calls,
              .details = verdict->details};
        });
      }
      if (verdict->continue_turn) merged.continue_turn = true;
      for (auto& e : verdict->entries) merged.entries.push_back(std::move(e));
    }
    return merged;
  }

  // ---- model calls --------------------------------------------------------

  // A compaction by hand: stage 2 over the whole view (the last messages
  // and the user's latest request stay), then the turn completes.
  TurnAction CompactByHand() {
    if (compact_done_) {
      return FinishNow(StopReason::kCompleted, compacted_ ? "compacted" : "nothing to compact");
    }
    compact_done_ = true;
    auto plan = PlanSummary(tr_.messages(), request_index_);
    if (!plan) return FinishNow(StopReason::kCompleted, "nothing to compact");
    compacted_ = true;
    pending_trigger_ = "manual";
    if (cfg_.model_summaries) {
      if (auto side = SummaryRequest(*plan)) {
        pending_plan_ = *plan;
        phase_ = Phase::kAwaitSummary;
        return turn_action::CallModel{std::move(*side)};
      }
    }
    const int64_t before = ContextTokens();
    CompactionResult r = ApplyPlan(*plan, TruncatingSummaryOf(*plan));
    EmitCompaction(r, "manual", 0, before);
    return FinishNow(StopReason::kCompleted, "compacted");
  }

  TurnAction PrepareModelCall(std::stop_token stop) {
    if (stop.stop_requested()) return FinishNow(StopReason::kAborted, "aborted");
    if (compact_only_) return CompactByHand();
    const Budget& b = cfg_.budget;
    if (b.max_wall_time) {
      auto elapsed =
          std::chrono::duration_cast<std::chrono::milliseconds>(cfg_.clock() - start_time_);
      if (elapsed >= *b.max_wall_time) {
        return FinishNow(StopReason::kBudgetExhausted,
                         "wall time budget exhausted (" + std::to_string(elapsed.count()) +
                             " ms >= " + std::to_string(b.max_wall_time->count()) + " ms)");
      }
    }
    // The budget check (the seed's order: check, wrap-up message, call),
    // once per model call: a summary side request re-enters here.
    if (!step_checked_) {
      step_checked_ = true;
      bool ok = counters_.model_calls < b.max_turns && counters_.tokens < b.max_tokens &&
                counters_.tool_calls <= b.max_tool_calls;
      const int64_t measured = ContextTokens();
      step_band_ = "ok";
      if (cfg_.context_window > 0) {
        if (measured >=
            static_cast<int64_t>(kHardRatio * static_cast<double>(cfg_.context_window))) {
          step_band_ = "over_hard_limit";
        } else if (measured >= SoftLimit()) {
          step_band_ = "nudge";
        }
      }
      Emit([&] {
        return BudgetCheckData{.tool_calls = counters_.tool_calls,
                               .max_tool_calls = b.max_tool_calls,
                               .tokens = counters_.tokens,
                               .max_tokens = b.max_tokens,
                               .model_calls = counters_.model_calls,
                               .max_turns = b.max_turns,
                               .ok = ok,
                               .context_tokens = measured,
                               .context_window = cfg_.context_window,
                               .band = step_band_};
      });
      if (counters_.model_calls >= b.max_turns) {
        std::string text =
            "Stopped after " + std::to_string(b.max_turns) +
            " turns without a final answer \xE2\x80\x94 the agent may be stuck in a loop.";
        AppendMessage(EngineStopMessage(text));
        return FinishNow(StopReason::kMaxTurns,
                         "max turns reached (" + std::to_string(b.max_turns) + ")", text);
      }
      if (counters_.tokens >= b.max_tokens) {
        return FinishNow(StopReason::kBudgetExhausted,
                         "token budget exhausted (" + std::to_string(counters_.tokens) +
                             " >= " + std::to_string(b.max_tokens) + ")");
      }
    }
    if (!sink_error_.ok()) return FinishNow(StopReason::kFailed, sink_error_.ToString());
    if (cfg_.context_window > 0) {
      // Over the soft threshold: compact before the call. A model-written
      // summary is a side request; this step resumes when it is answered.
      if (auto side = CompactForBand()) return *std::move(side);
      if (!sink_error_.ok()) return FinishNow(StopReason::kFailed, sink_error_.ToString());
    }
    step_checked_ = false;
    const int64_t context = ContextTokens();

    ModelRequest req;
    req.model = cfg_.model;
    req.system = cfg_.system_prompt;
    req.history = tr_.messages();
    req.tools = *offered_;
    req.tools_uid = offered_uid_;
    req.cache_key = cfg_.session_id;
    // The output cap: what the token budget leaves (at least 1024, the
    // seed's floor), never more than the model's maximum output, nor more
    // than the window leaves after the input.
    req.max_output_tokens = std::max<int64_t>(1024, b.max_tokens - counters_.tokens);
    if (cfg_.max_output_tokens > 0) {
      req.max_output_tokens = std::min(req.max_output_tokens, cfg_.max_output_tokens);
    }
    if (cfg_.context_window > 0) {
      // A margin of 1/20 of the window absorbs the estimate's error: the
      // APIs reject input + output cap above the window.
      const int64_t room = cfg_.context_window - context - cfg_.context_window / 20;
      req.max_output_tokens = std::min(req.max_output_tokens, std::max(kMinOutputTokens, room));
    }
    // While in the band, the seed's wrap-up message goes with the request
    // (never stored).
    if (step_band_ != "ok") req.tail.push_back(WrapUpMessage());
    OwnedHistory owned;  // a copy of `owned_from`, for timed hooks
    std::span<const Message> owned_from;
    for (auto& h : cfg_.hooks) {
      auto hook = h;
      const std::span<const Message> source = req.history;
      if (owned && (source.data() != owned_from.data() || source.size() != owned_from.size())) {
        owned.reset();  // an earlier hook changed the history: copy the new one
      }
      OwnedHistory keep;
      auto copy = std::make_shared<ModelRequest>(req);
      copy->history = HistoryFor(*hook, source, owned, keep);
      owned_from = source;
      // The request's tools view offered_: the closure holds it too.
      bool done = RunHook(*hook, "before_model_call",
                          [hook, ctx = hook_ctx_, copy, keep, tools = offered_] {
                            hook->BeforeModelCall(ctx, *copy);
                          });
      if (!done) continue;
      req = std::move(*copy);
      if (keep) req.history = Rebase(req.history, *keep, source);
    }
    // A hook that offered other tools voids the identity of the offer.
    if (req.tools.data() != offered_->data() || req.tools.size() != offered_->size()) {
      req.tools_uid = 0;
    }
    Emit([&] {
      return StepBeginData{.step = counters_.model_calls + 1,
                           .max_output_tokens = req.max_output_tokens,
                           .messages = static_cast<int64_t>(req.message_count())};
    });
    request_chars_ = tr_.chars();
    request_tail_chars_ = 0;
    for (const Message& m : req.tail) request_tail_chars_ += Transcript::MessageChars(m);
    phase_ = Phase::kAwaitModel;
    return turn_action::CallModel{std::move(req)};
  }

  // ---- context budget band ----------------------------------------------

  int64_t SoftLimit() const {
    return static_cast<int64_t>(kSoftRatio * static_cast<double>(cfg_.context_window));
  }

  // Before a model call over the soft threshold: stage 1 drops the oldest
  // half of the prior head; if still over, stage 2 summarises everything
  // before the last messages except the user's latest request. Returns the
  // side request that writes the summary, or nullopt when done.
  std::optional<TurnAction> CompactForBand() {
    if (ContextTokens() <= SoftLimit()) return std::nullopt;
    pending_trigger_ = "threshold";
    if (auto plan = PlanDropOldestHalf(tr_.messages(), request_index_)) {
      const int64_t before = ContextTokens();
      // Dropped messages may hold data that must survive (the todo list):
      // then an engine-made note carries it.
      std::optional<Message> carrier;
      if (auto meta = CarriedMeta(*plan)) {
        carrier = SummaryMessage(plan->drop, "(older messages dropped)", std::move(meta));
      }
      CompactionResult r = ApplyPlan(*plan, std::move(carrier));
      EmitCompaction(r, "threshold", 0, before);
      if (ContextTokens() <= SoftLimit()) return std::nullopt;
    }
    auto plan = PlanSummary(tr_.messages(), request_index_);
    if (!plan) return std::nullopt;
    if (cfg_.model_summaries) {
      if (auto side = SummaryRequest(*plan)) {
        pending_plan_ = *plan;
        phase_ = Phase::kAwaitSummary;
        return TurnAction{turn_action::CallModel{std::move(*side)}};
      }
    }
    const int64_t before = ContextTokens();
    CompactionResult r = ApplyPlan(*plan, TruncatingSummaryOf(*plan));
    EmitCompaction(r, "threshold", 0, before);
    return std::nullopt;
  }

  // The side request asking the model for a summary of what `plan` removes:
  // the session's system text and tools (so a provider's prompt cache
  // serves the prefix), the removed messages, and kSummaryPrompt. nullopt
  // when those messages alone would not fit the window.
  std::optional<ModelRequest> SummaryRequest(const CompactionPlan& plan) {
    auto msgs = tr_.messages();
    int64_t kept_chars = 0;
    for (size_t i = plan.drop; i < msgs.size(); ++i)
      kept_chars += Transcript::MessageChars(msgs[i]);
    const int64_t all = fixed_chars_ + tr_.chars();
    const int64_t slice = fixed_chars_ + tr_.chars() - kept_chars;
    const double slice_tokens = static_cast<double>(ContextTokens()) * static_cast<double>(slice) /
                                static_cast<double>(std::max<int64_t>(all, 1));
    if (cfg_.context_window > 0 && slice_tokens + static_cast<double>(kSummaryMaxTokens) >
                                       kHardRatio * static_cast<double>(cfg_.context_window)) {
      return std::nullopt;
    }
    ModelRequest req;
    req.model = cfg_.model;
    req.system = cfg_.system_prompt;
    req.history = msgs.subspan(0, plan.drop);
    req.tools = *offered_;
    req.tools_uid = offered_uid_;
    req.cache_key = cfg_.session_id;
    std::string prompt(kSummaryPrompt);
    if (!cfg_.compaction_focus.empty()) prompt += "\nFocus on: " + cfg_.compaction_focus;
    req.tail.push_back(Message::User(std::move(prompt)));
    req.max_output_tokens = kSummaryMaxTokens;
    req.timeout = cfg_.summary_timeout;
    req.max_attempts = kSummaryMaxAttempts;
    if (cfg_.max_output_tokens > 0) {
      req.max_output_tokens = std::min(req.max_output_tokens, cfg_.max_output_tokens);
    }
    return req;
  }

  // The side request's answer: its text becomes the summary; a failure, an
  // empty answer or one cut off falls back to the truncating summary. Its
  // tokens are charged to the turn either way it was answered.
  void OnSummaryResult(Result<ModelResponse> result) {
    phase_ = Phase::kNeedModel;
    if (!pending_plan_) return;
    CompactionPlan plan = *pending_plan_;
    pending_plan_.reset();
    if (!result.ok() && result.error().code() == Code::kCancelled) {
      FinishNow(StopReason::kAborted, "aborted");
      return;
    }
    std::string text;
    if (result.ok()) {
      const ModelResponse& resp = *result;
      for (const auto& b : resp.content) {
        if (b.type == BlockType::kText) text += b.text;
      }
      if (resp.has_usage && resp.usage.Total() > 0) {
        AddTokens(NewTokens(resp.usage));
        counters_.usage += resp.usage;
      } else {
        AddTokens(CeilQuarter(static_cast<int64_t>(text.size() + kSummaryPrompt.size())));
      }
      if (resp.finish == FinishReason::kLength) text.clear();
    }
    const int64_t before = ContextTokens();
    std::optional<Message> summary;
    std::string source = "model";
    if (text.empty()) {
      source = "truncated";
      summary = TruncatingSummaryOf(plan);
      if (!result.ok()) {
        Emit([&] {
          return NoticeData{"warning", "the compaction summary request failed (" +
                                           RedactSecrets(result.error().ToString()) +
                                           "); a truncated summary is used"};
        });
      }
    } else {
      summary = SummaryMessage(plan.drop, SanitizeUtf8(text), CarriedMeta(plan));
    }
    CompactionResult r = ApplyPlan(plan, std::move(summary));
    last_summary_source_ = source;
    EmitCompaction(r, pending_trigger_.c_str(), 0, before);
  }

  std::optional<Json> CarriedMeta(const CompactionPlan& plan) const {
    if (!cfg_.carry_meta) return std::nullopt;
    return cfg_.carry_meta(tr_.messages().subspan(0, plan.drop));
  }

  Message TruncatingSummaryOf(const CompactionPlan& plan) {
    last_summary_source_ = "truncated";
    return SummaryMessage(plan.drop, TruncatingSummary(tr_.messages().subspan(0, plan.drop)),
                          CarriedMeta(plan));
  }

  CompactionResult ApplyPlan(const CompactionPlan& plan, std::optional<Message> summary) {
    const int64_t before = ContextTokens();
    const int64_t chars_before = tr_.chars();
    CompactionResult r = ApplyCompaction(tr_, plan, std::move(summary));
    AfterCompaction(r, before, chars_before);
    return r;
  }

  // Keeps the turn's indices and the context measurement true after the
  // first `r.dropped` messages were replaced.
  void AfterCompaction(const CompactionResult& r, int64_t tokens_before, int64_t chars_before) {
    // The next request is new from its start: it counts its whole input.
    answered_chars_.reset();
    const size_t inserted = (r.summary ? 1 : 0) + r.kept.size();
    auto shift = [&](size_t i) -> std::optional<size_t> {
      if (i >= r.dropped) return i - r.dropped + inserted;
      return std::nullopt;
    };
    if (request_index_) {
      if (auto s = shift(*request_index_)) {
        request_index_ = s;
      } else if (!r.kept.empty()) {
        request_index_ = r.summary ? 1 : 0;
      } else {
        request_index_.reset();
      }
    }
    if (auto s = shift(protect_from_)) {
      protect_from_ = *s;
    } else {
      // The running turn's older steps went into the summary: what
      // remains of the turn starts at its re-inserted request.
      protect_from_ = request_index_ ? *request_index_ : (r.summary ? 1 : 0);
    }
    // The measurement scales with the characters that remain (the ratio of
    // tokens to characters the provider reported stays).
    if (measure_) {
      const double per_char =
          static_cast<double>(tokens_before) /
          static_cast<double>(std::max<int64_t>(fixed_chars_ + chars_before, 1));
      measure_ =
          ContextMeasure{.tokens = static_cast<int64_t>(
                             per_char * static_cast<double>(fixed_chars_ + tr_.chars()) + 0.5),
                         .history_chars = tr_.chars(),
                         .fixed_chars = fixed_chars_};
    }
  }

  void EmitCompaction(const CompactionResult& r, const char* trigger, int attempt,
                      int64_t tokens_before) {
    std::string source = r.summary ? last_summary_source_ : std::string();
    last_summary_source_.clear();
    Emit([&] {
      return CompactionData{.from = static_cast<int64_t>(r.from),
                            .to = static_cast<int64_t>(r.to),
                            .attempt = attempt,
                            .drop_prefix = static_cast<int64_t>(r.dropped),
                            .summary = r.summary,
                            .kept = r.kept,
                            .trigger = trigger,
                            .summary_source = source,
                            .tokens_before = tokens_before,
                            .tokens_after = ContextTokens()};
    });
  }

  void OnModelError(const Status& error) {
    if (error.code() == Code::kPromptTooLong) ++prompt_too_long_;
    if (error.code() == Code::kPromptTooLong && compactions_ < cfg_.max_compactions) {
      ++compactions_;
      const int64_t before = ContextTokens();
      const int64_t chars_before = tr_.chars();
      auto r = CompactPriorHistory(tr_, protect_from_, compactions_);
      if (!r) {
        // Nothing left before this turn: summarise its older steps.
        if (auto plan = PlanSummary(tr_.messages(), request_index_)) {
          r = ApplyPlan(*plan, TruncatingSummaryOf(*plan));
        }
      } else {
        if (r->summary) last_summary_source_ = "truncated";
        AfterCompaction(*r, before, chars_before);
      }
      if (r) {
        EmitCompaction(*r, "prompt_too_long", compactions_, before);
        return;  // phase is kNeedModel: the next Next() retries
      }
    }
    if (error.code() == Code::kCancelled) {
      FinishNow(StopReason::kAborted, "aborted");
      return;
    }
    FinishNow(StopReason::kFailed, "model call failed: " + RedactSecrets(error.ToString()));
  }

  // ---- batches ------------------------------------------------------------

  const ToolSpec* FindSpec(const std::string& name) const {
    for (const auto& t : cfg_.tools) {
      if (t.name == name) return &t;
    }
    return nullptr;
  }

  void SetReady(Slot& slot, std::string content, bool is_error) {
    slot.result = ContentBlock::ToolResult(slot.id, std::move(content), is_error);
    slot.state = SlotState::kReady;
  }

  void EmitDecision(const Slot& slot, Decision d, const std::string& by, bool edited) {
    Emit([&] {
      return DecisionData{.tool_use_id = slot.id,
                          .tool = slot.name,
                          .decision = d,
                          .reason = slot.reason,
                          .rule = slot.rule,
                          .by = by,
                          .edited = edited,
                          .pending_id = slot.pending_id};
    });
  }

  // Answers every tool_use of the last assistant message with `why`.
  void AnswerOpenCalls(const std::string& why) {
    Message results;
    results.role = Role::kUser;
    for (const auto& b : tr_.back().content) {
      if (b.type == BlockType::kToolUse) {
        results.content.push_back(ContentBlock::ToolResult(b.id, why, true));
      }
    }
    AppendMessage(std::move(results));
  }

  // One slot per tool_use of the open assistant message, in model order.
  void OpenSlots() {
    slots_.clear();
    stop_after_.reset();
    for (const auto& b : tr_.back().content) {
      if (b.type != BlockType::kToolUse) continue;
      Slot s;
      s.id = b.id;
      s.name = b.name;
      s.input = b.input;
      s.spec = FindSpec(b.name);
      if (!b.raw_input.empty() && b.input.is_null()) {
        s.reason = b.raw_input;               // ProcessBatch's error text
        s.state = SlotState::kNeedsDecision;  // placeholder, replaced by ProcessBatch
      }
      slots_.push_back(std::move(s));
    }
  }

  std::string StuckKey(const Slot& slot) const { return slot.name + "\x1f" + slot.input.dump(); }

  void ProcessBatch() {
    OpenSlots();
    const Budget& budget = cfg_.budget;
    bool refused = false;
    for (auto& slot : slots_) {
      if (stop_after_) {
        SetReady(slot, "not run: " + stop_after_->reason, true);
        continue;
      }
      if (counters_.tool_calls >= budget.max_tool_calls) {
        std::string why = "tool call budget exhausted (" + std::to_string(counters_.tool_calls) +
                          " >= " + std::to_string(budget.max_tool_calls) + ")";
        stop_after_ = StopAfter{StopReason::kBudgetExhausted, why};
        SetReady(slot, "not run: " + why, true);
        continue;
      }
      counters_.tool_calls++;
      if (cfg_.ledger) cfg_.ledger->Charge(1, 0);
      if (slot.state == SlotState::kNeedsDecision) {  // arguments were not valid JSON
        std::string raw(TruncateUtf8(slot.reason, 200));
        slot.reason.clear();
        SetReady(slot,
                 "invalid arguments for tool '" + slot.name + "': not valid JSON: " + raw +
                     "\nSend the call again with a JSON object as arguments.",
                 true);
        continue;
      }
      if (slot.spec == nullptr) {
        std::string names;
        for (const auto& t : *offered_) names += (names.empty() ? "" : ", ") + t.name;
        SetReady(slot, "unknown tool '" + slot.name + "'; available tools: " + names, true);
        continue;
      }
      if (std::string refusal = Turn::CheckReadOnly(cfg_.command, *slot.spec); !refusal.empty()) {
        stop_after_ = StopAfter{StopReason::kToolRefused, refusal};
        SetReady(slot, refusal, true);
        refused = true;
        continue;
      }
      if (!slot.input.is_object()) {
        SetReady(slot, "invalid arguments for tool '" + slot.name + "': expected a JSON object",
                 true);
        continue;
      }
      if (Status v = ValidateAgainstSchema(slot.input, slot.spec->input_schema); !v.ok()) {
        SetReady(slot, "invalid arguments for tool '" + slot.name + "': " + v.message(), true);
        continue;
      }
      if (cfg_.stuck_repeats > 0) {
        recent_.push_back(StuckKey(slot));
        while (static_cast<int>(recent_.size()) > cfg_.stuck_window) recent_.pop_front();
        int same = static_cast<int>(std::count(recent_.begin(), recent_.end(), recent_.back()));
        if (same >= cfg_.stuck_repeats) {
          std::string why = "stuck: tool '" + slot.name + "' was called " + std::to_string(same) +
                            " times with the same arguments in the last " +
                            std::to_string(recent_.size()) + " calls";
          stop_after_ = StopAfter{StopReason::kMaxTurns, why};
          SetReady(slot, "not run: " + why, true);
          continue;
        }
      }
      if (!ApplyToolHooks(slot)) continue;
      if (slot.name == kAskUserTool) {
        slot.state = SlotState::kNeedsDecision;
        slot.ask_kind = PendingKind::kQuestion;
        slot.reason = slot.input.value("question", std::string());
        continue;
      }
      ToolCall call{slot.id, slot.name, slot.input};
      PolicyVerdict v = cfg_.policy->Evaluate(*slot.spec, call);
      slot.reason = v.reason;
      slot.rule = v.rule;
      switch (v.decision) {
        case Decision::kAllow:
          // A rule-allowed call of a tool that confines such calls runs
          // confined; where it cannot confine itself, a person decides
          // (unless the call provably changes nothing).
          if (!slot.spec->confinement_unavailable.empty() && !v.read_only) {
            slot.state = SlotState::kNeedsDecision;
            slot.ask_kind = PendingKind::kApproval;
            slot.reason = v.reason + "; asked: a call a rule allows runs confined, and " +
                          slot.spec->confinement_unavailable;
            if (!confinement_noticed_) {
              confinement_noticed_ = true;
              Emit([&] {
                return NoticeData{"warning", "'" + slot.name +
                                                 "' calls that rules allow are asked about: " +
                                                 slot.spec->confinement_unavailable};
              });
            }
            break;
          }
          slot.confined = slot.spec->confines_rule_allowed;
          slot.state = SlotState::kToRun;
          EmitDecision(slot, Decision::kAllow, "rule", false);
          break;
        case Decision::kDeny:
          slot.state = SlotState::kDenied;
          slot.result = ContentBlock::ToolResult(slot.id, "denied: " + v.reason, true);
          EmitDecision(slot, Decision::kDeny, "rule", false);
          break;
        case Decision::kAsk:
          slot.state = SlotState::kNeedsDecision;
          slot.ask_kind = PendingKind::kApproval;
          break;
      }
    }
    if (refused) {
      // Plan mode: nothing of this batch runs.
      for (auto& slot : slots_) {
        if (slot.state != SlotState::kReady)
          SetReady(slot, "not run: " + stop_after_->reason, true);
      }
      return ResolveBatch();
    }
    if (stop_after_) {
      // The turn stops after this batch (budget, stuck guard): do not ask a
      // person about calls that could not run anyway.
      for (auto& slot : slots_) {
        if (slot.state == SlotState::kNeedsDecision) {
          SetReady(slot, "not run: " + stop_after_->reason, true);
        }
      }
    }
    std::vector<ApprovalRequest> requests;
    for (auto& slot : slots_) {
      if (slot.state != SlotState::kNeedsDecision) continue;
      slot.pending_id = NewPendingId(slot.ask_kind);
      ApprovalRequest r;
      r.session_id = cfg_.session_id;
      r.turn_id = cfg_.turn_id;
      r.kind = slot.ask_kind;
      r.pending_id = slot.pending_id;
      r.call = ToolCall{slot.id, slot.name, slot.input};
      r.spec = *slot.spec;
      r.reason = slot.reason;
      r.rule = slot.rule;
      requests.push_back(std::move(r));
    }
    if (!requests.empty()) {
      phase_ = Phase::kAwaitDecisions;
      pending_requests_ = std::move(requests);
      return;
    }
    ResolveBatch();
  }

  // Runs BeforeToolCall hooks. Returns false when the slot got a result.
  bool ApplyToolHooks(Slot& slot) {
    for (auto& h : cfg_.hooks) {
      auto hook = h;
      auto verdict = std::make_shared<ToolCallVerdict>();
      ToolCall call{slot.id, slot.name, slot.input};
      bool ok = RunHook(*hook, "before_tool_call", [hook, ctx = hook_ctx_, call, verdict] {
        *verdict = hook->BeforeToolCall(ctx, call);
      });
      if (!ok) continue;
      switch (verdict->kind) {
        case ToolCallVerdict::Kind::kAllow:
          break;
        case ToolCallVerdict::Kind::kDeny:
          SetReady(slot, "blocked by hook '" + std::string(hook->name()) + "': " + verdict->reason,
                   true);
          return false;
        case ToolCallVerdict::Kind::kRewrite:
          if (Status v = ValidateAgainstSchema(verdict->input, slot.spec->input_schema);
              !v.ok() || !verdict->input.is_object()) {
            SetReady(slot,
                     "hook '" + std::string(hook->name()) +
                         "' rewrote the arguments into invalid ones: " + v.message(),
                     true);
            return false;
          }
          slot.input = verdict->input;
          break;
      }
    }
    return true;
  }

  // Applies a person's decision to a slot that asked. `logged`: the decision
  // event is already in the log (a durable resolver wrote it when it
  // recorded the decision); a decision this turn overrules (an invalid or
  // denied edit) is still logged.
  void ApplyDecision(Slot& slot, const ApprovalDecision& d, bool logged = false) {
    switch (d.kind) {
      case ApprovalDecision::Kind::kAllow:
        if (slot.ask_kind == PendingKind::kSubagent) {
          // The child's items are decided: the call runs again and the
          // subagent continues where it paused.
          slot.state = SlotState::kToRun;
          return;
        }
        if (slot.ask_kind == PendingKind::kQuestion) {
          SetReady(slot, d.answer, false);
          if (!logged) EmitDecision(slot, Decision::kAllow, d.by, false);
          return;
        }
        if (d.edited_input) {
          if (std::string why = CheckEdit(*slot.spec, slot.id, *d.edited_input); !why.empty()) {
            SetReady(slot, "not run: " + why, true);
            EmitDecision(slot, Decision::kDeny, d.by, true);
            return;
          }
          slot.input = *d.edited_input;
        }
        slot.state = SlotState::kToRun;
        slot.reason += " \xE2\x80\x94 approved by " + d.by;
        if (!logged) EmitDecision(slot, Decision::kAllow, d.by, d.edited_input.has_value());
        return;
      case ApprovalDecision::Kind::kDeny:
        slot.state = SlotState::kDenied;
        slot.reason = d.reason.empty() ? "denied by " + d.by : d.reason;
        slot.result = ContentBlock::ToolResult(slot.id, "denied: " + slot.reason, true);
        if (!logged) EmitDecision(slot, Decision::kDeny, d.by, false);
        return;
      case ApprovalDecision::Kind::kDefer:
        slot.state = SlotState::kPending;
        if (!logged) EmitDecision(slot, Decision::kAsk, d.by, false);
        return;
    }
  }

  std::string CheckEdit(const ToolSpec& spec, const std::string& id, const Json& edited) const {
    return Turn::CheckEditedArguments(cfg_.command, *cfg_.policy, spec,
                                      ToolCall{id, spec.name, edited});
  }

  // Rebuilds the batch of the open tool_use message from a checkpoint whose
  // items are all decided (CheckDecided held), then settles it as
  // OnDecisions settles live decisions.
  void RestoreBatch(const Checkpoint& cp) {
    OpenSlots();
    recent_.assign(cp.recent_calls.begin(), cp.recent_calls.end());
    for (auto& slot : slots_) {
      slot.state = SlotState::kNeedsDecision;  // no result, no decision: a denial skipped it
      auto result = std::find_if(cp.results_so_far.begin(), cp.results_so_far.end(),
                                 [&](const ContentBlock& r) { return r.tool_use_id == slot.id; });
      if (result != cp.results_so_far.end()) {
        slot.result = *result;
        slot.state = SlotState::kReady;
        continue;
      }
      auto decided =
          std::find_if(cp.decisions.begin(), cp.decisions.end(),
                       [&](const BatchDecision& d) { return d.item.tool_use_id == slot.id; });
      if (decided == cp.decisions.end()) continue;
      slot.input = decided->item.arguments;  // as the BeforeToolCall hooks left them
      slot.ask_kind = decided->item.kind;
      slot.reason = decided->item.reason;
      slot.pending_id = decided->item.id;
      slot.child_session_id = decided->item.child_session_id;
      if (slot.spec == nullptr) {
        SetReady(slot, "not run: tool '" + slot.name + "' is no longer available", true);
        continue;
      }
      // The paused turn's command still holds: a checkpoint cannot carry a
      // mutating call past plan mode.
      if (std::string refusal = Turn::CheckReadOnly(cfg_.command, *slot.spec); !refusal.empty()) {
        stop_after_ = StopAfter{StopReason::kToolRefused, refusal};
        SetReady(slot, refusal, true);
        continue;
      }
      ApplyDecision(slot, decided->decision, /*logged=*/true);
    }
    if (stop_after_) {
      for (auto& slot : slots_) {
        if (slot.state != SlotState::kReady)
          SetReady(slot, "not run: " + stop_after_->reason, true);
      }
    }
    ResolveBatch();
  }

  void ResolveBatch() {
    std::vector<std::string> denied;
    for (const auto& s : slots_) {
      if (s.state == SlotState::kDenied) denied.push_back(s.name);
    }
    if (!denied.empty()) {
      std::string tools;
      for (const auto& n : denied) tools += (tools.empty() ? "" : ", ") + n;
      for (auto& s : slots_) {
        if (s.state == SlotState::kToRun || s.state == SlotState::kPending ||
            s.state == SlotState::kNeedsDecision) {
          SetReady(s, "skipped: a sibling tool call in this turn (" + tools + ") was denied", true);
        } else if (s.state == SlotState::kDenied) {
          s.state = SlotState::kReady;
        }
      }
      PushResults();
      std::string text =
          "Stopped \xE2\x80\x94 you denied: " + tools + ". Send another message to continue.";
      AppendMessage(EngineStopMessage(text));
      FinishNow(StopReason::kDenied, "denied: " + tools, text);
      return;
    }
    std::vector<std::vector<ToolCall>> lanes;
    bool last_parallel = false;
    for (auto& s : slots_) {
      if (s.state != SlotState::kToRun) continue;
      bool parallel = s.spec != nullptr && s.spec->parallel_safe;
      if (!(parallel && last_parallel) || lanes.empty()) lanes.emplace_back();
      lanes.back().push_back(ToolCall{s.id, s.name, s.input, s.confined});
      last_parallel = parallel;
      Emit([&] { return ToolCallBeginData{.id = s.id, .tool = s.name, .input = s.input}; });
    }
    if (!sink_error_.ok()) {
      // The begin record did not reach the store: do not run anything.
      PushResults(sink_error_.ToString());
      FinishNow(StopReason::kFailed, sink_error_.ToString());
      return;
    }
    if (!lanes.empty()) {
      phase_ = Phase::kAwaitTools;
      pending_lanes_ = std::move(lanes);
      return;
    }
    AfterTools();
  }

  // Appends one user message with every slot's result, in model order. A
  // slot still without a result (a pending sibling when the turn fails) is
  // answered "not run: <why>", so the transcript stays valid.
  void PushResults(const std::string& why = "the turn stopped before this call was decided") {
    Message results;
    results.role = Role::kUser;
    for (auto& s : slots_) {
      if (s.state != SlotState::kReady) SetReady(s, "not run: " + why, true);
      results.content.push_back(s.result);
    }
    step_tool_results_ = static_cast<int>(results.content.size());
    AppendMessage(std::move(results));
  }

  void AfterTools() {
    std::vector<PendingItem> pending;
    bool any_approval = false;
    for (const auto& s : slots_) {
      if (s.state != SlotState::kPending) continue;
      pending.push_back(PendingItem{.id = s.pending_id,
                                    .kind = s.ask_kind,
                                    .tool_use_id = s.id,
                                    .tool = s.name,
                                    .arguments = s.input,
                                    .reason = s.reason,
                                    .child_session_id = s.child_session_id,
                                    .path = ""});
      any_approval = any_approval || s.ask_kind == PendingKind::kApproval ||
                     (s.ask_kind == PendingKind::kSubagent && s.child_waits_for_approval);
    }
    if (!pending.empty()) {
      Checkpoint cp;
      cp.session_id = cfg_.session_id;
      cp.turn_id = cfg_.turn_id;
      cp.command = cfg_.command;
      for (const auto& s : slots_) {
        cp.tool_use_ids.push_back(s.id);
        if (s.state == SlotState::kReady) cp.results_so_far.push_back(s.result);
      }
      cp.outstanding = pending;
      cp.counters = counters_;
      cp.recent_calls.assign(recent_.begin(), recent_.end());
      Emit([&] { return PendingData{.items = pending, .checkpoint = cp}; });
      std::string tools;
      for (const auto& p : pending) tools += (tools.empty() ? "" : ", ") + p.tool;
      std::string text = std::string("Stopped \xE2\x80\x94 awaiting durable ") +
                         (any_approval ? "approval" : "answer") + " for: " + tools + ".";
      result_.pending = pending;
      result_.checkpoint = std::move(cp);
      FinishNow(any_approval ? StopReason::kPendingApproval : StopReason::kPendingQuestion, text,
                text);
      return;
    }
    PushResults();
    if (stop_after_) {
      FinishNow(stop_after_->stop, stop_after_->reason);
      return;
    }
    StepEndInfo info;
    info.step = counters_.model_calls;
    for (const auto& s : slots_) {
      info.tool_names.push_back(s.name);
      info.any_error = info.any_error || s.result.is_error;
    }
    OwnedHistory owned;
    for (auto& h : cfg_.hooks) {
      auto hook = h;
      OwnedHistory keep;
      info.history = HistoryFor(*hook, tr_.messages(), owned, keep);
      RunHook(*hook, "after_step",
              [hook, ctx = hook_ctx_, info, keep] { hook->AfterStep(ctx, info); });
    }
    phase_ = Phase::kNeedModel;
  }

  Status CheckDecided(const Checkpoint& cp) const {
    if (tr_.empty() || tr_.back().role != Role::kAssistant || !tr_.back().HasToolUse()) {
      return InvalidArgument("resume: the session has no open tool_use message to answer");
    }
    std::vector<std::string> open;
    for (const auto& b : tr_.back().content) {
      if (b.type == BlockType::kToolUse) open.push_back(b.id);
    }
    if (open != cp.tool_use_ids) {
      return InvalidArgument("resume: the decided batch is not the open tool_use message");
    }
    // A denial closes the batch: the store keeps its undecided siblings
    // listed, and RestoreBatch answers them as skipped.
    const bool denied = std::any_of(cp.decisions.begin(), cp.decisions.end(), [](const auto& d) {
      return d.decision.kind == ApprovalDecision::Kind::kDeny;
    });
    if (!cp.outstanding.empty() && !denied) {
      return InvalidArgument("resume: " + std::to_string(cp.outstanding.size()) +
                             " item(s) of the batch are not decided yet");
    }
    return Status::Ok();
  }

  // ---- endings ------------------------------------------------------------

  // A completed answer: turn-end hooks may ask for another round.
  void Settle(const std::string& text) {
    std::string reason =
        truncated_ ? "completed (truncated by the output-token limit)" : "completed";
    TurnEndVerdict v = CloseRound(StopReason::kCompleted, reason);
    if (v.continue_turn && sink_error_.ok()) {
      for (auto& e : v.entries) AppendMessage(std::move(e));
      truncated_ = false;
      phase_ = Phase::kNeedModel;
      OpenRound();
      return;
    }
    FinishNow(StopReason::kCompleted, reason, text, /*round_closed=*/true);
  }

  turn_action::Finished FinishNow(StopReason stop, std::string reason, std::string final_text = "",
                                  bool round_closed = false) {
    if (phase_ == Phase::kFinished) return turn_action::Finished{result_};
    if (!round_closed) CloseRound(stop, reason);
    result_.stop = stop;
    result_.reason = std::move(reason);
    result_.final_text = std::move(final_text);
    result_.truncated = truncated_;
    result_.counters = counters_;
    result_.context_tokens = ContextTokens();
    result_.context_measure = measure_;
    result_.context_window = cfg_.context_window;
    DrainNotices();
    Emit([&] {
      return TurnEndData{.stop = result_.stop,
                         .reason = result_.reason,
                         .final_text = result_.final_text,
                         .truncated = result_.truncated,
                         .counters = counters_,
                         .pending = result_.pending};
    });
    result_.next_seq = seq_;
    phase_ = Phase::kFinished;
    return turn_action::Finished{result_};
  }

 public:
  // What is left of the wall-time budget (never negative); nullopt without
  // one.
  std::optional<std::chrono::milliseconds> TimeLeft() const {
    if (!cfg_.budget.max_wall_time) return std::nullopt;
    auto elapsed =
        std::chrono::duration_cast<std::chrono::milliseconds>(cfg_.clock() - start_time_);
    return std::max(std::chrono::milliseconds(0), *cfg_.budget.max_wall_time - elapsed);
  }

  // Filled by ProcessBatch/ResolveBatch for the driver.
  std::vector<ApprovalRequest> pending_requests_;
  std::vector<std::vector<ToolCall>> pending_lanes_;
  Phase phase_ = Phase::kIdle;

 private:
  // The notice that rule-allowed calls are asked (a tool cannot confine
  // them here) was emitted in this turn.
  bool confinement_noticed_ = false;
  TurnConfig cfg_;
  Transcript& tr_;
  // Shared (immutable) so a timed hook abandoned after its timeout may still
  // read the request's tools, which view it.
  std::shared_ptr<const std::vector<ToolSpec>> offered_;
  // Identity of offered_ for providers' caches (ModelRequest::tools_uid):
  // the list's own (ToolSpecList::uid), so turns and sessions that offer
  // the same shared list match, and different lists never do.
  uint64_t offered_uid_ = 0;
  TurnCounters counters_;
  uint64_t seq_;
  HookContext hook_ctx_;
  HookRunner hooks_;
  Status sink_error_;
  std::chrono::steady_clock::time_point start_time_;
  size_t protect_from_ = 0;
  // The user's latest request (never compacted away), when there is one.
  std::optional<size_t> request_index_;
  int compactions_ = 0;
  // Prompt-too-long answers since the round opened (TurnEndInfo).
  int prompt_too_long_ = 0;
  // Context measurement (ContextTokens): the characters of the system text
  // and tools, and the provider's last report (from an earlier turn until
  // this one's first).
  int64_t fixed_chars_ = 0;
  std::optional<ContextMeasure> measure_;
  // Characters appended since the token budget last charged a call (the
  // chars/4 fallback when a provider reports no usage).
  int64_t uncounted_chars_ = 0;
  // The history's characters when the request in flight was built, and its
  // tail's; the history's characters of the turn's previous answered
  // request (none before the turn's first request and after a compaction).
  // ChargedTokens reads them.
  int64_t request_chars_ = 0;
  int64_t request_tail_chars_ = 0;
  std::optional<int64_t> answered_chars_;
  // The compaction a summary side request is running for.
  std::optional<CompactionPlan> pending_plan_;
  std::string pending_trigger_ = "threshold";
  // The budget check of the coming model call was emitted, with this band.
  bool step_checked_ = false;
  std::string step_band_ = "ok";
  // A compaction by hand (TurnInput::compact).
  bool compact_only_ = false;
  bool compact_done_ = false;
  bool compacted_ = false;
  std::string last_summary_source_;
  bool round_open_ = false;
  bool truncated_ = false;
  // Tool results the batch of the last model response produced (0 until
  // the batch answered, and when the response had no batch): what
  // TurnEndInfo::tool_result_count reports.
  int step_tool_results_ = 0;
  std::vector<Slot> slots_;
  std::optional<StopAfter> stop_after_;
  std::deque<std::string> recent_;
  TurnResult result_;
  std::mutex notices_mu_;
  std::vector<NoticeData> notices_;  // Guarded by notices_mu_.
};

Turn::Turn(TurnConfig config, Transcript& transcript)
    : impl_(std::make_unique<Impl>(std::move(config), transcript)) {}
Turn::~Turn() = default;

Status Turn::Start(TurnInput input) { return impl_->Start(std::move(input)); }

TurnAction Turn::Next(std::stop_token stop) {
  switch (impl_->phase_) {
    case Phase::kAwaitDecisions:
      return turn_action::Decide{impl_->pending_requests_};
    case Phase::kAwaitTools:
      return turn_action::RunTools{impl_->pending_lanes_, impl_->TimeLeft()};
    case Phase::kIdle:
    case Phase::kNeedModel:
    case Phase::kAwaitModel:
    case Phase::kAwaitSummary:
    case Phase::kFinished:
      break;
  }
  return impl_->Next(stop);
}

void Turn::OnModelResult(Result<ModelResponse> result) { impl_->OnModelResult(std::move(result)); }
void Turn::OnDecisions(std::vector<ApprovalDecision> decisions) {
  impl_->OnDecisions(std::move(decisions));
}
void Turn::OnToolResults(std::vector<Result<ToolOutput>> outputs) {
  impl_->OnToolResults(std::move(outputs));
}
void Turn::OnToolEvent(std::string_view call_id, Event event) {
  impl_->OnToolEvent(call_id, std::move(event));
}
void Turn::PostNotice(std::string level, std::string text) {
  impl_->PostNotice(NoticeData{std::move(level), std::move(text)});
}
void Turn::EmitTextDelta(std::string_view text) { impl_->EmitTextDelta(text); }
void Turn::EmitThinkingDelta(std::string_view text) { impl_->EmitThinkingDelta(text); }
void Turn::EmitRetry(const RetryData& retry) { impl_->EmitRetry(retry); }
std::span<const ToolSpec> Turn::offered_tools() const { return impl_->offered(); }
const TurnConfig& Turn::config() const { return impl_->config(); }

}  // namespace agentloop
