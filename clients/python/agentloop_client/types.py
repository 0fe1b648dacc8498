"""Types of the requests, answers and events of the agentloop HTTP API.

The event TypedDicts follow the "Types" table of docs/protocol.md and the
request TypedDicts the request bodies of src/server/openapi.json; a test
(tests/test_drift.py) fails when they disagree. `Event` is the union,
discriminated on `type`; consumers ignore types and fields they do not know.
"""

from __future__ import annotations

import sys
from typing import Any, Dict, List, Optional, Union

if sys.version_info >= (3, 8):
    from typing import Literal, TypedDict
else:  # pragma: no cover
    raise ImportError("agentloop_client needs Python 3.8 or later")

StopReason = Literal["completed", "budget_exhausted", "max_turns", "tool_refused", "denied",
                     "pending_approval", "pending_question", "aborted", "failed", "refused"]

ErrorCode = Literal[
    "not_found", "invalid_request", "invalid_cursor", "malformed_request", "unauthorized",
    "forbidden", "origin_not_allowed", "session_busy", "lease_lost", "session_paused",
    "nothing_to_continue", "turn_not_running", "approval_already_resolved", "invalid_edited_args",
    "unsupported_scope", "wrong_kind", "method_not_allowed", "idempotency_key_reused",
    "idempotency_in_flight", "body_too_large", "headers_too_large", "shutting_down", "unavailable",
    "internal", "misdirected_request", "queue_full"]


class PendingItem(TypedDict, total=False):
    id: str
    kind: Literal["approval", "question", "subagent"]
    tool_use_id: str
    tool: str
    arguments: Dict[str, Any]
    reason: str
    child_session_id: str
    path: str


# ------------------------------------------------------------------ events


class _EventCommon(TypedDict):
    session_id: str
    turn_id: str
    seq: int


class EventBase(_EventCommon, total=False):
    ts: int


class TurnBeginEvent(EventBase):
    type: Literal["turn_begin"]
    input: Literal["user", "resume", "retry", "compact"]
    command: str
    budget: Dict[str, Any]
    counters: Dict[str, Any]


class _BudgetCheck(EventBase):
    type: Literal["budget_check"]
    tool_calls: int
    max_tool_calls: int
    tokens: int
    max_tokens: int
    model_calls: int
    max_turns: int
    ok: bool


class BudgetCheckEvent(_BudgetCheck, total=False):
    context_tokens: int
    context_window: int
    band: Literal["ok", "nudge", "over_hard_limit"]


class StepBeginEvent(EventBase):
    type: Literal["step_begin"]
    step: int
    max_output_tokens: int
    messages: int


class TextDeltaEvent(EventBase):
    type: Literal["text_delta"]
    text: str


class ThinkingDeltaEvent(EventBase):
    type: Literal["thinking_delta"]
    text: str


class RetryEvent(EventBase):
    type: Literal["retry"]
    attempt: int
    max_attempts: int
    delay_ms: int
    reason: str


class StepEndEvent(EventBase):
    type: Literal["step_end"]
    step: int
    finish: Literal["stop", "tool_use", "length"]
    usage: Dict[str, int]
    has_usage: bool
    tokens: int


class MessageEvent(EventBase):
    type: Literal["message"]
    message: Dict[str, Any]


class _Decision(EventBase):
    type: Literal["decision"]
    tool_use_id: str
    tool: str
    decision: Literal["allow", "ask", "deny"]
    reason: str
    rule: str
    by: str
    edited: bool


class DecisionEvent(_Decision, total=False):
    pending_id: str


class ToolCallBeginEvent(EventBase):
    type: Literal["tool_call_begin"]
    id: str
    tool: str
    input: Any


class _ToolCallEnd(EventBase):
    type: Literal["tool_call_end"]
    id: str
    tool: str
    is_error: bool
    content_bytes: int
    summary: str


