// @agentloop/client: a client of the agentloop HTTP API (docs/server.md).
// Plain ESM JavaScript with no dependencies: Node 18+ global fetch, web
// streams, AbortController and crypto.randomUUID. Types are in index.d.ts.

/** Routes the client calls: method name -> [HTTP method, path template].
 * A test holds every entry equal to a route of src/server/openapi.json. */
export const ROUTES = Object.freeze({
  health: ["GET", "/v1/health"],
  ready: ["GET", "/v1/ready"],
  openapi: ["GET", "/v1/openapi.json"],
  metrics: ["GET", "/v1/metrics"],
  listAgents: ["GET", "/v1/agents"],
  getAgent: ["GET", "/v1/agents/{name}"],
  createSession: ["POST", "/v1/sessions"],
  listSessions: ["GET", "/v1/sessions"],
  getSession: ["GET", "/v1/sessions/{id}"],
  updateSession: ["PATCH", "/v1/sessions/{id}"],
  deleteSession: ["DELETE", "/v1/sessions/{id}"],
  listMessages: ["GET", "/v1/sessions/{id}/messages"],
  startTurn: ["POST", "/v1/sessions/{id}/turns"],
  compact: ["POST", "/v1/sessions/{id}/compact"],
  getTurn: ["GET", "/v1/sessions/{id}/turns/{turn}"],
  waitTurn: ["GET", "/v1/sessions/{id}/turns/{turn}/wait"],
  cancelTurn: ["POST", "/v1/sessions/{id}/turns/{turn}/cancel"],
  listEvents: ["GET", "/v1/sessions/{id}/events"],
  streamEvents: ["GET", "/v1/sessions/{id}/events/stream"],
  streamSessions: ["GET", "/v1/events/stream"],
  listPending: ["GET", "/v1/sessions/{id}/pending"],
  getMcp: ["GET", "/v1/sessions/{id}/mcp"],
  listApprovals: ["GET", "/v1/approvals"],
  getApproval: ["GET", "/v1/approvals/{id}"],
  getApprovalDiff: ["GET", "/v1/approvals/{id}/diff"],
  decideApproval: ["POST", "/v1/approvals/{id}/decision"],
  listQuestions: ["GET", "/v1/questions"],
  getQuestion: ["GET", "/v1/questions/{id}"],
  answerQuestion: ["POST", "/v1/questions/{id}/answer"],
});

/** Stops of a turn that paused: the turn goes on once its items are decided. */
export const PAUSED_STOPS = Object.freeze(["pending_approval", "pending_question"]);

// ---------------------------------------------------------------- errors

/** Base class of every error this client throws. */
export class AgentloopError extends Error {
  constructor(message, options) {
    super(message, options);
    this.name = new.target.name;
  }
}

/** The server answered with an error status; `code` is the problem's
 * `code` (docs/server.md, "Errors"), null when the body was no problem. */
