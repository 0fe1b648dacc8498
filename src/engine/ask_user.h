// The built-in ask_user tool: the model asks the person a question. The turn
// never runs it; it routes the call to the approver as a question (answered
// live at the console, or pending durably: stop `pending_question`).
#pragma once

#include <memory>

#include "agentloop/tool.h"

namespace agentloop {

std::shared_ptr<Tool> MakeAskUserTool();

}  // namespace agentloop
