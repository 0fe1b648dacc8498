#include "mcp/tool.h"

#include <algorithm>
#include <chrono>

#include <openssl/sha.h>

#include "base/strings.h"
#include "protocol/image.h"
#include "tools/tools.h"

namespace agentloop::mcp {
namespace {

constexpr size_t kMaxNameChars = 64;
constexpr size_t kHashChars = 10;

std::string Sha1Hex(const std::string& s) {
  unsigned char digest[SHA_DIGEST_LENGTH];
  SHA1(reinterpret_cast<const unsigned char*>(s.data()), s.size(), digest);
  return HexEncode(std::string_view(reinterpret_cast<const char*>(digest), sizeof digest));
}

std::string Describe(const Json& block) {
  const std::string type = block.value("type", std::string());
  if (type == "text") return block.value("text", std::string());
  if (type == "audio") {
    const std::string data = block.value("data", std::string());
    return "[" + type + " " + block.value("mimeType", std::string("(no type)")) + ", " +
           std::to_string(data.size() * 3 / 4) + " bytes: not shown]";
  }
  if (type == "resource_link") {
    std::string s = "[resource link: " + block.value("name", std::string()) + " <" +
                    block.value("uri", std::string()) + ">";
    if (block.contains("mimeType")) s += " " + block.value("mimeType", std::string());
    if (block.contains("description")) s += ": " + block.value("description", std::string());
    return s + "]";
  }
  if (type == "resource") {
    const Json r = block.value("resource", Json::object());
    std::string head = "[resource <" + r.value("uri", std::string()) + ">";
    if (r.contains("mimeType")) head += " " + r.value("mimeType", std::string());
    if (r.contains("text") && r["text"].is_string()) {
      return head + "]\n" + r["text"].get<std::string>();
    }
    const std::string blob = r.value("blob", std::string());
    return head + ", " + std::to_string(blob.size() * 3 / 4) + " bytes of binary data: not shown]";
  }
  return "[content of type '" + type + "': not shown]";
}

// An image block of a result as a kImage block, or the reason it is
// described instead. Line breaks and spaces in the base64 (MIME-style
// wrapping) are dropped; everything else must pass ValidateImage.
Result<ContentBlock> ImageOf(const Json& block) {
  const std::string media_type = block.value("mimeType", std::string());
  std::string data = block.value("data", std::string());
  std::erase_if(data, [](char c) { return c == '\n' || c == '\r' || c == ' ' || c == '\t'; });
  AL_RETURN_IF_ERROR(ValidateImage(media_type, data));
  return ContentBlock::Image(media_type, std::move(data));
}

}  // namespace

std::string QualifiedToolName(const std::string& server, const std::string& tool) {
  const std::string raw = "mcp__" + server + "__" + tool;
  std::string name = raw;
  for (char& c : name) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                    c == '_' || c == '-';
    if (!ok) c = '_';
  }
  if (name.size() <= kMaxNameChars) return name;
  return name.substr(0, kMaxNameChars - kHashChars - 1) + "_" + Sha1Hex(raw).substr(0, kHashChars);
}

ToolOutput MapCallResult(const RpcReply& reply, const Json& output_schema, size_t cap) {
  if (reply.error) {
    ToolOutput out = ToolOutput::Error("MCP error " + std::to_string(reply.error->code) + ": " +
                                       reply.error->message);
    out.details = {{"rpc_error", reply.error->code}};
    return out;
  }
  const Json& r = reply.result;
  ToolOutput out;
  out.is_error = r.is_object() && r.value("isError", false);
  std::string text;
  if (r.is_object() && r.contains("content") && r["content"].is_array()) {
    for (const Json& block : r["content"]) {
      if (!block.is_object()) continue;
      if (block.value("type", std::string()) == "image") {
        Result<ContentBlock> image = ImageOf(block);
        if (image.ok()) {
          out.images.push_back(std::move(*image));
          continue;
        }
        if (!text.empty()) text += "\n";
        text += DescribeImage(block.value("mimeType", std::string()),
                              block.value("data", std::string()), image.error().message());
        continue;
      }
      if (!text.empty()) text += "\n";
      text += Describe(block);
    }
  }
  out.details = Json::object();
  if (r.is_object() && r.contains("structuredContent")) {
    const Json& sc = r["structuredContent"];
    out.details["structured_content"] = sc;
    if (!out.is_error && output_schema.is_object()) {
      Status valid = ValidateAgainstSchema(sc, output_schema);
      if (!valid.ok()) {
        out.is_error = true;
        text = "the tool's structuredContent does not match its outputSchema: " + valid.message() +
               (text.empty() ? "" : "\n" + text);
      }
    }
    // The text blocks carry the same data for clients that read only them;
    // without any, the model reads the JSON.
    if (text.empty()) text = sc.dump();
  }
  if (text.empty() && out.images.empty()) {
    text = out.is_error ? "the tool failed and said nothing" : "(no output)";
  }
  tools::CapAtLine(text, cap, "\n[output truncated at " + std::to_string(cap) + " characters]");
  out.content = std::move(text);
  return out;
}