export class APIError extends AgentloopError {
  constructor(status, problem, headers) {
    const code = problem && typeof problem.code === "string" ? problem.code : null;
    const detail = problem && (problem.detail || problem.title);
    super(`${status}${code ? " " + code : ""}${detail ? ": " + detail : ""}`);
    this.status = status;
    this.code = code;
    this.problem = problem ?? null;
    this.headers = headers ?? null;
    this.requestId = problem?.request_id ?? null;
  }
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

/** The request did not get an answer (refused, reset, DNS, ...). */
export class APIConnectionError extends AgentloopError {}
/** The request took longer than its timeout. */
export class APITimeoutError extends APIConnectionError {}
/** The caller's AbortSignal fired. */
export class APIUserAbortError extends AgentloopError {}
/** An event stream dropped and could not be resumed within its attempts. */
export class StreamResumeError extends AgentloopError {}

const ERROR_BY_STATUS = {
  400: BadRequestError,
  401: AuthenticationError,
  403: PermissionDeniedError,
  404: NotFoundError,
  409: ConflictError,
  410: GoneError,
  422: UnprocessableEntityError,
  429: RateLimitError,
};

/** The typed error of a status and problem body. */
export function makeAPIError(status, problem, headers) {
  const Cls = ERROR_BY_STATUS[status] ?? (status >= 500 ? InternalServerError : APIError);
  return new Cls(status, problem, headers);
}

// ---------------------------------------------------------------- retries

/** Retry-After (`retry-after-ms`, then `retry-after` in seconds or an
 * HTTP date) in milliseconds, or null when absent or unreadable. */
export function retryAfterMs(headers, now = Date.now()) {
  const get = (n) => (typeof headers?.get === "function" ? headers.get(n) : headers?.[n]);
  const ms = get("retry-after-ms");
  if (ms != null && ms !== "" && Number.isFinite(Number(ms))) return Math.max(0, Number(ms));
  const ra = get("retry-after");
  if (ra == null || ra === "") return null;
  if (/^\s*\d+(\.\d+)?\s*$/.test(ra)) return Math.max(0, Number(ra) * 1000);
  const at = Date.parse(ra);
  return Number.isNaN(at) ? null : Math.max(0, at - now);
}

/** Whether an error answer may be sent again: 408, 429, 5xx, and 409
 * `idempotency_in_flight` (the first request with the key still runs); an
 * `x-should-retry` header overrides. */
export function isRetryable(status, code, headers) {
  const get = (n) => (typeof headers?.get === "function" ? headers.get(n) : headers?.[n]);
  const force = get("x-should-retry");
  if (force === "true") return true;
  if (force === "false") return false;
  return status === 408 || status === 429 || status >= 500 ||
         (status === 409 && code === "idempotency_in_flight");
}

/** The wait before retry number `attempt` (0-based): min(base * 2^attempt,
 * max) less up to a quarter of jitter. */
export function backoffMs(attempt, baseMs, maxMs, random = Math.random) {
  const d = Math.min(baseMs * 2 ** attempt, maxMs);
  return d * (1 - 0.25 * random());
}

const realSleep = (ms, signal) =>
  new Promise((resolve, reject) => {
    if (signal?.aborted) return reject(new APIUserAbortError("aborted"));
    const t = setTimeout(() => {
      signal?.removeEventListener("abort", onAbort);
      resolve();
    }, ms);
    const onAbort = () => {
      clearTimeout(t);
      reject(new APIUserAbortError("aborted"));
    };
    signal?.addEventListener("abort", onAbort, { once: true });
  });

// ---------------------------------------------------------------- SSE

/** An incremental parser of text/event-stream (the WHATWG rules for
 * fields): feed it text, get the complete frames {event, data, id}. */
export class SSEParser {
  constructor() {
    this.buf = "";
    this.reset();
  }
  reset() {
    this.event = "";
    this.data = [];
    this.id = null;
    this.retry = null;
  }
  /** @returns {{event: string, data: string, id: string|null, retry: number|null}[]} */
  feed(text) {
    this.buf += text;
    const out = [];
    for (;;) {
      const m = /\r\n|\r|\n/.exec(this.buf);
      if (!m) break;
      // A lone \r at the end may be the first half of \r\n: wait for more.
      if (m[0] === "\r" && m.index === this.buf.length - 1) break;
      const line = this.buf.slice(0, m.index);
      this.buf = this.buf.slice(m.index + m[0].length);
      if (line === "") {
        if (this.data.length || this.event) {
          out.push({ event: this.event || "message", data: this.data.join("\n"), id: this.id,
                     retry: this.retry });
        }
        this.reset();
        continue;
      }
      if (line.startsWith(":")) continue;
      const colon = line.indexOf(":");
      const field = colon < 0 ? line : line.slice(0, colon);
      let value = colon < 0 ? "" : line.slice(colon + 1);
      if (value.startsWith(" ")) value = value.slice(1);
      if (field === "event") this.event = value;
      else if (field === "data") this.data.push(value);
      else if (field === "id") this.id = value;
      else if (field === "retry" && /^\d+$/.test(value)) this.retry = Number(value);
    }
    return out;
  }
}

// ---------------------------------------------------------------- streams

/** Frames of the server's stream protocol that are not events. */
const CONTROL = new Set(["stream.desync", "shutdown"]);

/**
 * A resumable stream of events: an async iterable that reconnects after a
 * dropped connection with the last event id it saw (Last-Event-ID, or
 * `after=ID:SEQ,...` on the multiplexed stream), at most `maxReconnects`
 * times in a row without a new event, and never yields an event (seq > 0)
 * twice. Iterate it once.
 */
export class EventStream {
  /** @param {object} o
   * @param {(state: EventStream, signal: AbortSignal) => Promise<Response|{answer: any, end?: boolean}>} o.open
   * @param {(e: any, state: EventStream) => boolean} [o.stopAfter]
   * @param {(e: any, state: EventStream) => boolean} [o.skip] */
  constructor(client, o) {
    this.client = client;
    this._open = o.open;
    this.stopAfter = o.stopAfter ?? (() => false);
    this.skip = o.skip ?? (() => false);
    /** Last seq seen per session. */
    this.cursors = new Map(Object.entries(o.cursors ?? {}).map(([k, v]) => [k, Number(v)]));
    this.signal = o.signal;
    this.opens = 0;
    this.reconnects = 0;
    this._ctl = null;
    this._closed = false;
  }

