// The console approver's prompt on a terminal: the answer is read key by
// key (the terminal out of canonical mode, without echo or signal keys), so
// Ctrl-C and Esc cancel the prompt instead of reaching the turn as SIGINT,
// and a requested stop (a SIGINT sent from elsewhere) ends the read at once.
//
// Thread-safety: one read at a time per terminal (the console approver
// serialises its prompts).
#pragma once

#include <iosfwd>
#include <stop_token>
#include <string_view>

#include "permissions/approvers.h"

namespace agentloop::cli {

// Sets the terminal `fd` to read keys, writes `prompt` to `echo`, and reads
// one line, echoing what is typed to `echo`: Enter ends it; Backspace and
// Ctrl-U edit it; Ctrl-C or a lone Esc cancel the prompt (kCancelled); the
// escape sequences of arrow and function keys are ignored; Ctrl-D on an
// empty line, end of input or `stop` give kEnd. The terminal's settings are
// restored before it returns. When `fd` is not a terminal whose settings can
// be changed, it reads bytes up to a newline the same way.
permissions::ConsoleRead ReadKeysLine(int fd, std::ostream& echo, std::string_view prompt,
                                      const std::stop_token& stop);

}  // namespace agentloop::cli
