// MCP tools as agentloop tools: the names the model sees, the spec, and the
// mapping of a CallToolResult to a ToolOutput.
#pragma once

#include <chrono>
#include <memory>
#include <string>

#include "agentloop/tool.h"

#include "mcp/client.h"

namespace agentloop::mcp {

// The name the model sees: `mcp__<server>__<tool>`, every character outside
// [A-Za-z0-9_-] replaced by '_'. A name longer than 64 characters (the
// tightest provider limit) keeps its first 53 and appends '_' and the first
// 10 hex digits of the SHA-1 of the unsanitised `mcp__<server>__<tool>`, so
// two long names that share a prefix stay apart.
std::string QualifiedToolName(const std::string& server, const std::string& tool);

struct McpToolOptions {
  std::string server;  // configured name
  // The server's annotations are believed (readOnlyHint makes the tool
  // read-only: allowed by default and offered in plan mode).
  bool trusted = false;
  std::chrono::milliseconds timeout{60000};       // without progress
  std::chrono::milliseconds max_timeout{600000};  // with progress
  size_t output_cap_chars = 30000;
};

// Maps a tools/call reply to what the model sees: text blocks as they are,
// images as ToolOutput::images (an image that fails ValidateImage, e.g. one
// larger than kMaxImageBytes or of another media type, is a line of text
// naming why), audio as a note (its bytes are not passed on), resource links
// and embedded resources as text, structuredContent (validated against
// `output_schema` when there is one) as JSON when there is no text; isError
// and a JSON-RPC error are is_error outputs. The text is capped at `cap`
// characters; images do not count against it.
ToolOutput MapCallResult(const RpcReply& reply, const Json& output_schema, size_t cap);

class McpTool final : public Tool {
 public:
  McpTool(std::shared_ptr<McpClient> client, const ServerTool& tool, McpToolOptions options);
  const ToolSpec& spec() const override { return spec_; }
  Result<ToolOutput> Run(const ToolCall& call, ToolContext& ctx) override;
  const std::string& server_tool_name() const { return tool_name_; }

 private:
  std::shared_ptr<McpClient> client_;
  std::string tool_name_;
  Json output_schema_;
  McpToolOptions options_;
  ToolSpec spec_;
};

}  // namespace agentloop::mcp
