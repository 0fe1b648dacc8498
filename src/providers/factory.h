// MakeProvider: builds a ModelProvider from configuration (the composition
// root calls this; nothing else needs to know the concrete classes).
//
// Kinds: "openai" (Chat Completions; also DeepSeek, OpenRouter, llama.cpp,
// vLLM, Ollama via base_url), "anthropic", "openai-responses", "script"
// (ScriptedProvider from script_path). Default base URLs:
// https://api.openai.com/v1 and https://api.anthropic.com.
//
// API keys never appear in logs, errors or events: errors from providers are
// redacted, and ProviderConfig has no ToString.
//
// Thread-safety: functions are thread-safe; the returned provider follows the
// ModelProvider contract.
#pragma once

#include <chrono>
#include <map>
#include <memory>
#include <optional>
#include <string>

#include "agentloop/env.h"
#include "agentloop/provider.h"

#include "providers/http_client.h"
#include "providers/retry.h"

namespace agentloop {

struct ProviderConfig {
  std::string kind;  // openai | anthropic | openai-responses | script
  std::string model, base_url, api_key, script_path;
  bool use_max_tokens_field = false;  // Chat: max_tokens instead of max_completion_tokens
  // The model takes images; unset: LookupModelLimits(model).images.
  std::optional<bool> images;
  std::chrono::milliseconds connect_timeout{10000}, idle_timeout{120000};
  // At most this many consecutive failed attempts per Complete().
  int max_retries = 6;
  // Backoff wait override (tests); empty = interruptible real wait.
  std::function<bool(std::chrono::milliseconds, const std::stop_token&)> retry_wait;
};

// Fills empty `base_url` / `api_key` of `config` from `env`
// (OPENAI_API_KEY / OPENAI_BASE_URL for openai and openai-responses,
// ANTHROPIC_API_KEY / ANTHROPIC_BASE_URL for anthropic), then the public
// endpoints.
ProviderConfig WithEnvDefaults(ProviderConfig config, const EnvMap& env);

// `client` may be null: a new HttpClient is created (share one across
// providers in a server). Errors: kInvalidArgument for an unknown kind or a
// missing model/script path; the script's load error for "script".
Result<std::unique_ptr<ModelProvider>> MakeProvider(const ProviderConfig& config,
                                                    std::shared_ptr<HttpClient> client);

}  // namespace agentloop