class ToolCallEndEvent(_ToolCallEnd, total=False):
    diff: str
    exit_code: int
    cancelled: bool


class PendingEvent(EventBase):
    type: Literal["pending"]
    items: List[PendingItem]
    checkpoint: str


class _Compaction(EventBase):
    type: Literal["compaction"]
    to: int
    attempt: int
    drop_prefix: int
    summary: Optional[Dict[str, Any]]


# `from` is a Python keyword: the field is declared through the functional form.
_CompactionFrom = TypedDict("_CompactionFrom", {"from": int})


class _CompactionAll(_Compaction, _CompactionFrom):
    pass


class CompactionEvent(_CompactionAll, total=False):
    kept: List[Dict[str, Any]]
    trigger: Literal["threshold", "prompt_too_long", "manual"]
    summary_source: Literal["model", "truncated"]
    tokens_before: int
    tokens_after: int


class HookErrorEvent(EventBase):
    type: Literal["hook_error"]
    hook: str
    point: str
    error: str


class NoticeEvent(EventBase):
    type: Literal["notice"]
    level: Literal["info", "warning"]
    text: str


_ContinuationContinue = TypedDict("_ContinuationContinue", {"continue": bool})


class ContinuationEvent(EventBase, _ContinuationContinue):
    type: Literal["continuation"]
    by: str
    reason: str
    entries: int
    model_calls: int
    details: Optional[Dict[str, Any]]


class SettingsEvent(EventBase):
    type: Literal["settings"]
    changes: List[Dict[str, Any]]
    settings: Dict[str, Any]


class SubagentStartedEvent(EventBase):
    type: Literal["subagent_started"]
    tool_use_id: str
    name: str
    path: str
    child_session_id: str
    reserved: Dict[str, Any]


class SubagentCompletedEvent(EventBase):
    type: Literal["subagent_completed"]
    tool_use_id: str
    name: str
    path: str
    child_session_id: str
    stop: StopReason
    reason: str
    counters: Dict[str, Any]


class TurnEndEvent(EventBase):
    type: Literal["turn_end"]
    stop: StopReason
    reason: str
    final_text: str
    truncated: bool
    counters: Dict[str, Any]
    pending: List[PendingItem]


ProtocolEvent = Union[
    TurnBeginEvent, BudgetCheckEvent, StepBeginEvent, TextDeltaEvent, ThinkingDeltaEvent,
    RetryEvent, StepEndEvent, MessageEvent, DecisionEvent, ToolCallBeginEvent, ToolCallEndEvent,
    PendingEvent, CompactionEvent, HookErrorEvent, NoticeEvent, ContinuationEvent, SettingsEvent,
    SubagentStartedEvent, SubagentCompletedEvent, TurnEndEvent]

EVENT_TYPES = {
    "turn_begin": TurnBeginEvent, "budget_check": BudgetCheckEvent, "step_begin": StepBeginEvent,
    "text_delta": TextDeltaEvent, "thinking_delta": ThinkingDeltaEvent, "retry": RetryEvent,
    "step_end": StepEndEvent, "message": MessageEvent, "decision": DecisionEvent,
    "tool_call_begin": ToolCallBeginEvent, "tool_call_end": ToolCallEndEvent,
    "pending": PendingEvent, "compaction": CompactionEvent, "hook_error": HookErrorEvent,
    "notice": NoticeEvent, "continuation": ContinuationEvent, "settings": SettingsEvent,
    "subagent_started": SubagentStartedEvent, "subagent_completed": SubagentCompletedEvent,
    "turn_end": TurnEndEvent,
}


class MessageSnapshotFrame(TypedDict):
    """After a resume: the text of the step in flight (stands in for the
    deltas sent before)."""
    type: Literal["message.snapshot"]
    session_id: str
    turn_id: str
    text: str


class QueuedFrame(TypedDict):
    type: Literal["queued"]
    status: Literal["queued"]
    session_id: str
    position: int
    events_url: str