  /** Ends the stream; a pending iteration returns. */
  close() {
    this._closed = true;
    this._ctl?.abort();
  }

  lastSeq(sessionId) {
    return this.cursors.get(sessionId) ?? 0;
  }

  async *[Symbol.asyncIterator]() {
    const opts = this.client.streamOptions;
    let failures = 0;
    let lastError = null;
    try {
      while (!this._closed) {
        if (failures > 0) {
          if (failures > opts.maxReconnects) {
            throw new StreamResumeError(
              `the event stream dropped and ${opts.maxReconnects} reconnects failed` +
                (lastError ? `: ${lastError.message}` : ""), { cause: lastError });
          }
          let delay = backoffMs(failures - 1, opts.baseDelayMs, opts.maxDelayMs);
          if (lastError instanceof APIError) {
            const ra = retryAfterMs(lastError.headers);
            if (ra != null) delay = Math.max(delay, ra);
          }
          await this.client.sleep(delay, this.signal);
        }
        if (this.opens > 0 || failures > 0) this.reconnects++;
        const ctl = new AbortController();
        this._ctl = ctl;
        const onAbort = () => ctl.abort();
        this.signal?.addEventListener("abort", onAbort, { once: true });
        let progressed = false;
        try {
          let res;
          try {
            res = await this._open(this, ctl.signal);
            this.opens++;
          } catch (err) {
            if (this.signal?.aborted) throw new APIUserAbortError("aborted", { cause: err });
            if (this._closed) return;
            if (!(err instanceof APIError) && !(err instanceof APIConnectionError)) throw err;
            if (err instanceof APIError && !isRetryable(err.status, err.code, err.headers)) throw err;
            lastError = err;
            failures++;
            continue;
          }
          if (res && res.answer !== undefined) {
            // The opener answered without a stream (a replayed 202, a queued
            // input): it has updated the state; end, or open again at once.
            if (res.end) return;
            continue;
          }
          let done = false;
          for await (const frame of readFrames(res, ctl, opts.idleTimeoutMs)) {
            if (frame.event === "error") {
              let problem = null;
              try { problem = JSON.parse(frame.data); } catch { /* not JSON */ }
              throw makeAPIError(problem?.status ?? 500, problem, null);
            }
            if (CONTROL.has(frame.event)) {
              if (frame.event === "shutdown") lastError = new APIConnectionError("server shutting down");
              break;
            }
            let ev;
            try {
              ev = JSON.parse(frame.data);
            } catch {
              continue;  // not JSON: not an event of this protocol
            }
            if (ev === null || typeof ev !== "object") continue;
            if (typeof ev.type !== "string") ev.type = frame.event;
            const sid = ev.session_id ?? idSession(frame.id);
            const seq = typeof ev.seq === "number" ? ev.seq : idSeq(frame.id);
            if (seq > 0 && sid != null) {
              if (seq <= this.lastSeq(sid)) continue;  // a repeat after a resume
              this.cursors.set(sid, seq);
            }
            progressed = true;
            if (this.skip(ev, this)) continue;
            yield ev;
            if (this.stopAfter(ev, this)) {
              done = true;
              break;
            }
          }
          if (done) return;
          if (progressed) {
            failures = 0;
            lastError = null;
          }
          // The server closed the stream: a turn's stream ends after its
          // turn_end, a reader too slow gets stream.desync; resume at once
          // after progress, with backoff otherwise.
          if (!progressed) failures++;
        } catch (err) {
          if (this._closed) return;
          if (this.signal?.aborted) throw new APIUserAbortError("aborted", { cause: err });
          if (err instanceof AgentloopError && !(err instanceof APIConnectionError)) throw err;
          lastError = err;
          failures = progressed ? 1 : failures + 1;
        } finally {
          this.signal?.removeEventListener("abort", onAbort);
          ctl.abort();
        }
      }
    } finally {
      this._ctl = null;
    }
  }
}

function idSession(id) {
  if (id == null) return null;
  const dot = id.lastIndexOf(".");
  return dot < 0 ? null : id.slice(0, dot);
}
function idSeq(id) {
  if (id == null) return 0;
  const dot = id.lastIndexOf(".");
  const n = Number(dot < 0 ? id : id.slice(dot + 1));
  return Number.isFinite(n) ? n : 0;
}

/** The SSE frames of a response; the connection is aborted (a drop) when
 * nothing arrives for `idleTimeoutMs` (the server writes a heartbeat after
 * 15 s of silence). */
async function* readFrames(res, ctl, idleTimeoutMs) {
  const reader = res.body.getReader();
  const decoder = new TextDecoder();
  const parser = new SSEParser();
  let timer = null;
  const arm = () => {
    clearTimeout(timer);
    if (idleTimeoutMs > 0) timer = setTimeout(() => ctl.abort(), idleTimeoutMs);
  };
  try {
    arm();
    for (;;) {
      let r;
      try {
        r = await reader.read();
      } catch (err) {
        throw new APIConnectionError(`the event stream dropped: ${err?.message ?? err}`,
                                     { cause: err });
      }
      if (r.done) break;
      arm();
      for (const f of parser.feed(decoder.decode(r.value, { stream: true }))) yield f;
    }
  } finally {
    clearTimeout(timer);
    reader.cancel().catch(() => {});
  }
}

// ---------------------------------------------------------------- client

const DEFAULT_STREAM = { maxReconnects: 5, baseDelayMs: 500, maxDelayMs: 5000, idleTimeoutMs: 60000 };

function envToken() {
  const env = globalThis.process?.env;
  return env?.AGENTLOOP_TOKEN || null;
}

function newKey() {
  return `al-${globalThis.crypto.randomUUID()}`;
}

/** A client of one agentloop server. */
export class AgentloopClient {
  /** @param {import("./index.js").ClientOptions} [options] */
  constructor(options = {}) {
    const baseUrl = options.baseUrl ?? globalThis.process?.env?.AGENTLOOP_URL ?? "http://127.0.0.1:7878";
    this.baseUrl = String(baseUrl).replace(/\/+$/, "");
    this.token = options.token === undefined ? envToken() : options.token;
    this.maxRetries = options.maxRetries ?? 2;
    this.timeoutMs = options.timeoutMs ?? 600000;
    this.retryBaseMs = options.retryBaseMs ?? 500;
    this.retryMaxMs = options.retryMaxMs ?? 8000;
    this.maxRetryAfterMs = options.maxRetryAfterMs ?? 60000;
    this.streamOptions = { ...DEFAULT_STREAM, ...(options.stream ?? {}) };
    this.defaultHeaders = { ...(options.headers ?? {}) };
    this.fetch = options.fetch ?? globalThis.fetch.bind(globalThis);
    /** Waits between attempts: (ms, signal) => Promise (tests record the waits). */
    this.sleep = options.sleep ?? realSleep;
  }

