#include "server/render.h"

#include <ctime>

#include "base/ids.h"
#include "base/strings.h"

namespace agentloop::server {
namespace {

constexpr size_t kArgumentsMax = 8 << 10;
constexpr size_t kDiffMax = 16 << 10;
constexpr size_t kFinalTextMax = 8 << 10;

std::string StringAt(const Json& j, const char* key) {
  auto it = j.find(key);
  return it != j.end() && it->is_string() ? it->get<std::string>() : std::string();
}

std::string Truncated(std::string_view s, size_t max) {
  if (s.size() <= max) return std::string(s);
  return std::string(TruncateUtf8(s, max)) + "\n[... cut]";
}

// "Sat, 05 Dec 2026 03:20:00 +0000" (RFC 5322 date-time; no locale).
std::string MailDate(int64_t t) {
  static constexpr const char* kDays[] = {"Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"};
  static constexpr const char* kMonths[] = {"Jan", "Feb", "Mar", "Apr", "May", "Jun",
                                            "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"};
  const std::time_t tt = static_cast<std::time_t>(t);
  std::tm tm{};
  gmtime_r(&tt, &tm);
  char buf[64];
  std::snprintf(buf, sizeof buf, "%s, %02d %s %04d %02d:%02d:%02d +0000", kDays[tm.tm_wday % 7],
                tm.tm_mday, kMonths[tm.tm_mon % 12], tm.tm_year + 1900, tm.tm_hour, tm.tm_min,
                tm.tm_sec);
  return buf;
}

// "2026-12-08 03:00 UTC".
std::string ReadableTime(int64_t t) {
  const std::time_t tt = static_cast<std::time_t>(t);
  std::tm tm{};
  gmtime_r(&tt, &tm);
  char buf[64];
  std::snprintf(buf, sizeof buf, "%04d-%02d-%02d %02d:%02d UTC", tm.tm_year + 1900, tm.tm_mon + 1,
                tm.tm_mday, tm.tm_hour, tm.tm_min);
  return buf;
}

std::string OneLine(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (char c : s) {
    const auto u = static_cast<unsigned char>(c);
    out.push_back(u < 0x20 || u == 0x7f ? ' ' : c);
  }
  return out;
}

std::string Base64Lines(std::string_view data) {
  const std::string b = Base64Encode(data);
  std::string out;
  for (size_t i = 0; i < b.size(); i += 76) out += b.substr(i, 76) + "\r\n";
  return out;
}

// Plain text with LF line ends as CRLF (inside base64 the message's line
// ends are the text's own; mail readers expect CRLF).
std::string Crlf(std::string_view s) {
  std::string out;
  for (char c : s) {
    if (c == '\n') out.push_back('\r');
    if (c != '\r') out.push_back(c);
  }
  return out;
}

std::string Heading(const NotificationView& v) {
  if (v.event == "approval.requested") {
    return "Agent " + v.agent + " asks to run the tool " + v.tool;
  }
  if (v.event == "question.asked") return "Agent " + v.agent + " asks a question";
  return "Agent " + v.agent + ": the turn ended (" + v.stop + ")";
}

std::string Footer(const NotificationView& v) {
  std::string s =
      "Each link opens a confirmation page: nothing is decided until you press its button "
      "there. The first decision counts.";
  if (v.expires_at > 0) s += " The links work until " + ReadableTime(v.expires_at) + ".";
  return s;
}

// Cuts escaped mrkdwn to `max` bytes without leaving half an entity.
std::string CutEscaped(std::string s, size_t max) {
  if (s.size() <= max) return s;
  s = std::string(TruncateUtf8(s, max - 10));
  const size_t amp = s.rfind('&');
  if (amp != std::string::npos && s.find(';', amp) == std::string::npos) s.resize(amp);
  return s + "\n[... cut]";
}

Json Section(const std::string& mrkdwn) {
  return Json{{"type", "section"},
              {"text", {{"type", "mrkdwn"}, {"text", CutEscaped(mrkdwn, 2900)}}}};
}

// Text inside ``` ... ```: escaped, and a ``` of its own cannot close the block.
std::string CodeBlock(std::string_view text) {
  std::string s = SlackEscape(text);
  for (size_t at; (at = s.find("```")) != std::string::npos;) s.replace(at, 3, "`\u200b``");
  return "```" + s + "```";
}

}  // namespace

Result<NotificationView> ViewOf(std::string_view event, std::string_view body) {
  Json b = Json::parse(body, nullptr, false);
  if (!b.is_object()) return InvalidArgument("a notification's body is not a JSON object");
  NotificationView v;
  v.event = std::string(event);
  v.agent = StringAt(b, "agent");
  v.session_id = StringAt(b, "session_id");
  v.tool = StringAt(b, "tool");
  v.reason = StringAt(b, "reason");
  if (auto a = b.find("arguments"); a != b.end() && !a->is_null()) {
    v.arguments = Truncated(a->dump(2, ' ', false, Json::error_handler_t::replace), kArgumentsMax);
    if (a->is_object()) {
      v.question = StringAt(*a, "question");
      if (auto o = a->find("options"); o != a->end() && o->is_array()) {
        for (const Json& e : *o) {
          if (e.is_string()) v.options.push_back(e.get<std::string>());
        }
      }
    }
  }
  if (auto d = b.find("diff"); d != b.end() && d->is_object()) {
    v.diff_path = StringAt(*d, "path");
    v.diff = Truncated(StringAt(*d, "diff"), kDiffMax);
    v.diff_note = StringAt(*d, "note");
  }
  if (auto l = b.find("links"); l != b.end() && l->is_object()) {
    v.approve_url = StringAt(*l, "approve");
    v.deny_url = StringAt(*l, "deny");
    v.answer_url = StringAt(*l, "answer");
    if (auto e = l->find("expires_at"); e != l->end() && e->is_number_integer()) {
      v.expires_at = e->get<int64_t>();
    }
  }
  v.stop = StringAt(b, "stop");
  v.final_text = Truncated(StringAt(b, "final_text"), kFinalTextMax);
  v.session_url = StringAt(b, "session_url");
  return v;
}

std::string EmailSubject(const NotificationView& v) {
  std::string s;
  if (v.event == "approval.requested") {
    s = "[agentloop] " + v.agent + ": approve " + v.tool + "?";
  } else if (v.event == "question.asked") {
    s = "[agentloop] " + v.agent +
        " asks: " + std::string(TruncateUtf8(v.question.empty() ? v.reason : v.question, 100));
  } else {
    s = "[agentloop] " + v.agent + ": turn " + v.stop;
  }
  return std::string(TruncateUtf8(OneLine(s), 200));
}

std::string HeaderValue(std::string_view text, size_t name_len) {
  const std::string line = OneLine(text);
  const bool ascii = std::all_of(line.begin(), line.end(),
                                 [](char c) { return static_cast<unsigned char>(c) < 0x80; });
  if (ascii) return line;
  // Encoded words of at most 45 bytes of text (60 of base64, 75 in all),
  // cut between characters, one per line after the first.
  std::string out;
  size_t i = 0;
  while (i < line.size()) {
    // A line holds its lead (the header's name, or the fold's space), the
    // 12 characters around the base64, and 4 base64 per 3 bytes.
    const size_t lead = out.empty() ? name_len : 1;
    const size_t room = lead + 12 + 8 < 78 ? (78 - lead - 12) / 4 * 3 : 6;
    size_t end = std::min(line.size(), i + std::min<size_t>(room, 45));
    while (end < line.size() && end > i && (static_cast<unsigned char>(line[end]) & 0xC0) == 0x80) {
      --end;
    }
    const std::string word =
        "=?UTF-8?B?" + Base64Encode(std::string_view(line).substr(i, end - i)) + "?=";
    if (!out.empty()) out += "\r\n ";
    out += word;
    i = end;
  }
  return out;
}

std::string BuildEmail(const NotificationView& v, const EmailEnvelope& e) {
  // --- text ---
  std::string text = Heading(v) + ".\n\n";
  std::string html =
      "<!DOCTYPE html><html><head><meta charset=\"utf-8\"></head>"
      "<body style=\"font-family:sans-serif\"><h2>" +
      HtmlEscape(Heading(v)) + "</h2>\n";
  auto field = [&](const std::string& name, const std::string& value) {
    if (value.empty()) return;
    text += name + ": " + value + "\n";
    html += "<p><b>" + HtmlEscape(name) + ":</b> " + HtmlEscape(value) + "</p>\n";
  };
  auto block = [&](const std::string& name, const std::string& value) {
    if (value.empty()) return;
    text += "\n" + name + ":\n" + value + "\n";
    html += "<p><b>" + HtmlEscape(name) +
            ":</b></p>\n<pre style=\"background:#f4f4f4;padding:8px\">" + HtmlEscape(value) +
            "</pre>\n";
  };
  auto link = [&](const std::string& name, const std::string& url) {
    if (url.empty()) return;
    text += name + ": " + url + "\n";
    html += "<p><a href=\"" + HtmlEscape(url) +
            "\" style=\"display:inline-block;padding:8px 16px;border:1px solid #888\">" +
            HtmlEscape(name) + "</a></p>\n";
  };
  field("Agent", v.agent);
  field("Session", v.session_id);
  if (v.event == "approval.requested") {
    field("Tool", v.tool);
    field("Reason", v.reason);
    block("Arguments", v.arguments);
    if (!v.diff.empty()) block("Change to " + v.diff_path, v.diff);
    if (!v.diff_note.empty()) field("Change to " + v.diff_path, v.diff_note);
    text += "\n";
    link("Approve", v.approve_url);
    link("Deny", v.deny_url);
    text += "\n" + Footer(v) + "\n";
    html += "<p style=\"color:#555\">" + HtmlEscape(Footer(v)) + "</p>\n";
  } else if (v.event == "question.asked") {
    block("Question", v.question.empty() ? v.reason : v.question);
    if (!v.options.empty()) {
      text += "\nOptions:\n";
      html += "<p><b>Options:</b></p><ul>\n";
      for (const std::string& o : v.options) {
        text += "  - " + o + "\n";
        html += "<li>" + HtmlEscape(o) + "</li>\n";
      }
      html += "</ul>\n";
    }
    text += "\n";
    link("Answer", v.answer_url);
    text += "\n" + Footer(v) + "\n";
    html += "<p style=\"color:#555\">" + HtmlEscape(Footer(v)) + "</p>\n";
  } else {
    field("Stop", v.stop);
    field("Reason", v.reason);
    block("Final text", v.final_text);
    field("Session URL", v.session_url);
  }
  html += "</body></html>\n";

  // --- the message ---
  const std::string boundary = "=_al_" + NewId("part");
  std::string to;
  for (const std::string& t : e.to) to += (to.empty() ? "" : ", ") + OneLine(t);
  std::string m;
  m += "Date: " + MailDate(e.now_s) + "\r\n";
  m += "From: " + OneLine(e.from) + "\r\n";
  m += "To: " + to + "\r\n";
  m += "Subject: " + HeaderValue(EmailSubject(v), 9) + "\r\n";
  m += "Message-ID: <" + OneLine(e.message_id) + ">\r\n";
  m += "MIME-Version: 1.0\r\n";
  m += "Auto-Submitted: auto-generated\r\n";
  m += "X-Agentloop-Event: " + OneLine(v.event) + "\r\n";
  m += "Content-Type: multipart/alternative; boundary=\"" + boundary + "\"\r\n\r\n";
  m += "--" + boundary + "\r\n";
  m += "Content-Type: text/plain; charset=utf-8\r\nContent-Transfer-Encoding: base64\r\n\r\n";
  m += Base64Lines(Crlf(text));
  m += "--" + boundary + "\r\n";
  m += "Content-Type: text/html; charset=utf-8\r\nContent-Transfer-Encoding: base64\r\n\r\n";
  m += Base64Lines(Crlf(html));
  m += "--" + boundary + "--\r\n";
  return m;
}

std::string SlackEscape(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    if (c == '&') {
      out += "&amp;";
    } else if (c == '<') {
      out += "&lt;";
    } else if (c == '>') {
      out += "&gt;";
    } else {
      out.push_back(c);
    }
  }
  return out;
}

