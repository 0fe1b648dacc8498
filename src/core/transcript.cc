#include "agentloop/transcript.h"

#include "base/ids.h"

namespace agentloop {

Transcript::Transcript() : next_uid_(RandomU64() | 1) {}

Transcript::Transcript(std::vector<Message> messages) : Transcript() {
  // Head room so the first appends after loading a long session do not move
  // the whole history; a few slots for a short one (a server holds many
  // sessions open at once).
  messages_.reserve(messages.size() + messages.size() / 2 + 8);
  for (auto& m : messages) Append(std::move(m));
}

namespace {

// What an image counts for in the character estimate: four characters a
// token, and about 1,600 tokens for an image near the largest size the
// providers process without scaling it down (Anthropic: width * height /
// 750 tokens for 1.15 megapixels). Its base64 length would overstate it a
// hundredfold.
constexpr int64_t kImageChars = 4 * 1600;

}  // namespace

int64_t Transcript::MessageChars(const Message& m) {
  int64_t n = static_cast<int64_t>(RoleName(m.role).size()) + 2;
  for (const auto& b : m.content) {
    if (b.type == BlockType::kImage) {
      n += kImageChars;
      continue;
    }
    n += kImageChars * static_cast<int64_t>(b.images.size());
    n += static_cast<int64_t>(b.text.size() + b.data.size() + b.name.size() + b.raw_input.size());
    if (b.type == BlockType::kToolUse && !b.input.is_null()) {
      // Arguments are small next to results; a dump keeps the estimate honest.
      n += static_cast<int64_t>(b.input.dump().size());
    }
  }
  return n;
}

const Message& Transcript::Append(Message message) {
  message.uid = next_uid_++;
  chars_ += MessageChars(message);
  messages_.push_back(std::move(message));
  return messages_.back();
}

void Transcript::ReplacePrefix(size_t count, std::vector<Message> replacement) {
  for (size_t i = 0; i < count; ++i) chars_ -= MessageChars(messages_[i]);
  messages_.erase(messages_.begin(), messages_.begin() + static_cast<std::ptrdiff_t>(count));
  for (auto& m : replacement) {
    m.uid = next_uid_++;
    chars_ += MessageChars(m);
  }
  messages_.insert(messages_.begin(), std::make_move_iterator(replacement.begin()),
                   std::make_move_iterator(replacement.end()));
}

void Transcript::PopBack() {
  chars_ -= MessageChars(messages_.back());
  messages_.pop_back();
}

}  // namespace agentloop