  _url(path, query) {
    const u = new URL(this.baseUrl + path);
    for (const [k, v] of Object.entries(query ?? {})) {
      if (v !== undefined && v !== null) u.searchParams.set(k, String(v));
    }
    return u.toString();
  }

  _headers(extra, accept) {
    const h = new Headers(this.defaultHeaders);
    h.set("accept", accept);
    if (this.token) h.set("authorization", `Bearer ${this.token}`);
    for (const [k, v] of Object.entries(extra ?? {})) if (v != null) h.set(k, String(v));
    return h;
  }

  /**
   * Sends one logical request: retried on connection errors, 408, 429, 5xx
   * and 409 idempotency_in_flight up to `maxRetries` times with backoff,
   * waiting at least what Retry-After says (a wait over `maxRetryAfterMs`
   * is not retried). A POST carries one Idempotency-Key for all its
   * attempts. `consume(res)` reads a successful answer inside the attempt,
   * so a connection lost while reading it is retried too.
   */
  async _send(method, path, o = {}, consume = readJson) {
    const url = this._url(path, o.query);
    const headers = this._headers(o.headers, o.accept ?? "application/json");
    let body;
    if (o.body !== undefined) {
      body = JSON.stringify(o.body);
      headers.set("content-type", "application/json");
    }
    if (method === "POST" && !headers.has("idempotency-key")) {
      headers.set("idempotency-key", o.idempotencyKey ?? newKey());
    }
    const maxRetries = o.maxRetries ?? this.maxRetries;
    const timeoutMs = o.timeoutMs ?? this.timeoutMs;
    for (let attempt = 0; ; attempt++) {
      if (attempt > 0) headers.set("x-agentloop-retry-count", String(attempt));
      const ctl = new AbortController();
      let timedOut = false;
      const timer = timeoutMs > 0 ? setTimeout(() => { timedOut = true; ctl.abort(); }, timeoutMs) : null;
      const onAbort = () => ctl.abort();
      o.signal?.addEventListener("abort", onAbort, { once: true });
      const links = o.streamSignal;
      if (links) links.addEventListener("abort", onAbort, { once: true });
      let failure;
      let streaming = false;
      try {
        let res;
        try {
          res = await this.fetch(url, { method, headers, body, signal: ctl.signal });
        } catch (err) {
          if (o.signal?.aborted || links?.aborted) throw new APIUserAbortError("aborted", { cause: err });
          throw timedOut ? new APITimeoutError(`${method} ${path} timed out`, { cause: err })
                         : new APIConnectionError(`${method} ${path}: ${err?.cause?.message ?? err?.message ?? err}`,
                                                  { cause: err });
        }
        if (res.ok) {
          try {
            const out = await consume(res, {
              // A stream goes on after this call: the timeout stops at its
              // headers, and closing the stream must still abort the fetch.
              streaming: () => {
                clearTimeout(timer);
                streaming = true;
              },
            });
            return out;
          } catch (err) {
            if (err instanceof AgentloopError) throw err;
            if (o.signal?.aborted || links?.aborted) throw new APIUserAbortError("aborted", { cause: err });
            throw timedOut ? new APITimeoutError(`${method} ${path} timed out`, { cause: err })
                           : new APIConnectionError(`${method} ${path}: ${err?.message ?? err}`, { cause: err });
          }
        }
        let problem = null;
        try {
          const text = await res.text();
          problem = text ? JSON.parse(text) : null;
        } catch { /* not JSON */ }
        throw makeAPIError(res.status, problem, res.headers);
      } catch (err) {
        failure = err;
      } finally {
        clearTimeout(timer);
        if (!streaming) {
          o.signal?.removeEventListener("abort", onAbort);
          links?.removeEventListener("abort", onAbort);
        }
      }
      if (failure instanceof APIUserAbortError) throw failure;
      let delay = backoffMs(attempt, this.retryBaseMs, this.retryMaxMs);
      if (failure instanceof APIError) {
        if (!isRetryable(failure.status, failure.code, failure.headers)) throw failure;
        const ra = retryAfterMs(failure.headers);
        if (ra != null) {
          if (ra > this.maxRetryAfterMs) throw failure;
          delay = ra;
        }
      } else if (!(failure instanceof APIConnectionError)) {
        throw failure;
      }
      if (attempt >= maxRetries) throw failure;
      await this.sleep(delay, o.signal);
    }
  }

