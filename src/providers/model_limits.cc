#include "providers/model_limits.h"

#include <algorithm>
#include <cctype>

namespace agentloop {
namespace {

struct Entry {
  std::string_view prefix;  // lower case, Claude versions with dashes
  int64_t window;
  int64_t max_output;
  // Every model of the family takes image input (a family whose smaller or
  // older members are text-only is listed false).
  bool images;
};

// The providers' published limits. Where a model offers a larger window
// only behind an opt-in (Claude's 1M-token beta, 128k output of 3.7 Sonnet
// with a beta header), the default is listed: the request carries no opt-in.
constexpr Entry kTable[] = {
    // OpenAI
    {"gpt-3.5-turbo", 16'385, 4'096, false},
    {"gpt-4", 8'192, 8'192, false},
    {"gpt-4-32k", 32'768, 8'192, false},
    {"gpt-4-turbo", 128'000, 4'096, true},
    {"gpt-4-1106", 128'000, 4'096, false},
    {"gpt-4-0125", 128'000, 4'096, false},
    {"gpt-4o", 128'000, 16'384, true},
    {"gpt-4o-2024-05-13", 128'000, 4'096, true},
    {"gpt-4o-mini", 128'000, 16'384, true},
    {"chatgpt-4o", 128'000, 16'384, true},
    {"gpt-4.1", 1'047'576, 32'768, true},
    {"gpt-4.5", 128'000, 16'384, true},
    {"gpt-5", 400'000, 128'000, true},
    {"gpt-5-chat", 128'000, 16'384, true},
    {"o1", 200'000, 100'000, true},
    {"o1-preview", 128'000, 32'768, false},
    {"o1-mini", 128'000, 65'536, false},
    {"o3", 200'000, 100'000, true},
    {"o3-mini", 200'000, 100'000, false},
    {"o4-mini", 200'000, 100'000, true},
    {"codex-mini", 200'000, 100'000, true},
    {"gpt-oss", 131'072, 32'768, false},
    // Anthropic
    {"claude-2", 100'000, 4'096, false},
    {"claude-3-haiku", 200'000, 4'096, true},
    {"claude-3-sonnet", 200'000, 4'096, true},
    {"claude-3-opus", 200'000, 4'096, true},
    {"claude-3-5-haiku", 200'000, 8'192, false},
    {"claude-3-5-sonnet", 200'000, 8'192, true},
    {"claude-3-7-sonnet", 200'000, 64'000, true},
    {"claude-sonnet-4", 200'000, 64'000, true},
    {"claude-sonnet-4-5", 200'000, 64'000, true},
    {"claude-opus-4", 200'000, 32'000, true},
    {"claude-opus-4-1", 200'000, 32'000, true},
    {"claude-opus-4-5", 200'000, 64'000, true},
    {"claude-haiku-4-5", 200'000, 64'000, true},
    // Open models (llama.cpp, vLLM, Ollama, hosted APIs). A local server may
    // run a model with a smaller window than it supports: configure
    // provider.context_window to the server's.
    {"deepseek-chat", 128'000, 8'192, false},
    {"deepseek-reasoner", 128'000, 32'768, false},
    {"deepseek-v3", 128'000, 8'192, false},
    {"deepseek-r1", 128'000, 32'768, false},
    {"deepseek-coder", 128'000, 8'192, false},
    {"llama3", 8'192, 4'096, false},
    {"llama-3", 8'192, 4'096, false},
    {"llama3.1", 131'072, 8'192, false},
    {"llama-3.1", 131'072, 8'192, false},
    {"llama3.2", 131'072, 8'192, false},
    {"llama-3.2", 131'072, 8'192, false},
    {"llama3.3", 131'072, 8'192, false},
    {"llama-3.3", 131'072, 8'192, false},
    {"llama-4", 131'072, 8'192, true},
    {"qwen2.5", 32'768, 8'192, false},
    {"qwen2.5-coder", 32'768, 8'192, false},
    {"qwen3", 32'768, 8'192, false},
    {"qwen3-coder", 262'144, 65'536, false},
    {"qwq", 32'768, 8'192, false},
    {"mistral", 32'768, 8'192, false},
    {"mixtral", 32'768, 8'192, false},
    {"codestral", 256'000, 8'192, false},
    {"devstral", 128'000, 8'192, false},
    {"gemma2", 8'192, 4'096, false},
    {"gemma-2", 8'192, 4'096, false},
    {"gemma3", 131'072, 8'192, false},
    {"gemma-3", 131'072, 8'192, false},
    {"phi3", 4'096, 4'096, false},
    {"phi-3", 4'096, 4'096, false},
    {"phi4", 16'384, 4'096, false},
    {"phi-4", 16'384, 4'096, false},
    {"kimi-k2", 131'072, 16'384, false},
    {"glm-4", 128'000, 16'384, false},
};

std::string Normalize(std::string_view model) {
  std::string s(model);
  std::transform(s.begin(), s.end(), s.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  // Router and cloud prefixes: "openai/gpt-4o", "accounts/x/models/y".
  if (size_t slash = s.rfind('/'); slash != std::string::npos) s.erase(0, slash + 1);
  // Bedrock and Vertex spell Claude "us.anthropic.claude-...".
  if (size_t c = s.find("claude-"); c != std::string::npos && c > 0) s.erase(0, c);
  if (s.rfind("claude-", 0) == 0) std::replace(s.begin(), s.end(), '.', '-');
  return s;
}

// A prefix matches at a boundary: the whole name, or followed by a
// separator, so "o1" does not match "o10x" and "gpt-4" does not claim
// "gpt-4o" (the longer entry wins anyway).
bool MatchesPrefix(std::string_view name, std::string_view prefix) {
  if (name.substr(0, prefix.size()) != prefix) return false;
  if (name.size() == prefix.size()) return true;
  char next = name[prefix.size()];
  return next == '-' || next == ':' || next == '@' || next == '_' || next == '.';
}

}  // namespace

ModelLimits LookupModelLimits(std::string_view model) {
  std::string name = Normalize(model);
  const Entry* best = nullptr;
  for (const Entry& e : kTable) {
    if (MatchesPrefix(name, e.prefix) && (best == nullptr || e.prefix.size() > best->prefix.size()))
      best = &e;
  }
  ModelLimits l;
  if (best == nullptr) {
    l.context_window = kDefaultContextWindow;
    l.max_output_tokens = kDefaultMaxOutputTokens;
    return l;
  }
  l.context_window = best->window;
  l.max_output_tokens = best->max_output;
  l.known = true;
  l.images = best->images;
  l.family = std::string(best->prefix);
  return l;
}

ModelLimits ResolveModelLimits(std::string_view model, std::optional<int64_t> context_window,
                               std::optional<int64_t> max_output_tokens) {
  ModelLimits l = LookupModelLimits(model);
  if (context_window && *context_window > 0) {
    l.context_window = *context_window;
    l.known = true;
  }
  if (max_output_tokens && *max_output_tokens > 0) l.max_output_tokens = *max_output_tokens;
  // An output cap larger than the window cannot be sent.
  l.max_output_tokens = std::min(l.max_output_tokens, l.context_window);
  return l;
}

std::string UnknownModelNotice(std::string_view model, const ModelLimits& limits) {
  return "model '" + std::string(model) +
         "' is not in the built-in table of context windows: assuming a " +
         std::to_string(limits.context_window) + "-token window and at most " +
         std::to_string(limits.max_output_tokens) +
         " output tokens (set provider.context_window and provider.max_output_tokens)";
}

}  // namespace agentloop
