// Types of @agentloop/client. The event interfaces follow the "Types" table
// of docs/protocol.md, the request interfaces the request bodies of
// src/server/openapi.json and ErrorCode the codes of docs/server.md; a test
// (test/drift.test.mjs) fails when they disagree. Each top-level field of an
// interface sits on its own line.

// ------------------------------------------------------------ shared shapes

export type StopReason =
  | "completed" | "budget_exhausted" | "max_turns" | "tool_refused" | "denied"
  | "pending_approval" | "pending_question" | "aborted" | "failed" | "refused";

export interface Usage {
  input_tokens: number;
  output_tokens: number;
  cache_read_tokens?: number;
  cache_write_tokens?: number;
  reasoning_tokens?: number;
}

export interface Counters {
  tool_calls?: number;
  tokens?: number;
  model_calls?: number;
  usage?: Usage;
  [key: string]: unknown;
}

export interface Budget {
  max_tool_calls: number;
  max_tokens: number;
  max_turns: number;
  max_wall_time_ms?: number;
}

export type ContentBlock =
  | { type: "text"; text: string; meta?: unknown }
  | { type: "thinking"; thinking: string; signature?: string; meta?: unknown }
  | { type: "redacted_thinking"; data: string; meta?: unknown }
  | { type: "tool_use"; id: string; name: string; input: unknown; raw_input?: string; meta?: unknown }
  | { type: "tool_result"; tool_use_id: string; content: string; is_error?: boolean; images?: ImageBlock[]; meta?: unknown }
  | ImageBlock;

export interface ImageBlock {
  type: "image";
  media_type: "image/png" | "image/jpeg" | "image/gif" | "image/webp";
  data: string;
  meta?: unknown;
}

export interface Message {
  role: "system" | "user" | "assistant" | "tool";
  content: ContentBlock[];
  tag?: string;
}

/** An item a paused turn waits on (docs/protocol.md, PendingItem). */
export interface PendingItem {
  id: string;
  kind: "approval" | "question" | "subagent";
  tool_use_id: string;
  tool: string;
  arguments: Record<string, unknown>;
  reason: string;
  child_session_id?: string;
  path?: string;
}

// ------------------------------------------------------------ events

/** Fields every event has. */
export interface EventBase {
  session_id: string;
  turn_id: string;
  /** Gap-free within a session for persisted events; 0 for deltas. */
  seq: number;
  /** Unix epoch milliseconds. */
  ts?: number;
}

export interface TurnBeginEvent extends EventBase {
  type: "turn_begin";
  input: "user" | "resume" | "retry" | "compact";
  command: string;
  budget: Budget;
  counters: Counters;
}

export interface BudgetCheckEvent extends EventBase {
  type: "budget_check";
  tool_calls: number;
  max_tool_calls: number;
  tokens: number;
  max_tokens: number;
  model_calls: number;
  max_turns: number;
  ok: boolean;
  context_tokens?: number;
  context_window?: number;
  band?: "ok" | "nudge" | "over_hard_limit";
}

export interface StepBeginEvent extends EventBase {
  type: "step_begin";
  step: number;
  max_output_tokens: number;
  messages: number;
}

export interface TextDeltaEvent extends EventBase {
  type: "text_delta";
  text: string;
}

export interface ThinkingDeltaEvent extends EventBase {
  type: "thinking_delta";
  text: string;
}

export interface RetryEvent extends EventBase {
  type: "retry";
  attempt: number;
  max_attempts: number;
  delay_ms: number;
  reason: string;
}

export interface StepEndEvent extends EventBase {
  type: "step_end";
  step: number;
  finish: "stop" | "tool_use" | "length";
  usage: Usage;
  has_usage: boolean;
  tokens: number;
}

export interface MessageEvent extends EventBase {
  type: "message";
  message: Message;
}

export interface DecisionEvent extends EventBase {
  type: "decision";
  tool_use_id: string;
  tool: string;
  decision: "allow" | "ask" | "deny";
  reason: string;
  rule: string;
  by: string;
  edited: boolean;
  pending_id?: string;
}