  /** A request to any route: the parsed JSON answer (null for 204). */
  request(method, path, options = {}) {
    return this._send(method, path, options);
  }

  _route(name, params = {}) {
    const [method, tmpl] = ROUTES[name];
    const path = tmpl.replace(/\{(\w+)\}/g, (_, k) => {
      const v = params[k];
      if (v === undefined || v === null || v === "") throw new TypeError(`${name}: ${k} is required`);
      return encodeURIComponent(String(v));
    });
    return [method, path];
  }

  _call(name, params, o = {}) {
    const [method, path] = this._route(name, params);
    return this._send(method, path, o);
  }

  // --- server
  health(o) { return this._call("health", {}, o); }
  ready(o) { return this._call("ready", {}, o); }
  openapi(o) { return this._call("openapi", {}, o); }
  metrics(o) {
    const [m, p] = this._route("metrics");
    return this._send(m, p, { ...o, accept: "text/plain" }, (res) => res.text());
  }

  // --- agents
  listAgents(o) { return this._call("listAgents", {}, o); }
  getAgent(name, o) { return this._call("getAgent", { name }, o); }

  // --- sessions
  createSession(body = {}, o = {}) { return this._call("createSession", {}, { ...o, body }); }
  listSessions(query = {}, o = {}) { return this._call("listSessions", {}, { ...o, query }); }
  /** Every session of the listing, page after page. */
  async *iterSessions(query = {}, o = {}) {
    let cursor = query.cursor;
    do {
      const page = await this.listSessions({ ...query, cursor }, o);
      yield* page.items;
      cursor = page.next_cursor;
    } while (cursor);
  }
  getSession(id, o) { return this._call("getSession", { id }, o); }
  updateSession(id, body, o = {}) { return this._call("updateSession", { id }, { ...o, body }); }
  deleteSession(id, o) { return this._call("deleteSession", { id }, o); }
  listMessages(id, query = {}, o = {}) { return this._call("listMessages", { id }, { ...o, query }); }
  listPending(id, o) { return this._call("listPending", { id }, o); }
  getMcp(id, o) { return this._call("getMcp", { id }, o); }
  compact(id, body = {}, o = {}) { return this._call("compact", { id }, { ...o, body }); }

