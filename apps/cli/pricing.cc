#include "pricing.h"

#include <array>

namespace agentloop::cli {
namespace {

// Keep sorted by family; longer prefixes must be listed (the longest match
// wins, so "gpt-4o-mini" beats "gpt-4o").
constexpr std::array kPrices = {
    ModelPrice{"gpt-4o", 2.50, 10.00, 1.25, 2.50},
    ModelPrice{"gpt-4o-mini", 0.15, 0.60, 0.075, 0.15},
    ModelPrice{"gpt-4.1", 2.00, 8.00, 0.50, 2.00},
    ModelPrice{"gpt-4.1-mini", 0.40, 1.60, 0.10, 0.40},
    ModelPrice{"gpt-4.1-nano", 0.10, 0.40, 0.025, 0.10},
    ModelPrice{"gpt-5", 1.25, 10.00, 0.125, 1.25},
    ModelPrice{"gpt-5-mini", 0.25, 2.00, 0.025, 0.25},
    ModelPrice{"gpt-5-nano", 0.05, 0.40, 0.005, 0.05},
    ModelPrice{"o3", 2.00, 8.00, 0.50, 2.00},
    ModelPrice{"o4-mini", 1.10, 4.40, 0.275, 1.10},
    ModelPrice{"claude-opus-4", 15.00, 75.00, 1.50, 18.75},
    ModelPrice{"claude-sonnet-4", 3.00, 15.00, 0.30, 3.75},
    ModelPrice{"claude-3-7-sonnet", 3.00, 15.00, 0.30, 3.75},
    ModelPrice{"claude-3-5-sonnet", 3.00, 15.00, 0.30, 3.75},
    ModelPrice{"claude-haiku-4", 1.00, 5.00, 0.10, 1.25},
    ModelPrice{"claude-3-5-haiku", 0.80, 4.00, 0.08, 1.00},
    ModelPrice{"deepseek-chat", 0.27, 1.10, 0.07, 0.27},
};

}  // namespace

std::optional<ModelPrice> FindPrice(std::string_view model) {
  size_t slash = model.rfind('/');
  if (slash != std::string_view::npos) model = model.substr(slash + 1);
  const ModelPrice* best = nullptr;
  for (const ModelPrice& p : kPrices) {
    if (model.substr(0, p.model_prefix.size()) == p.model_prefix &&
        (best == nullptr || p.model_prefix.size() > best->model_prefix.size())) {
      best = &p;
    }
  }
  if (best == nullptr) return std::nullopt;
  return *best;
}

std::optional<double> EstimateCostUsd(std::string_view model, const Usage& usage) {
  std::optional<ModelPrice> p = FindPrice(model);
  if (!p) return std::nullopt;
  double m = 1e-6;
  return (static_cast<double>(usage.input_tokens) * p->input +
          static_cast<double>(usage.output_tokens) * p->output +
          static_cast<double>(usage.cache_read_tokens) * p->cache_read +
          static_cast<double>(usage.cache_write_tokens) * p->cache_write) *
         m;
}

}  // namespace agentloop::cli
