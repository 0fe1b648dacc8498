#include "providers/factory.h"

#include <cstdlib>

#include "providers/http_provider.h"
#include "providers/model_limits.h"
#include "providers/scripted_provider.h"

namespace agentloop {
ProviderConfig WithEnvDefaults(ProviderConfig config, const EnvMap& env) {
  if (config.kind == "anthropic") {
    if (config.api_key.empty()) config.api_key = EnvValue(env, "ANTHROPIC_API_KEY");
    if (config.base_url.empty()) config.base_url = EnvValue(env, "ANTHROPIC_BASE_URL");
    if (config.base_url.empty()) config.base_url = "https://api.anthropic.com";
  } else if (config.kind == "openai" || config.kind == "openai-responses") {
    if (config.api_key.empty()) config.api_key = EnvValue(env, "OPENAI_API_KEY");
    if (config.base_url.empty()) config.base_url = EnvValue(env, "OPENAI_BASE_URL");
    if (config.base_url.empty()) config.base_url = "https://api.openai.com/v1";
  }
  return config;
}

Result<std::unique_ptr<ModelProvider>> MakeProvider(const ProviderConfig& config,
                                                    std::shared_ptr<HttpClient> client) {
  if (config.kind == "script") {
    if (config.script_path.empty()) return InvalidArgument("script provider needs a script path");
    AL_ASSIGN_OR_RETURN(std::unique_ptr<ScriptedProvider> p,
                        ScriptedProvider::FromFile(config.script_path));
    return std::unique_ptr<ModelProvider>(std::move(p));
  }
  WireOptions wo;
  wo.use_max_tokens_field = config.use_max_tokens_field;
  wo.images = config.images.value_or(LookupModelLimits(config.model).images);
  // OpenAI's own API keys its prompt cache by prompt_cache_key; other
  // servers speaking the format may refuse a field they do not know.
  wo.prompt_cache_key = config.base_url.find("://api.openai.com") != std::string::npos;
  std::unique_ptr<WireFormat> format;
  if (config.kind == "openai") {
    format = NewOpenAiChatFormat(wo);
  } else if (config.kind == "anthropic") {
    format = NewAnthropicFormat(wo);
  } else if (config.kind == "openai-responses") {
    format = NewOpenAiResponsesFormat(wo);
  } else {
    return InvalidArgument("unknown provider kind \"" + config.kind +
                           "\" (want openai, anthropic, openai-responses or script)");
  }
  if (config.base_url.empty()) return InvalidArgument(config.kind + " provider needs a base URL");
  HttpProviderOptions o;
  o.model = config.model;
  o.base_url = config.base_url;
  o.api_key = config.api_key;
  o.connect_timeout = config.connect_timeout;
  o.idle_timeout = config.idle_timeout;
  o.retry.max_attempts = std::max(1, config.max_retries);
  o.retry.wait = config.retry_wait;
  return std::unique_ptr<ModelProvider>(
      std::make_unique<HttpProvider>(std::move(format), std::move(o), std::move(client)));
}

}  // namespace agentloop