  // --- turns
  /** Starts a turn: `{input}` or `{continue: true}`, with `on_busy`. */
  startTurn(id, body, o = {}) {
    if (typeof body === "string") body = { input: body };
    return this._call("startTurn", { id }, { ...o, body });
  }
  getTurn(id, turn, o) { return this._call("getTurn", { id, turn }, o); }
  /** One long poll (timeout_s 0-300, the server's default 30). */
  waitTurn(id, turn, query = {}, o = {}) {
    const t = query.timeout_s ?? 30;
    return this._call("waitTurn", { id, turn }, { timeoutMs: (t + 30) * 1000, ...o, query });
  }
  /** Long-polls until the turn is done (ended, or paused on an item). */
  async waitForTurn(id, turn, o = {}) {
    for (;;) {
      const r = await this.waitTurn(id, turn, { timeout_s: o.pollTimeoutS ?? 30 }, o);
      if (r.status === "done") return r;
      if (o.signal?.aborted) throw new APIUserAbortError("aborted");
    }
  }
  cancelTurn(id, turn, o) { return this._call("cancelTurn", { id, turn }, o); }

  /**
   * Starts a turn and streams its events, as one iterable: the POST with
   * `Accept: text/event-stream`, then, after a drop or a pause, the
   * session's stream from the last event seen. With `followPauses` (the
   * default) it goes on through `pending_approval`/`pending_question`
   * pauses and ends after the turn's final `turn_end`; without, after its
   * first `turn_end`. A paused turn's `turn_end` is yielded once its items
   * can be decided (the server lists them): decide them there, from its
   * `pending`. A turn queued behind another (`on_busy: "enqueue"`) yields
   * its `queued` frame and ends.
   * @returns {TurnStream}
   */
  streamTurn(id, body, o = {}) {
    if (typeof body === "string") body = { input: body };
    return new TurnStream(this, id, body, o);
  }

