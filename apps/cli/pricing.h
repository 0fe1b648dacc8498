// A small price table for well-known models, for the cost line of the text
// summary. Prices are USD per million tokens as published by the vendors
// (list prices, no discounts); unknown models have no cost.
//
// Thread-safety: pure functions over constant data.
#pragma once

#include <optional>
#include <string_view>

#include "agentloop/types.h"

namespace agentloop::cli {

struct ModelPrice {
  std::string_view model_prefix;  // matched against the model name (longest prefix wins)
  double input;                   // per million uncached input tokens
  double output;                  // per million output tokens (reasoning included)
  double cache_read;
  double cache_write;
};

// The price of `model` (case-sensitive prefix match, provider prefixes such
// as "openai/" or "anthropic/" ignored), or nullopt when unknown.
std::optional<ModelPrice> FindPrice(std::string_view model);

// Estimated cost of `usage` on `model` in USD, or nullopt when the price is
// unknown.
std::optional<double> EstimateCostUsd(std::string_view model, const Usage& usage);

}  // namespace agentloop::cli