std::string LinkTokenOf(std::string_view url) {
  constexpr std::string_view kLinks = "/v1/links/";
  const size_t at = url.rfind(kLinks);
  return at == std::string_view::npos ? std::string() : std::string(url.substr(at + kLinks.size()));
}

Json SlackMessage(const NotificationView& v, bool buttons) {
  Json blocks = Json::array();
  const std::string heading = Heading(v);
  blocks.push_back(
      {{"type", "header"},
       {"text",
        {{"type", "plain_text"}, {"text", std::string(TruncateUtf8(OneLine(heading), 140))}}}});
  std::string facts = "*Agent:* " + SlackEscape(v.agent);
  if (!v.tool.empty() && v.event != "turn.completed") facts += "\n*Tool:* " + SlackEscape(v.tool);
  if (!v.reason.empty()) facts += "\n*Reason:* " + SlackEscape(v.reason);
  if (!v.stop.empty()) facts += "\n*Stop:* " + SlackEscape(v.stop);
  blocks.push_back(Section(facts));
  // Escaped first, then cut (CutEscaped): nothing half-escaped reaches Slack.
  if (v.event == "approval.requested") {
    if (!v.arguments.empty()) blocks.push_back(Section("*Arguments:*\n" + CodeBlock(v.arguments)));
    if (!v.diff.empty()) {
      blocks.push_back(
          Section("*Change to " + SlackEscape(v.diff_path) + ":*\n" + CodeBlock(v.diff)));
    }
    if (buttons) {
      Json elements = Json::array();
      const std::string approve = LinkTokenOf(v.approve_url);
      const std::string deny = LinkTokenOf(v.deny_url);
      if (!approve.empty() && approve.size() <= 2000) {
        elements.push_back({{"type", "button"},
                            {"text", {{"type", "plain_text"}, {"text", "Approve"}}},
                            {"style", "primary"},
                            {"action_id", "approve"},
                            {"value", approve}});
      }
      if (!deny.empty() && deny.size() <= 2000) {
        elements.push_back({{"type", "button"},
                            {"text", {{"type", "plain_text"}, {"text", "Deny"}}},
                            {"style", "danger"},
                            {"action_id", "deny"},
                            {"value", deny}});
      }
      if (!elements.empty()) {
        blocks.push_back({{"type", "actions"}, {"block_id", "agentloop"}, {"elements", elements}});
      }
    }
    std::string links;
    if (!v.approve_url.empty()) links += "<" + SlackEscape(v.approve_url) + "|Approve page>";
    if (!v.deny_url.empty()) {
      links += (links.empty() ? "" : "  ·  ") + ("<" + SlackEscape(v.deny_url) + "|Deny page>");
    }
    if (!links.empty()) {
      blocks.push_back(
          {{"type", "context"},
           {"elements", Json::array({{{"type", "mrkdwn"},
                                      {"text", links + "  ·  " + SlackEscape(Footer(v))}}})}});
    }
  } else if (v.event == "question.asked") {
    blocks.push_back(
        Section("*Question:*\n" + SlackEscape(v.question.empty() ? v.reason : v.question)));
    if (!v.options.empty()) {
      std::string o = "*Options:*";
      for (const std::string& s : v.options) o += "\n• " + SlackEscape(s);
      blocks.push_back(Section(o));
    }
    if (!v.answer_url.empty()) {
      blocks.push_back(Section("<" + SlackEscape(v.answer_url) + "|Answer the question>  ·  " +
                               SlackEscape(Footer(v))));
    }
  } else if (!v.final_text.empty()) {
    blocks.push_back(Section(CodeBlock(v.final_text)));
  }
  return Json{{"text", std::string(TruncateUtf8(OneLine(heading), 2000))}, {"blocks", blocks}};
}

Json SlackReplacement(std::string_view heading, std::string_view detail) {
  Json blocks = Json::array();
  blocks.push_back(Section("*" + SlackEscape(OneLine(heading)) + "*\n" + SlackEscape(detail)));
  return Json{{"replace_original", true},
              {"text", std::string(TruncateUtf8(OneLine(heading), 2000))},
              {"blocks", blocks}};
}

}  // namespace agentloop::server