  // --- events
  listEvents(id, query = {}, o = {}) { return this._call("listEvents", { id }, { ...o, query }); }

  /** The session's events from after `after` (default 0), live, resumed
   * after drops. */
  streamEvents(id, o = {}) {
    const [, path] = this._route("streamEvents", { id });
    return new EventStream(this, {
      cursors: { [id]: o.after ?? 0 },
      signal: o.signal,
      stopAfter: o.stopAfter,
      open: (state, signal) => {
        const seq = state.lastSeq(id);
        return this._openStream("GET", path, {
          headers: seq > 0 ? { "last-event-id": String(seq) } : {},
          query: seq > 0 ? {} : { after: 0 },
          streamSignal: signal,
        });
      },
    });
  }

  /** Several sessions on one connection (the multiplexed stream); `after`
   * maps a session to the seq to start after. */
  streamSessions(ids, o = {}) {
    if (!Array.isArray(ids) || ids.length === 0) throw new TypeError("streamSessions: ids required");
    const [, path] = this._route("streamSessions");
    const cursors = Object.fromEntries(ids.map((s) => [s, o.after?.[s] ?? 0]));
    return new EventStream(this, {
      cursors,
      signal: o.signal,
      stopAfter: o.stopAfter,
      open: (state, signal) => this._openStream("GET", path, {
        query: { sessions: ids.join(","), after: ids.map((s) => `${s}:${state.lastSeq(s)}`).join(",") },
        streamSignal: signal,
      }),
    });
  }

  /** Opens an event stream: the Response once its headers arrived (the
   * request timeout stops there; the stream's idle timeout takes over).
   * A JSON answer is returned as {answer, status}. */
  _openStream(method, path, o) {
    return this._send(method, path, { maxRetries: 0, accept: "text/event-stream", ...o },
      async (res, t) => {
        const type = res.headers.get("content-type") ?? "";
        if (type.startsWith("text/event-stream")) {
          t.streaming();
          return res;
        }
        return { answer: await readJson(res), status: res.status };
      });
  }