export interface ToolCallBeginEvent extends EventBase {
  type: "tool_call_begin";
  id: string;
  tool: string;
  input: unknown;
}

export interface ToolCallEndEvent extends EventBase {
  type: "tool_call_end";
  id: string;
  tool: string;
  is_error: boolean;
  content_bytes: number;
  summary: string;
  diff?: string;
  exit_code?: number;
  cancelled?: boolean;
}

export interface PendingEvent extends EventBase {
  type: "pending";
  items: PendingItem[];
  checkpoint: string;
}

export interface CompactionEvent extends EventBase {
  type: "compaction";
  from: number;
  to: number;
  attempt: number;
  drop_prefix: number;
  summary: Message | null;
  kept?: Message[];
  trigger?: "threshold" | "prompt_too_long" | "manual";
  summary_source?: "model" | "truncated";
  tokens_before?: number;
  tokens_after?: number;
}

export interface HookErrorEvent extends EventBase {
  type: "hook_error";
  hook: string;
  point: string;
  error: string;
}

export interface NoticeEvent extends EventBase {
  type: "notice";
  level: "info" | "warning";
  text: string;
}

export interface ContinuationEvent extends EventBase {
  type: "continuation";
  by: string;
  continue: boolean;
  reason: string;
  entries: number;
  model_calls: number;
  details: Record<string, unknown> | null;
}

export interface SettingsEvent extends EventBase {
  type: "settings";
  changes: { key: string; from: unknown; to: unknown; source: string }[];
  settings: Record<string, unknown>;
}

export interface SubagentStartedEvent extends EventBase {
  type: "subagent_started";
  tool_use_id: string;
  name: string;
  path: string;
  child_session_id: string;
  reserved: { tool_calls: number; tokens: number; wall_time_ms: number | null };
}

export interface SubagentCompletedEvent extends EventBase {
  type: "subagent_completed";
  tool_use_id: string;
  name: string;
  path: string;
  child_session_id: string;
  stop: StopReason;
  reason: string;
  counters: Counters;
}

export interface TurnEndEvent extends EventBase {
  type: "turn_end";
  stop: StopReason;
  reason: string;
  final_text: string;
  truncated: boolean;
  counters: Counters;
  pending: PendingItem[];
}

/** Every event of docs/protocol.md, discriminated on `type`. */
export type ProtocolEvent =
  | TurnBeginEvent | BudgetCheckEvent | StepBeginEvent | TextDeltaEvent | ThinkingDeltaEvent
  | RetryEvent | StepEndEvent | MessageEvent | DecisionEvent | ToolCallBeginEvent
  | ToolCallEndEvent | PendingEvent | CompactionEvent | HookErrorEvent | NoticeEvent
  | ContinuationEvent | SettingsEvent | SubagentStartedEvent | SubagentCompletedEvent
  | TurnEndEvent;

/** Stream-only frames (docs/server.md, "Event streams"): the text of the
 * step in flight after a resume, and a queued input's answer. */
export interface MessageSnapshotFrame {
  type: "message.snapshot";
  session_id: string;
  turn_id: string;
  text: string;
}
export interface QueuedFrame {
  type: "queued";
  status: "queued";
  session_id: string;
  position: number;
  events_url: string;
}

/** What a stream yields. Consumers ignore types they do not know (v1 adds
 * types and fields, never removes them). */
export type StreamEvent = ProtocolEvent | MessageSnapshotFrame | QueuedFrame;

// ------------------------------------------------------------ requests

/** @request POST /v1/sessions */
export interface CreateSessionRequest {
  agent?: string;
  title?: string;
  metadata?: Record<string, unknown>;
  workspace?: string;
}

/** @request PATCH /v1/sessions/{id} */
export interface UpdateSessionRequest {
  title?: string;
  metadata?: Record<string, unknown> | null;
}

/** @request POST /v1/sessions/{id}/turns */
export interface StartTurnRequest {
  input?: string;
  continue?: boolean;
  on_busy?: "reject" | "enqueue";
}

/** @request POST /v1/approvals/{id}/decision */
export interface DecisionRequest {
  decision: "approve" | "deny";
  edited_args?: Record<string, unknown>;
  reason?: string;
  scope?: "once" | "session";
}