McpTool::McpTool(std::shared_ptr<McpClient> client, const ServerTool& tool, McpToolOptions options)
    : client_(std::move(client)),
      tool_name_(tool.name),
      output_schema_(tool.output_schema),
      options_(std::move(options)) {
  spec_.name = QualifiedToolName(options_.server, tool.name);
  std::string desc = tool.description.empty() ? tool.title : tool.description;
  spec_.description =
      desc.empty() ? "Tool '" + tool.name + "' of MCP server '" + options_.server + "'." : desc;
  spec_.input_schema = tool.input_schema;
  if (!spec_.input_schema.contains("type")) spec_.input_schema["type"] = "object";
  // A server's hints are believed only for a server the user trusts: an
  // untrusted tool counts as mutating (asked by default, refused in plan
  // mode).
  const bool read_only = options_.trusted && tool.annotations.value("readOnlyHint", false) == true;
  spec_.mutates = !read_only;
  spec_.parallel_safe = read_only;
}

Result<ToolOutput> McpTool::Run(const ToolCall& call, ToolContext& ctx) {
  Status health = client_->health();
  if (!health.ok()) {
    return ToolOutput::Error("MCP server '" + options_.server +
                             "' is not running: " + health.message());
  }
  bool listed = false;
  for (const ServerTool& t : client_->tools()) listed = listed || t.name == tool_name_;
  if (!listed) {
    return ToolOutput::Error("MCP server '" + options_.server + "' no longer offers the tool '" +
                             tool_name_ + "'");
  }
  CallOptions opts;
  opts.timeout = options_.timeout;
  opts.max_timeout = options_.max_timeout;
  opts.stop = ctx.stop;
  opts.progress = true;
  // The turn's wall-time budget bounds the call whatever progress the
  // server reports: at the deadline it is cancelled
  // (notifications/cancelled) like a call that timed out.
  bool budget_bound = false;
  if (ctx.deadline) {
    auto left = std::max(std::chrono::milliseconds(1),
                         std::chrono::ceil<std::chrono::milliseconds>(
                             *ctx.deadline - std::chrono::steady_clock::now()));
    const auto hard =
        opts.max_timeout.count() > 0 ? std::max(opts.max_timeout, opts.timeout) : opts.timeout;
    if (opts.timeout.count() <= 0 || left < hard) {
      budget_bound = true;
      opts.max_timeout = left;
      if (opts.timeout.count() <= 0 || opts.timeout > left) opts.timeout = left;
    }
  }
  Result<RpcReply> reply = client_->CallTool(tool_name_, call.input, opts);
  if (!reply.ok() && budget_bound && reply.error().code() == Code::kDeadlineExceeded &&
      std::chrono::steady_clock::now() >= *ctx.deadline) {
    ToolOutput out = ToolOutput::Error(
        "stopped: the turn's wall-time budget ran out while MCP server '" + options_.server +
        "' ran the tool '" + tool_name_ + "'; the call was cancelled");
    out.details = {{"server", options_.server}, {"tool", tool_name_}, {"budget_exhausted", true}};
    return out;
  }
  if (!reply.ok()) {
    // Timeouts, cancellation and a server that died are the model's to see;
    // the session goes on.
    ToolOutput out = ToolOutput::Error(reply.error().message());
    out.details = {{"server", options_.server}};
    return out;
  }
  ToolOutput out = MapCallResult(*reply, output_schema_, options_.output_cap_chars);
  out.details["server"] = options_.server;
  out.details["tool"] = tool_name_;
  return out;
}

}  // namespace agentloop::mcp