  // --- approvals and questions
  listApprovals(o) { return this._call("listApprovals", {}, o); }
  getApproval(id, o) { return this._call("getApproval", { id }, o); }
  getApprovalDiff(id, o) { return this._call("getApprovalDiff", { id }, o); }
  /** `{decision: "approve"|"deny", edited_args?, reason?, scope?: "once"|"session"}` */
  decideApproval(id, body, o = {}) { return this._call("decideApproval", { id }, { ...o, body }); }
  approve(id, extra = {}, o = {}) { return this.decideApproval(id, { decision: "approve", ...extra }, o); }
  deny(id, reason, o = {}) {
    return this.decideApproval(id, reason ? { decision: "deny", reason } : { decision: "deny" }, o);
  }
  listQuestions(o) { return this._call("listQuestions", {}, o); }
  getQuestion(id, o) { return this._call("getQuestion", { id }, o); }
  answerQuestion(id, answer, o = {}) {
    return this._call("answerQuestion", { id }, { ...o, body: { answer } });
  }
}

async function readJson(res) {
  if (res.status === 204) return null;
  const text = await res.text();
  return text ? JSON.parse(text) : null;
}

/** The stream of one turn (AgentloopClient.streamTurn). `turnId` is known
 * once the turn began (or the server answered with its id); `result` is
 * its last `turn_end` once the iteration ended. */
export class TurnStream {
  constructor(client, sessionId, body, o) {
    this.client = client;
    this.sessionId = sessionId;
    this.turnId = null;
    this.result = null;
    this.queued = null;
    const follow = o.followPauses ?? true;
    const key = o.idempotencyKey ?? newKey();
    const [, turnsPath] = client._route("startTurn", { id: sessionId });
    const [, eventsPath] = client._route("streamEvents", { id: sessionId });
    // Where the session stream starts when no event of the turn was seen:
    // from the start, skipping up to the turn's turn_begin.
    let seeking = false;
    let posted = false;
    this.stream = new EventStream(client, {
      cursors: { [sessionId]: 0 },
      signal: o.signal,
      skip: (ev) => {
        if (ev.type === "turn_begin" && (this.turnId === null || ev.turn_id === this.turnId)) {
          seeking = false;
          this.turnId = ev.turn_id;
        }
        if (ev.type === "queued") return false;
        return seeking || (this.turnId !== null && ev.turn_id !== undefined && ev.turn_id !== this.turnId);
      },
      stopAfter: (ev) => {
        if (ev.type === "queued") {
          this.queued = ev;
          return true;
        }
        if (ev.type !== "turn_end" || ev.turn_id !== this.turnId) return false;
        this.result = ev;
        return !follow || !PAUSED_STOPS.includes(ev.stop);
      },
      open: async (state, signal) => {
        if (!posted) {
          posted = true;
          // The same key on every attempt: a repeat answers the first 202.
          const r = await client._openStream("POST", turnsPath, {
            body, idempotencyKey: key, streamSignal: signal,
            maxRetries: client.maxRetries,
          });
          if (r.answer !== undefined) {
            this._accepted(r.answer, () => { seeking = true; });
            if (this.queued) return { answer: this.queued, end: true };
          }
          return r;
        }
        const seq = state.lastSeq(sessionId);
        if (seq === 0 && this.turnId === null) {
          // Dropped before the turn said who it is: ask again with the same
          // key (a replay starts nothing) for its id.
          const r = await client._send("POST", turnsPath, { body, idempotencyKey: key, streamSignal: signal });
          this._accepted(r, () => {});
        }
        if (this.queued) return { answer: this.queued, end: true };
        if (seq === 0) seeking = true;
        return client._openStream("GET", eventsPath, {
          headers: seq > 0 ? { "last-event-id": String(seq) } : {},
          query: seq > 0 ? {} : { after: 0 },
          streamSignal: signal,
        });
      },
    });
  }

  _accepted(json, onRunning) {
    if (json?.status === "queued") {
      this.queued = { type: "queued", ...json };
      return;
    }
    if (json?.id) this.turnId = json.id;
    onRunning();
  }

  close() { this.stream.close(); }

  async *[Symbol.asyncIterator]() {
    let sawQueued = false;
    for await (const ev of this.stream) {
      if (ev.type === "queued") sawQueued = true;
      if (ev.type === "turn_end" && ev.turn_id === this.turnId && PAUSED_STOPS.includes(ev.stop)) {
        await this._untilDecidable(ev);
      }
      yield ev;
    }
    if (this.queued && !sawQueued) yield this.queued;
  }

  /** A pause's items can be decided once the server lists them, which is
   * just after its turn_end: waits (a few short polls) until the session's
   * pending items hold every item of `ev`, so a decision made on this
   * turn_end finds them. */
  async _untilDecidable(ev) {
    const ids = (ev.pending ?? []).map((p) => (typeof p === "string" ? p : p.id));
    if (ids.length === 0) return;
    for (let i = 0; i < 12; i++) {
      const listed = await this.client.listPending(this.sessionId);
      const have = new Set((listed.items ?? []).map((p) => p.id));
      if (ids.every((id) => have.has(id))) return;
      await this.client.sleep(Math.min(25 * 2 ** i, 1000), this.stream.signal);
    }
  }
}