/** @request POST /v1/questions/{id}/answer */
export interface AnswerRequest {
  answer: string;
}

/** @request POST /v1/sessions/{id}/compact */
export interface CompactRequest {
  focus?: string;
}

export interface ListSessionsQuery {
  agent?: string;
  status?: "idle" | "running" | "paused";
  limit?: number;
  cursor?: string;
}

// ------------------------------------------------------------ responses

export interface Page<T> {
  items: T[];
  next_cursor: string | null;
}

export interface Agent {
  name: string;
  description: string;
  provider: string;
  model: string;
  command: string;
}

export interface SessionChild {
  id: string;
  title: string;
  parent_id: string;
  status: string;
  counters: Counters;
  children: SessionChild[];
}

export interface Session {
  id: string;
  agent: string;
  title: string;
  metadata: Record<string, unknown> | null;
  status: "idle" | "running" | "paused" | "queued" | "failed";
  workspace: string;
  provider: string;
  model: string;
  command: string;
  created_at_ms: number;
  updated_at_ms: number;
  /** The seq of the session's newest stored event. */
  last_seq: number;
  /** Empty for a root session. */
  parent_id: string;
  events_url: string;
  /** GET /v1/sessions/{id} only: */
  pending?: ApprovalItem[];
  settings?: Record<string, unknown>;
  last_turn?: { id: string; stop: StopReason; reason: string; counters: Counters } | null;
  running_turn?: string | null;
  children?: SessionChild[];
}

export interface TurnResult {
  stop: StopReason;
  reason: string;
  final_text: string;
  truncated: boolean;
  counters: Counters;
  pending: string[];
}

export interface TurnAccepted {
  id: string;
  session_id: string;
  status: "running";
  events_url: string;
  wait_url: string;
}

export interface TurnQueued {
  status: "queued";
  session_id: string;
  position: number;
  events_url: string;
}

export interface Turn {
  id: string;
  session_id: string;
  status: "running" | "done";
  result?: TurnResult | { error: string };
}

/** A pending item as the approval and question routes show it. */
export interface ApprovalItem extends PendingItem {
  type: "approval" | "question" | "subagent";
  state: "pending" | "resolved" | "cancelled";
  session_id: string;
  turn_id: string;
  checkpoint_id: string;
  created_at_ms: number;
  root_session_id?: string;
  decision_url?: string;
  answer_url?: string;
  decision?: string;
  decided_by?: string;
}

export interface ApprovalDiff {
  path: string;
  created: boolean;
  diff: string;
  note?: string;
}

/** What every decision answer carries: the sentence the CLI prints for the
 * outcome, and who decided first when someone did. */
interface DecisionCommon {
  session_id: string;
  detail: string;
  decided_by?: string;
  decision?: "approve" | "deny" | "answer";
}
export type DecisionResult =
  | (DecisionCommon & { status: "recorded"; outstanding: number; pending_url: string })
  | (DecisionCommon & {
      status: "resumed"; turn_id: string; events_url: string; wait_url: string;
    })
  | (DecisionCommon & { status: "already_resolved"; already_resolved: true; turn_id: string })
  | (DecisionCommon & { status: "cancelled"; already_resolved: true });

export interface StoredEvents {
  items: ProtocolEvent[];
  next_after: number | null;
}

export interface McpState {
  running: boolean;
  servers: {
    name: string;
    transport: string;
    state: string;
    error?: string;
    protocol_version?: string;
    server?: unknown;
    tools: unknown[];
  }[];
}

// ------------------------------------------------------------ errors

/** The problem codes of docs/server.md, "Errors". */
export type ErrorCode =
  | "not_found" | "invalid_request" | "invalid_cursor" | "malformed_request"
  | "unauthorized" | "forbidden" | "origin_not_allowed" | "session_busy" | "lease_lost"
  | "session_paused" | "nothing_to_continue" | "turn_not_running"
  | "approval_already_resolved" | "invalid_edited_args" | "unsupported_scope" | "wrong_kind"
  | "method_not_allowed" | "idempotency_key_reused" | "idempotency_in_flight"
  | "body_too_large" | "headers_too_large" | "shutting_down" | "unavailable" | "internal"
  | "misdirected_request" | "queue_full";

