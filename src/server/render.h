// The messages of the email and Slack channels (channels.h), rendered from
// a notification's JSON body (the webhook's body, docs/server.md
// "Notifications"). Pure functions: no I/O, no clock but the one passed in.
//
// Everything in a body that a model or a tool wrote (the tool's name, its
// arguments, the reason, a diff, a question and its options, the final
// text) is untrusted: the HTML part escapes it, headers carry it only
// without line breaks (and RFC 2047-encoded when not ASCII), and Slack's
// mrkdwn gets it with &, < and > escaped (so it can neither mention nor
// link), inside Slack's length limits.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "agentloop/json.h"
#include "agentloop/status.h"

namespace agentloop::server {

// What a message shows, taken from the body.
struct NotificationView {
  std::string event;  // approval.requested | question.asked | turn.completed
  std::string agent, session_id, tool, reason;
  std::string arguments;  // pretty JSON, truncated
  std::string diff_path, diff, diff_note;
  std::string question;
  std::vector<std::string> options;
  std::string approve_url, deny_url, answer_url;
  int64_t expires_at = 0;
  std::string stop, final_text, session_url;
};

// Errors: kInvalidArgument for a body that is not a notification's JSON.
Result<NotificationView> ViewOf(std::string_view event, std::string_view body);

// --- email ------------------------------------------------------------------

struct EmailEnvelope {
  std::string from;
  std::vector<std::string> to;
  int64_t now_s = 0;       // the Date header
  std::string message_id;  // without <>, e.g. "dlv_x.email0@agentloop"
};

// The subject line naming agent and tool (plain text, not yet encoded).
std::string EmailSubject(const NotificationView& v);
// A header's value made safe: control characters (CR, LF, ...) become
// spaces; non-ASCII text becomes RFC 2047 encoded words (UTF-8, base64),
// folded so no line exceeds 78 characters. `name_len`: the header name's
// length with ": ", for the first line.
std::string HeaderValue(std::string_view text, size_t name_len);
// The whole message (CRLF line ends): Date, From, To, Subject,
// Message-ID, MIME-Version, Auto-Submitted, and a multipart/alternative
// body of a text/plain and a text/html part (UTF-8, base64).
std::string BuildEmail(const NotificationView& v, const EmailEnvelope& e);

// --- Slack --------------------------------------------------------------------

// Slack mrkdwn's escaping: &, < and > (docs.slack.dev, "Escaping text").
std::string SlackEscape(std::string_view text);
// The token of a link URL (".../v1/links/<token>"), or "".
std::string LinkTokenOf(std::string_view url);
// The Block Kit message: {"text", "blocks"} (the caller adds "channel").
// `buttons`: Approve / Deny buttons whose values are the links' tokens
// (clicks reach POST /v1/slack/interactions); otherwise only links.
Json SlackMessage(const NotificationView& v, bool buttons);
// The message that replaces one whose button was clicked:
// {"replace_original": true, "text", "blocks"} saying `heading` and
// `detail` (plain text, escaped here).
Json SlackReplacement(std::string_view heading, std::string_view detail);

}  // namespace agentloop::server
