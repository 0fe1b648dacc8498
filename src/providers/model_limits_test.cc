#include "providers/model_limits.h"

#include <gtest/gtest.h>

namespace agentloop {
namespace {

TEST(ModelLimitsTest, OpenAiFamilies) {
  auto l = LookupModelLimits("gpt-4o");
  EXPECT_TRUE(l.known);
  EXPECT_EQ(l.context_window, 128'000);
  EXPECT_EQ(l.max_output_tokens, 16'384);
  EXPECT_EQ(LookupModelLimits("gpt-4o-mini-2024-07-18").family, "gpt-4o-mini");
  EXPECT_EQ(LookupModelLimits("gpt-4o-2024-05-13").max_output_tokens, 4'096);
  EXPECT_EQ(LookupModelLimits("gpt-4.1-mini").context_window, 1'047'576);
  EXPECT_EQ(LookupModelLimits("gpt-4.1-mini").max_output_tokens, 32'768);
  EXPECT_EQ(LookupModelLimits("gpt-5").max_output_tokens, 128'000);
  EXPECT_EQ(LookupModelLimits("gpt-5-mini").context_window, 400'000);
  EXPECT_EQ(LookupModelLimits("o3-mini").max_output_tokens, 100'000);
  EXPECT_EQ(LookupModelLimits("o1-mini").max_output_tokens, 65'536);
  EXPECT_EQ(LookupModelLimits("gpt-4").context_window, 8'192);
}

TEST(ModelLimitsTest, ClaudeFamiliesAndSpellings) {
  EXPECT_EQ(LookupModelLimits("claude-3-5-sonnet-20241022").max_output_tokens, 8'192);
  EXPECT_EQ(LookupModelLimits("claude-3.5-sonnet").family, "claude-3-5-sonnet");
  EXPECT_EQ(LookupModelLimits("claude-3-7-sonnet-latest").max_output_tokens, 64'000);
  EXPECT_EQ(LookupModelLimits("claude-sonnet-4-20250514").max_output_tokens, 64'000);
  EXPECT_EQ(LookupModelLimits("claude-opus-4-1-20250805").max_output_tokens, 32'000);
  EXPECT_EQ(LookupModelLimits("claude-opus-4-5").max_output_tokens, 64'000);
  EXPECT_EQ(LookupModelLimits("claude-sonnet-4-5").family, "claude-sonnet-4-5");
  EXPECT_EQ(LookupModelLimits("anthropic/claude-sonnet-4.5").family, "claude-sonnet-4-5");
  EXPECT_EQ(LookupModelLimits("us.anthropic.claude-3-haiku-20240307-v1:0").family,
            "claude-3-haiku");
  EXPECT_EQ(LookupModelLimits("Claude-Haiku-4-5").context_window, 200'000);
}

TEST(ModelLimitsTest, OpenModelsWithTags) {
  EXPECT_EQ(LookupModelLimits("llama3.1:8b").family, "llama3.1");
  EXPECT_EQ(LookupModelLimits("qwen2.5-coder:7b-instruct").family, "qwen2.5-coder");
  EXPECT_EQ(LookupModelLimits("meta-llama/Llama-3.3-70B-Instruct").family, "llama-3.3");
  EXPECT_EQ(LookupModelLimits("deepseek-chat").max_output_tokens, 8'192);
}

TEST(ModelLimitsTest, PrefixMatchesOnlyAtABoundary) {
  // "o1" must not claim a model whose name merely starts with the letters.
  EXPECT_FALSE(LookupModelLimits("o1x-local").known);
  EXPECT_FALSE(LookupModelLimits("gpt-4x").known);
}

TEST(ModelLimitsTest, UnknownModelGetsTheConservativeDefault) {
  auto l = LookupModelLimits("my-finetune");
  EXPECT_FALSE(l.known);
  EXPECT_EQ(l.context_window, kDefaultContextWindow);
  EXPECT_EQ(l.max_output_tokens, kDefaultMaxOutputTokens);
  std::string note = UnknownModelNotice("my-finetune", l);
  EXPECT_NE(note.find("'my-finetune'"), std::string::npos);
  EXPECT_NE(note.find("provider.context_window"), std::string::npos);
  EXPECT_NE(note.find("32768"), std::string::npos);
}

TEST(ModelLimitsTest, ConfigurationOverridesTheTable) {
  auto l = ResolveModelLimits("gpt-4o", 16'000, std::nullopt);
  EXPECT_EQ(l.context_window, 16'000);
  EXPECT_EQ(l.max_output_tokens, 16'000);  // never more than the window
  auto u = ResolveModelLimits("my-finetune", 65'536, 2'000);
  EXPECT_TRUE(u.known);
  EXPECT_EQ(u.context_window, 65'536);
  EXPECT_EQ(u.max_output_tokens, 2'000);
  auto z = ResolveModelLimits("gpt-4o", 0, -5);  // non-positive: the table's
  EXPECT_EQ(z.context_window, 128'000);
  EXPECT_EQ(z.max_output_tokens, 16'384);
}

}  // namespace
}  // namespace agentloop
