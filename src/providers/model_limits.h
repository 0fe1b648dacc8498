// Context windows and output limits of the model families users pick.
//
// The engine sizes requests by these numbers: the output-token cap of a
// request never exceeds the model's maximum output, and the context budget
// band (compaction, the wrap-up message) is measured against the window.
// Configuration (`provider.context_window`, `provider.max_output_tokens`)
// overrides both; a model the table does not know gets kUnknownModelLimits.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace agentloop {

struct ModelLimits {
  int64_t context_window = 0;     // tokens of input plus output the model accepts
  int64_t max_output_tokens = 0;  // the largest output-token cap a request may ask for
  bool known = false;             // false: the conservative default below
  // The model takes images as input (an unknown model is assumed not to:
  // a text-only server refuses a request with an image part, so images are
  // described to it; provider.images overrides).
  bool images = false;
  std::string family;  // the table entry that matched, e.g. "gpt-4o"
};

// The conservative default for a model the table does not know: small enough
// for the usual local servers' default windows, and an output cap every
// chat API accepts.
inline constexpr int64_t kDefaultContextWindow = 32'768;
inline constexpr int64_t kDefaultMaxOutputTokens = 4'096;

// Looks `model` up: case-insensitive, after dropping a router or cloud
// prefix ("openai/", "anthropic/claude-...", Bedrock's "us.anthropic."),
// the longest matching family prefix wins ("gpt-4o-mini" before "gpt-4o",
// "claude-sonnet-4-5" before "claude-sonnet-4"); dots in Claude version
// numbers match dashes ("claude-3.5-sonnet" is "claude-3-5-sonnet").
ModelLimits LookupModelLimits(std::string_view model);

// The limits a session runs with: the table's, with each configured value
// (when set and positive) replacing the table's. A configured window makes
// the model count as known (the user chose its numbers).
ModelLimits ResolveModelLimits(std::string_view model, std::optional<int64_t> context_window,
                               std::optional<int64_t> max_output_tokens);

// The one-time note for a model the table does not know, naming the numbers
// used and the keys that set them.
std::string UnknownModelNotice(std::string_view model, const ModelLimits& limits);

}  // namespace agentloop