export interface Problem {
  type: string;
  title: string;
  status: number;
  detail: string;
  code: ErrorCode | (string & {});
  request_id?: string;
}

export class AgentloopError extends Error {}
export class APIError extends AgentloopError {
  readonly status: number;
  /** The problem's `code`; null when the answer was not problem JSON. */
  readonly code: ErrorCode | (string & {}) | null;
  readonly problem: Problem | null;
  readonly headers: Headers | null;
  readonly requestId: string | null;
}
export class BadRequestError extends APIError {}
export class AuthenticationError extends APIError {}
export class PermissionDeniedError extends APIError {}
export class NotFoundError extends APIError {}
export class ConflictError extends APIError {}
export class GoneError extends APIError {}
export class UnprocessableEntityError extends APIError {}
export class RateLimitError extends APIError {}
export class InternalServerError extends APIError {}
export class APIConnectionError extends AgentloopError {}
export class APITimeoutError extends APIConnectionError {}
export class APIUserAbortError extends AgentloopError {}
export class StreamResumeError extends AgentloopError {}

export function makeAPIError(status: number, problem: Problem | null, headers: Headers | null): APIError;
export function retryAfterMs(headers: Headers | Record<string, string> | null, now?: number): number | null;
export function isRetryable(status: number, code: string | null, headers: Headers | Record<string, string> | null): boolean;
export function backoffMs(attempt: number, baseMs: number, maxMs: number, random?: () => number): number;

// ------------------------------------------------------------ client

export interface StreamOptions {
  /** Reconnects in a row without a new event before giving up (5). */
  maxReconnects?: number;
  /** Backoff between reconnects: min(base * 2^n, max) less jitter (500, 5000 ms). */
  baseDelayMs?: number;
  maxDelayMs?: number;
  /** A stream silent this long is taken as dropped (60000 ms; the server
   * writes a heartbeat after 15 s of silence). */
  idleTimeoutMs?: number;
}

export interface ClientOptions {
  /** Default: AGENTLOOP_URL, else http://127.0.0.1:7878. */
  baseUrl?: string;
  /** Bearer token; default AGENTLOOP_TOKEN; null sends none. */
  token?: string | null;
  /** Retries of one request (2). */
  maxRetries?: number;
  /** Per attempt, until a stream's headers (600000 ms). */
  timeoutMs?: number;
  retryBaseMs?: number;
  retryMaxMs?: number;
  /** A Retry-After longer than this is not waited for: the error is thrown (60000 ms). */
  maxRetryAfterMs?: number;
  stream?: StreamOptions;
  headers?: Record<string, string>;
  fetch?: typeof fetch;
  /** How the client waits between attempts (tests record the waits). */
  sleep?: (ms: number, signal?: AbortSignal) => Promise<void>;
}

export interface RequestOptions {
  signal?: AbortSignal;
  timeoutMs?: number;
  maxRetries?: number;
  /** For a POST: the key of this logical request (default: a new one, kept
   * across its retries). */
  idempotencyKey?: string;
  headers?: Record<string, string>;
}

export interface StreamTurnOptions {
  signal?: AbortSignal;
  /** Go on through approval and question pauses to the final turn_end (true). */
  followPauses?: boolean;
  idempotencyKey?: string;
}

export declare const ROUTES: Readonly<Record<string, readonly [string, string]>>;
export declare const PAUSED_STOPS: readonly StopReason[];

export interface SSEFrame {
  event: string;
  data: string;
  id: string | null;
  retry: number | null;
}
export class SSEParser {
  feed(text: string): SSEFrame[];
}

export class EventStream<E = StreamEvent> implements AsyncIterable<E> {
  /** Last seq seen per session. */
  readonly cursors: Map<string, number>;
  /** Opens after the first: after a drop, an error, or a turn's pause. */
  readonly reconnects: number;
  lastSeq(sessionId: string): number;
  close(): void;
  [Symbol.asyncIterator](): AsyncIterator<E>;
}

