#include "store/replay.h"

#include <algorithm>

#include "agentloop/event_data.h"

#include "protocol/codec.h"

namespace agentloop::store {
namespace {

std::string Seq(uint64_t seq) { return "event seq " + std::to_string(seq); }

std::string StrField(const Json& j, const char* key) {
  auto it = j.find(key);
  return it != j.end() && it->is_string() ? it->get<std::string>() : std::string();
}

Status ApplyCompaction(const StoredEvent& row, const Json& j, ReplayResult& out) {
  // A compaction event without drop_prefix only reports an attempt.
  auto drop = j.find("drop_prefix");
  if (drop == j.end()) return Status::Ok();
  if (!drop->is_number_unsigned() && !drop->is_number_integer()) {
    return DataLoss(Seq(row.seq) + " (compaction): drop_prefix is not an integer");
  }
  int64_t k = drop->get<int64_t>();
  if (k < 0 || static_cast<size_t>(k) > out.messages.size()) {
    return DataLoss(Seq(row.seq) + " (compaction): drop_prefix " + std::to_string(k) +
                    " exceeds the " + std::to_string(out.messages.size()) + " messages before it");
  }
  std::vector<Message> replacement;
  auto summary = j.find("summary");
  if (summary != j.end() && !summary->is_null()) {
    auto m = MessageFromJson(*summary);
    if (!m.ok()) return DataLoss(Seq(row.seq) + " (compaction summary): " + m.error().message());
    replacement.push_back(std::move(*m));
  }
  // The user's latest request, re-inserted after the summary.
  if (auto kept = j.find("kept"); kept != j.end() && kept->is_array()) {
    for (const Json& mj : *kept) {
      auto m = MessageFromJson(mj);
      if (!m.ok()) return DataLoss(Seq(row.seq) + " (compaction kept): " + m.error().message());
      replacement.push_back(std::move(*m));
    }
  }
  out.messages.erase(out.messages.begin(), out.messages.begin() + k);
  out.messages.insert(out.messages.begin(), std::make_move_iterator(replacement.begin()),
                      std::make_move_iterator(replacement.end()));
  return Status::Ok();
}

void ReadTurnEnd(const StoredEvent& row, const Json& j, ReplayResult& out) {
  LastTurnEnd t;
  t.turn_id = row.turn_id;
  t.seq = row.seq;
  std::string stop = StrField(j, "stop");
  auto parsed = ParseStopReason(stop);
  if (!parsed) {
    out.warnings.push_back({row.seq, "turn_end with unknown stop '" + stop + "'"});
    t.stop = StopReason::kFailed;
  } else {
    t.stop = *parsed;
  }
  t.reason = StrField(j, "reason");
  t.final_text = StrField(j, "final_text");
  auto tr = j.find("truncated");
  t.truncated = tr != j.end() && tr->is_boolean() && tr->get<bool>();
  auto counters = j.find("counters");
  if (counters != j.end() && counters->is_object()) t.counters = TurnCountersFromJson(*counters);
  out.last_turn_end = std::move(t);
}

}  // namespace

Result<ReplayResult> Replay(std::span<const StoredEvent> rows) {
  ReplayResult out;
  for (const StoredEvent& row : rows) {
    out.last_seq = std::max(out.last_seq, row.seq);
    const std::optional<EventType> kind = row.kind();
    const bool carries_history = kind == EventType::kMessage || kind == EventType::kCompaction;
    auto parsed = ParseJson(row.json);
    if (!parsed.ok() || !parsed->is_object()) {
      std::string why = parsed.ok() ? "not a JSON object" : parsed.error().message();
      if (carries_history) {
        return DataLoss(Seq(row.seq) + " (" + row.type + ") is corrupt: " + why +
                        "; the history cannot be rebuilt");
      }
      out.warnings.push_back({row.seq, Seq(row.seq) + " (" + row.type + ") is corrupt: " + why});
      continue;
    }
    const Json& j = *parsed;
    if (kind == EventType::kMessage) {
      auto mj = j.find("message");
      if (mj == j.end()) return DataLoss(Seq(row.seq) + " (message): no message field");
      auto m = MessageFromJson(*mj);
      if (!m.ok()) return DataLoss(Seq(row.seq) + " (message): " + m.error().message());
      out.messages.push_back(std::move(*m));
      out.last_message_turn_id = row.turn_id;
    } else if (kind == EventType::kCompaction) {
      AL_RETURN_IF_ERROR(ApplyCompaction(row, j, out));
      // The view changed: an earlier mark no longer describes a prefix of
      // it; the turn's estimate after the compaction does.
      if (j.contains("drop_prefix")) {
        out.context_mark.reset();
        auto after = j.find("tokens_after");
        if (after != j.end() && after->is_number_integer() && after->get<int64_t>() >= 0) {
          out.context_mark =
              SessionSnapshot::ContextMark{after->get<int64_t>(), out.messages.size()};
        }
      }
    } else if (kind == EventType::kStepEnd) {
      // The provider's count of the request's input; the step's answer is
      // appended after this event.
      auto d = StepEndData::FromJson(j);
      if (d.ok() && d->has_usage && d->usage.Total() > 0) {
        const Usage& u = d->usage;
        out.context_mark = SessionSnapshot::ContextMark{
            u.input_tokens + u.cache_read_tokens + u.cache_write_tokens, out.messages.size()};
      }
    } else if (kind == EventType::kToolCallBegin) {
      out.begun.insert(StrField(j, "id"));
    } else if (kind == EventType::kToolCallEnd) {
      out.ended.insert(StrField(j, "id"));
    } else if (kind == EventType::kTurnEnd) {
      ReadTurnEnd(row, j, out);
      out.unfinished_turn.reset();
    } else if (kind == EventType::kTurnBegin) {
      SessionSnapshot::BegunTurn begun;
      begun.turn_id = row.turn_id;
      begun.begin_seq = row.seq;
      auto counters = j.find("counters");
      if (counters != j.end() && counters->is_object()) {
        begun.counters = TurnCountersFromJson(*counters);
      }
      out.unfinished_turn = std::move(begun);
    }
    // Other types do not change what Load returns; unknown types are
    // ignored (forward compatibility).
  }
  return out;
}

namespace {

bool Covers(const Checkpoint& cp, const Message& m) {
  for (const ContentBlock& b : m.content) {
    if (b.type == BlockType::kToolUse &&
        std::find(cp.tool_use_ids.begin(), cp.tool_use_ids.end(), b.id) != cp.tool_use_ids.end()) {
      return true;
    }
  }
  return false;
}

}  // namespace

std::optional<Message> CrashRepair(const ReplayResult& replay,
                                   const std::optional<Checkpoint>& open,
                                   const std::optional<Checkpoint>& last_closed) {
  if (replay.messages.empty()) return std::nullopt;
  const Message& last = replay.messages.back();
  if (last.role != Role::kAssistant || !last.HasToolUse()) return std::nullopt;
  // A durable pause keeps this message open on purpose.
  if (open && Covers(*open, last)) return std::nullopt;
  const Checkpoint* resolved = last_closed && Covers(*last_closed, last) ? &*last_closed : nullptr;
  Message repair;
  repair.role = Role::kUser;
  repair.tag = std::string(kRecoveryTag);
  for (const ContentBlock& b : last.content) {
    if (b.type != BlockType::kToolUse) continue;
    const ContentBlock* known = nullptr;
    if (resolved != nullptr) {
      for (const ContentBlock& r : resolved->results_so_far) {
        if (r.type == BlockType::kToolResult && r.tool_use_id == b.id) known = &r;
      }
    }
    if (known != nullptr) {
      repair.content.push_back(*known);
      continue;
    }
    std::string_view text = kNotRunNotStarted;
    if (replay.begun.count(b.id) != 0) {
      text = replay.ended.count(b.id) != 0 ? kRanResultLost : kStartedNotFinished;
    }
    repair.content.push_back(ContentBlock::ToolResult(b.id, std::string(text), /*is_error=*/true));
  }
  return repair;
}

std::string MakeTitle(std::string_view text) {
  std::string out;
  size_t code_points = 0;
  bool pending_space = false;
  for (size_t i = 0; i < text.size() && code_points < 80;) {
    unsigned char c = static_cast<unsigned char>(text[i]);
    if (c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v') {
      pending_space = !out.empty();
      ++i;
      continue;
    }
    if (pending_space) {
      if (code_points + 1 >= 80) break;  // never end on a space
      out += ' ';
      ++code_points;
      pending_space = false;
    }
    size_t len = c < 0x80           ? 1
                 : (c >> 5) == 0x6  ? 2
                 : (c >> 4) == 0xe  ? 3
                 : (c >> 3) == 0x1e ? 4
                                    : 1;
    len = std::min(len, text.size() - i);
    out.append(text.substr(i, len));
    i += len;
    ++code_points;
  }
  return out;
}

}  // namespace agentloop::store