Event = Union[ProtocolEvent, MessageSnapshotFrame, QueuedFrame]

# ------------------------------------------------------------------ requests
# REQUESTS maps each TypedDict to the route whose JSON body it is.


class CreateSessionRequest(TypedDict, total=False):
    agent: str
    title: str
    metadata: Dict[str, Any]
    workspace: str


class UpdateSessionRequest(TypedDict, total=False):
    title: str
    metadata: Optional[Dict[str, Any]]


StartTurnRequest = TypedDict("StartTurnRequest", {
    "input": str, "continue": bool, "on_busy": Literal["reject", "enqueue"]}, total=False)


class _DecisionRequired(TypedDict):
    decision: Literal["approve", "deny"]


class DecisionRequest(_DecisionRequired, total=False):
    edited_args: Dict[str, Any]
    reason: str
    scope: Literal["once", "session"]


class AnswerRequest(TypedDict):
    answer: str


class CompactRequest(TypedDict, total=False):
    focus: str


REQUESTS = {
    ("POST", "/v1/sessions"): CreateSessionRequest,
    ("PATCH", "/v1/sessions/{id}"): UpdateSessionRequest,
    ("POST", "/v1/sessions/{id}/turns"): StartTurnRequest,
    ("POST", "/v1/approvals/{id}/decision"): DecisionRequest,
    ("POST", "/v1/questions/{id}/answer"): AnswerRequest,
    ("POST", "/v1/sessions/{id}/compact"): CompactRequest,
}

# ------------------------------------------------------------------ answers


class Problem(TypedDict, total=False):
    type: str
    title: str
    status: int
    detail: str
    code: str
    request_id: str


class TurnResult(TypedDict):
    stop: StopReason
    reason: str
    final_text: str
    truncated: bool
    counters: Dict[str, Any]
    pending: List[str]


class TurnAccepted(TypedDict):
    id: str
    session_id: str
    status: Literal["running"]
    events_url: str
    wait_url: str


class Turn(TypedDict, total=False):
    id: str
    session_id: str
    status: Literal["running", "done"]
    result: TurnResult


class ApprovalDiff(TypedDict, total=False):
    path: str
    created: bool
    diff: str
    note: str


class DecisionResult(TypedDict, total=False):
    status: Literal["recorded", "resumed", "already_resolved", "cancelled"]
    detail: str  # the sentence the CLI prints for the outcome
    decided_by: str  # who decided first, when someone did
    decision: Literal["approve", "deny", "answer"]
    already_resolved: bool
    pending_url: str
    outstanding: int
    session_id: str
    turn_id: str
    events_url: str
    wait_url: str


class Agent(TypedDict):
    name: str
    description: str
    provider: str
    model: str
    command: str


class _SessionRequired(TypedDict):
    id: str
    agent: str
    title: str
    metadata: Optional[Dict[str, Any]]
    status: Literal["idle", "running", "paused", "queued", "failed"]
    workspace: str
    provider: str
    model: str
    command: str
    created_at_ms: int
    updated_at_ms: int
    last_seq: int  # the seq of the session's newest stored event
    parent_id: str  # empty for a root session
    events_url: str


class Session(_SessionRequired, total=False):
    # GET /v1/sessions/{id} only:
    pending: List["ApprovalItem"]
    settings: Dict[str, Any]
    last_turn: Optional[Dict[str, Any]]  # {id, stop, reason, counters}
    running_turn: Optional[str]
    children: List[Dict[str, Any]]


class ApprovalItem(PendingItem, total=False):
    """A pending item as the approval and question routes show it."""
    type: Literal["approval", "question", "subagent"]
    state: Literal["pending", "resolved", "cancelled"]
    session_id: str
    turn_id: str
    checkpoint_id: str
    created_at_ms: int
    root_session_id: str
    decision_url: str
    answer_url: str
    decision: str
    decided_by: str
