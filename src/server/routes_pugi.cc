// POST /api/pugi/engine: the seeds' one-call engine route (server/pugi.h).
#include <set>

#include "base/strings.h"
#include "server/pugi.h"
#include "server/server_impl.h"
#include "tools/builtin.h"

namespace agentloop::server {

// The engine's read-only tools: what plan mode may offer a model.
const std::set<std::string>& ServerImpl::ReadOnlyToolNames() {
  static const std::set<std::string> kNames = [] {
    std::set<std::string> names;
    for (const auto& t : MakeBuiltinTools(BuiltinToolOptions{})) {
      if (!t->spec().mutates) names.insert(t->spec().name);
    }
    return names;
  }();
  return kNames;
}

// POST /api/pugi/engine: one model call with the agent's provider for a
// client that runs its own loop (server/pugi.h).
void ServerImpl::PugiEngine(const std::shared_ptr<Exchange>& ex, const Principal&, const Params&) {
  Result<Json> body = ParseBody(ex->request());
  if (!body.ok()) return ex->Send(Problem(400, "invalid_request", body.error().message()));
  Result<PugiCall> parsed = ParsePugiRequest(*body);
  if (!parsed.ok()) return ex->Send(Problem(400, "invalid_request", parsed.error().message()));
  const AgentSpec* agent = FindAgent(parsed->persona);
  if (agent == nullptr) {
    return ex->Send(Problem(404, "not_found", "no agent '" + parsed->persona + "'"));
  }
  // An agent that plans stays in plan mode whatever the request says.
  if (agent->options.command == CommandKind::kPlan || parsed->command == CommandKind::kPlan) {
    Status s = CheckPugiPlanTools(*parsed, ReadOnlyToolNames());
    if (!s.ok()) return ex->Send(Problem(400, "plan_mode_refused", s.message()));
  }
  SessionOptions o = agent->options;
  if (!parsed->model.empty()) o.model = parsed->model;
  struct Call {
    PugiCall call;
    std::shared_ptr<ModelProvider> provider;
    ModelRequest request;
    StreamSink sink;  // deltas are not forwarded: the answer is one JSON body
  };
  auto state = std::make_shared<Call>();
  state->call = std::move(*parsed);
  state->request.model = o.model;
  state->request.system = state->call.system;
  state->request.history = state->call.messages;
  state->request.tools = state->call.tools;
  state->request.max_output_tokens =
      state->call.max_tokens > 0 ? state->call.max_tokens : o.max_output_tokens.value_or(4096);
  auto answer = [ex, model = o.model](Result<ModelResponse> r) {
    if (!r.ok()) {
      const bool client = r.error().code() == Code::kInvalidArgument;
      return ex->Send(Problem(client ? 400 : 502, client ? "invalid_request" : "model_error",
                              RedactSecrets(r.error().message())));
    }
    ex->Send(JsonResponse(200, PugiResponse(*r, model)));
  };
  Blocking([this, o]() { return engine_.Provider(o); },
           [this, state, answer](Result<std::shared_ptr<ModelProvider>> provider) {
             if (!provider.ok()) return answer(provider.error());
             state->provider = std::move(*provider);
             if (state->provider->CompletesAsync()) {
               return state->provider->CompleteAsync(
                   state->request, state->sink, {},
                   [state, answer](Result<ModelResponse> r) { answer(std::move(r)); });
             }
             // A provider without an asynchronous path blocks: off the io thread.
             Blocking(
                 [state]() { return state->provider->Complete(state->request, state->sink, {}); },
                 answer);
           });
}

}  // namespace agentloop::server