export class TurnStream implements AsyncIterable<StreamEvent> {
  readonly sessionId: string;
  /** Known once the turn began (or its 202 said). */
  readonly turnId: string | null;
  /** The last turn_end seen. */
  readonly result: TurnEndEvent | null;
  /** Set when the input was queued behind a running turn. */
  readonly queued: QueuedFrame | null;
  readonly stream: EventStream;
  close(): void;
  [Symbol.asyncIterator](): AsyncIterator<StreamEvent>;
}

export class AgentloopClient {
  constructor(options?: ClientOptions);
  readonly baseUrl: string;
  readonly token: string | null;

  request<T = unknown>(method: string, path: string,
                       options?: RequestOptions & { body?: unknown; query?: Record<string, unknown> }): Promise<T>;

  health(o?: RequestOptions): Promise<{ status: string }>;
  ready(o?: RequestOptions): Promise<unknown>;
  openapi(o?: RequestOptions): Promise<Record<string, unknown>>;
  metrics(o?: RequestOptions): Promise<string>;

  listAgents(o?: RequestOptions): Promise<{ items: Agent[] }>;
  getAgent(name: string, o?: RequestOptions): Promise<Agent>;

  createSession(body?: CreateSessionRequest, o?: RequestOptions): Promise<Session>;
  listSessions(query?: ListSessionsQuery, o?: RequestOptions): Promise<Page<Session>>;
  iterSessions(query?: ListSessionsQuery, o?: RequestOptions): AsyncIterable<Session>;
  getSession(id: string, o?: RequestOptions): Promise<Session>;
  updateSession(id: string, body: UpdateSessionRequest, o?: RequestOptions): Promise<Session>;
  deleteSession(id: string, o?: RequestOptions): Promise<null>;
  listMessages(id: string, query?: { limit?: number; cursor?: string }, o?: RequestOptions): Promise<Page<Message>>;
  listPending(id: string, o?: RequestOptions): Promise<{ items: ApprovalItem[] }>;
  getMcp(id: string, o?: RequestOptions): Promise<McpState>;
  compact(id: string, body?: CompactRequest, o?: RequestOptions): Promise<Record<string, unknown>>;

  startTurn(id: string, body: StartTurnRequest | string, o?: RequestOptions): Promise<TurnAccepted | TurnQueued>;
  getTurn(id: string, turn: string, o?: RequestOptions): Promise<Turn>;
  waitTurn(id: string, turn: string, query?: { timeout_s?: number }, o?: RequestOptions): Promise<Turn>;
  waitForTurn(id: string, turn: string, o?: RequestOptions & { pollTimeoutS?: number }): Promise<Turn>;
  cancelTurn(id: string, turn: string, o?: RequestOptions): Promise<unknown>;
  streamTurn(id: string, body: StartTurnRequest | string, o?: StreamTurnOptions): TurnStream;

  listEvents(id: string, query?: { after?: number; limit?: number }, o?: RequestOptions): Promise<StoredEvents>;
  streamEvents(id: string, o?: { after?: number; signal?: AbortSignal;
                                 stopAfter?: (e: StreamEvent) => boolean }): EventStream;
  streamSessions(ids: string[], o?: { after?: Record<string, number>; signal?: AbortSignal;
                                      stopAfter?: (e: StreamEvent) => boolean }): EventStream;

  listApprovals(o?: RequestOptions): Promise<{ items: ApprovalItem[] }>;
  getApproval(id: string, o?: RequestOptions): Promise<ApprovalItem>;
  getApprovalDiff(id: string, o?: RequestOptions): Promise<ApprovalDiff>;
  decideApproval(id: string, body: DecisionRequest, o?: RequestOptions): Promise<DecisionResult>;
  approve(id: string, extra?: Omit<DecisionRequest, "decision">, o?: RequestOptions): Promise<DecisionResult>;
  deny(id: string, reason?: string, o?: RequestOptions): Promise<DecisionResult>;
  listQuestions(o?: RequestOptions): Promise<{ items: ApprovalItem[] }>;
  getQuestion(id: string, o?: RequestOptions): Promise<ApprovalItem>;
  answerQuestion(id: string, answer: string, o?: RequestOptions): Promise<DecisionResult>;
}
