// The drivers of a Turn.
//
// RunTurn: the blocking driver, for the CLI, tests and embedders that are
// happy to give a turn a thread. It calls the provider, asks the approver,
// runs tool lanes (calls of a parallel lane on their own threads, results in
// model order; the events calls report, ToolContext::report, reach the Turn
// on the caller's thread while they run) and returns when the turn finishes.
//
// RunTurnAsync: the same turn without a thread of its own (the server): the
// Turn is stepped from completions on a TurnExecutor, and a turn waiting on
// a model costs only its state.
//
// Both give the Turn the same answers (the same event log for the same model
// answers, tools and approver). Cancellation: `stop` is checked at every
// step and passed into the provider, the approver and the tools.
#pragma once

#include <filesystem>
#include <functional>
#include <memory>
#include <stop_token>
#include <string>

#include "agentloop/executor.h"
#include "agentloop/permission.h"
#include "agentloop/provider.h"
#include "agentloop/tool.h"
#include "agentloop/turn.h"

namespace agentloop {

struct RunnerDeps {
  ModelProvider* provider = nullptr;    // required
  const ToolRegistry* tools = nullptr;  // required
  Approver* approver = nullptr;         // null: every `ask` is denied (fail closed)
  StreamSink* stream = nullptr;         // optional extra display sink for deltas
  ToolContext tool_context;             // workspace, ledger, scrubbed env
};

// Runs `turn` (already Start()ed) to completion.
TurnResult RunTurn(Turn& turn, RunnerDeps& deps, std::stop_token stop);

// Runs `turn` (already Start()ed) to completion without blocking the caller:
// returns at once, and `done` is called exactly once with the turn's result
// (also when it is cancelled, and when a tool, the approver or the provider
// throws: those become error results as in RunTurn). `done` gets an error
// (kInternal) only when the Turn itself threw, which RunTurn would let
// propagate; the turn is then abandoned as it stands.
//
// Which thread does what (`key` names the turn's session):
//  - Every step of the Turn (Next, OnModelResult, OnDecisions,
//    OnToolResults), so every event it emits except deltas (with the event
//    sink's store writes), every approver Decide call, and `done` itself run
//    in executor.Post(key): one at a time, in order. The first step is
//    posted too, never run on the caller's thread (it may be an I/O thread).
//  - The model call: when provider->CompletesAsync(), CompleteAsync is
//    issued from a step and the answer arrives on the provider's thread (the
//    HTTP client's event thread); otherwise the blocking default
//    CompleteAsync runs as one executor.PostTool(key) call. Either way the
//    answer is fed back in a new Post.
//  - Text and thinking deltas reach the Turn (Turn::EmitTextDelta, so the
//    event sink) and deps.stream on the thread the provider streams on. No
//    step runs while a model call is outstanding (the next step is posted
//    only from the call's completion), so the Turn is never touched by two
//    threads at once.
//  - Each tool call runs in executor.PostTool(key): the calls of a parallel
//    lane together (each with its own copy of the tool context), lanes one
//    after another; the outputs are fed back, in model order, in one Post.
//    An event a call reports about itself (ToolContext::report) is handed
//    to the Turn (Turn::OnToolEvent) in a Post of its own, so it precedes
//    the Post that feeds that call's output back.
//
// REQUIRES: `turn`, `deps` (and what they point to) and `executor` stay
// valid until `done` has been called.
void RunTurnAsync(Turn& turn, RunnerDeps& deps, TurnExecutor& executor, std::string key,
                  std::stop_token stop, std::function<void(Result<TurnResult>)> done);

// Where RunToolLanes hands an event a call reports about itself
// (ToolContext::report): on the thread that called RunToolLanes.
using ToolEventDelivery = std::function<void(const ToolCall& call, Event event)>;

// Runs a batch of tool calls: lanes in order, calls within a lane
// concurrently. Unknown tools and thrown exceptions become is_error outputs.
// A lone call runs on the calling thread; the calls of a parallel lane run
// on threads of their own while the calling thread waits for them. With
// `deliver`, each call's ToolContext::report hands its events to `deliver`
// on the calling thread while the calls run: at once when reported on that
// thread, otherwise as soon as it is waiting for the lane (a lone call's
// reports from other threads: when the call returns); every report of a
// call is delivered before RunToolLanes returns, and none after. Without
// it, ToolContext::report is null.
std::vector<Result<ToolOutput>> RunToolLanes(const std::vector<std::vector<ToolCall>>& lanes,
                                             const ToolRegistry& tools, ToolContext& ctx,
                                             const ToolEventDelivery& deliver = {});

}  // namespace agentloop
