"""What the synchronous and asyncio clients share: errors, the retry
policy, the SSE parser, the routes, and the bookkeeping of a resumable
event stream (cursors per session, no event yielded twice)."""

from __future__ import annotations

import email.utils
import json
import random
import re
import time
import uuid
from typing import Any, Callable, Dict, List, Mapping, Optional, Tuple

# Method name -> (HTTP method, path template). A test holds every entry
# equal to a route of src/server/openapi.json.
ROUTES: Dict[str, Tuple[str, str]] = {
    "health": ("GET", "/v1/health"),
    "ready": ("GET", "/v1/ready"),
    "openapi": ("GET", "/v1/openapi.json"),
    "metrics": ("GET", "/v1/metrics"),
    "list_agents": ("GET", "/v1/agents"),
    "get_agent": ("GET", "/v1/agents/{name}"),
    "create_session": ("POST", "/v1/sessions"),
    "list_sessions": ("GET", "/v1/sessions"),
    "get_session": ("GET", "/v1/sessions/{id}"),
    "update_session": ("PATCH", "/v1/sessions/{id}"),
    "delete_session": ("DELETE", "/v1/sessions/{id}"),
    "list_messages": ("GET", "/v1/sessions/{id}/messages"),
    "start_turn": ("POST", "/v1/sessions/{id}/turns"),
    "compact": ("POST", "/v1/sessions/{id}/compact"),
    "get_turn": ("GET", "/v1/sessions/{id}/turns/{turn}"),
    "wait_turn": ("GET", "/v1/sessions/{id}/turns/{turn}/wait"),
    "cancel_turn": ("POST", "/v1/sessions/{id}/turns/{turn}/cancel"),
    "list_events": ("GET", "/v1/sessions/{id}/events"),
    "stream_events": ("GET", "/v1/sessions/{id}/events/stream"),
    "stream_sessions": ("GET", "/v1/events/stream"),
    "list_pending": ("GET", "/v1/sessions/{id}/pending"),
    "get_mcp": ("GET", "/v1/sessions/{id}/mcp"),
    "list_approvals": ("GET", "/v1/approvals"),
    "get_approval": ("GET", "/v1/approvals/{id}"),
    "get_approval_diff": ("GET", "/v1/approvals/{id}/diff"),
    "decide_approval": ("POST", "/v1/approvals/{id}/decision"),
    "list_questions": ("GET", "/v1/questions"),
    "get_question": ("GET", "/v1/questions/{id}"),
    "answer_question": ("POST", "/v1/questions/{id}/answer"),
}

# Stops of a turn that paused: the turn goes on once its items are decided.
PAUSED_STOPS = ("pending_approval", "pending_question")


def route(name: str, **params: Any) -> Tuple[str, str]:
    from urllib.parse import quote

    method, tmpl = ROUTES[name]

    def sub(m: "re.Match[str]") -> str:
        v = params.get(m.group(1))
        if v is None or v == "":
            raise TypeError("%s: %s is required" % (name, m.group(1)))
        return quote(str(v), safe="")

    return method, re.sub(r"\{(\w+)\}", sub, tmpl)


def new_key() -> str:
    return "al-" + str(uuid.uuid4())


# ------------------------------------------------------------------ errors


class AgentloopError(Exception):
    """Base class of every error this client raises."""


class APIError(AgentloopError):
    """The server answered with an error status; `code` is the problem's
    `code` (docs/server.md, "Errors"), None when the body was no problem."""

    def __init__(self, status: int, problem: Optional[dict], headers: Optional[Mapping[str, str]]):
        self.status = status
        self.problem = problem if isinstance(problem, dict) else None
        self.code = self.problem.get("code") if self.problem else None
        self.headers = dict(headers or {})
        self.request_id = self.problem.get("request_id") if self.problem else None
        detail = self.problem and (self.problem.get("detail") or self.problem.get("title"))
        super().__init__("%d%s%s" % (status, " " + self.code if self.code else "",
                                     ": " + detail if detail else ""))


class BadRequestError(APIError): pass
class AuthenticationError(APIError): pass
class PermissionDeniedError(APIError): pass
class NotFoundError(APIError): pass
class ConflictError(APIError): pass
class GoneError(APIError): pass
class UnprocessableEntityError(APIError): pass
class RateLimitError(APIError): pass
class InternalServerError(APIError): pass


class APIConnectionError(AgentloopError):
    """The request did not get an answer (refused, reset, ...)."""


class APITimeoutError(APIConnectionError):
    """The request took longer than its timeout."""


class StreamResumeError(AgentloopError):
    """An event stream dropped and could not be resumed within its attempts."""


_BY_STATUS = {400: BadRequestError, 401: AuthenticationError, 403: PermissionDeniedError,
              404: NotFoundError, 409: ConflictError, 410: GoneError,
              422: UnprocessableEntityError, 429: RateLimitError}


def make_api_error(status: int, body: Any, headers: Optional[Mapping[str, str]]) -> APIError:
    problem = body
    if isinstance(body, (bytes, str)):
        try:
            problem = json.loads(body) if body else None
        except ValueError:
            problem = None
    cls = _BY_STATUS.get(status) or (InternalServerError if status >= 500 else APIError)
    return cls(status, problem, headers)


# ------------------------------------------------------------------ retries


def lower_headers(items: Any) -> Dict[str, str]:
    return {str(k).lower(): str(v) for k, v in items}


def retry_after_ms(headers: Mapping[str, str], now: Optional[float] = None) -> Optional[float]:
    """Retry-After in milliseconds (`retry-after-ms`, then `retry-after` in
    seconds or an HTTP date), or None. Header names are lower case."""
    ms = headers.get("retry-after-ms")
    if ms:
        try:
            return max(0.0, float(ms))
        except ValueError:
            pass
    ra = (headers.get("retry-after") or "").strip()
    if not ra:
        return None
    if re.fullmatch(r"\d+(\.\d+)?", ra):
        return float(ra) * 1000.0
    try:
        at = email.utils.parsedate_to_datetime(ra).timestamp()
    except (TypeError, ValueError):
        return None
    return max(0.0, (at - (time.time() if now is None else now)) * 1000.0)


def is_retryable(status: int, code: Optional[str], headers: Mapping[str, str]) -> bool:
    """408, 429, 5xx and 409 `idempotency_in_flight` may be sent again; an
    `x-should-retry` header overrides."""
    force = headers.get("x-should-retry")
    if force == "true":
        return True
    if force == "false":
        return False
    return status in (408, 429) or status >= 500 or (status == 409 and code == "idempotency_in_flight")


def backoff_ms(attempt: int, base_ms: float, max_ms: float, rnd: Callable[[], float] = random.random) -> float:
    """min(base * 2^attempt, max) less up to a quarter of jitter."""
    return min(base_ms * (2 ** attempt), max_ms) * (1 - 0.25 * rnd())


class RetryPolicy:
    def __init__(self, max_retries: int = 2, base_ms: float = 500, max_ms: float = 8000,
                 max_retry_after_ms: float = 60000):
        self.max_retries = max_retries
        self.base_ms = base_ms
        self.max_ms = max_ms
        self.max_retry_after_ms = max_retry_after_ms

    def delay_after(self, err: BaseException, attempt: int, max_retries: int) -> Optional[float]:
        """The wait in ms before another attempt after `err`, or None to raise it."""
        if attempt >= max_retries:
            return None
        delay = backoff_ms(attempt, self.base_ms, self.max_ms)
        if isinstance(err, APIError):
            if not is_retryable(err.status, err.code, err.headers):
                return None
            ra = retry_after_ms(err.headers)
            if ra is not None:
                if ra > self.max_retry_after_ms:
                    return None
                delay = ra
        elif not isinstance(err, APIConnectionError):
            return None
        return delay


# ------------------------------------------------------------------ SSE


class SSEParser:
    """An incremental parser of text/event-stream: feed text, get frames
    {event, data, id, retry}."""

    def __init__(self) -> None:
        self.buf = ""
        self._reset()

    def _reset(self) -> None:
        self.event = ""
        self.data: List[str] = []
        self.id: Optional[str] = None
        self.retry: Optional[int] = None

    def feed(self, text: str) -> List[dict]:
        self.buf += text
        out = []
        while True:
            m = re.search(r"\r\n|\r|\n", self.buf)
            if not m:
                break
            if m.group(0) == "\r" and m.start() == len(self.buf) - 1:
                break  # maybe the first half of \r\n
            line = self.buf[:m.start()]
            self.buf = self.buf[m.end():]
            if line == "":
                if self.data or self.event:
                    out.append({"event": self.event or "message", "data": "\n".join(self.data),
                                "id": self.id, "retry": self.retry})
                self._reset()
                continue
            if line.startswith(":"):
                continue
            field, _, value = line.partition(":")
            if value.startswith(" "):
                value = value[1:]
            if field == "event":
                self.event = value
            elif field == "data":
                self.data.append(value)
            elif field == "id":
                self.id = value
            elif field == "retry" and value.isdigit():
                self.retry = int(value)
        return out


# ------------------------------------------------------------------ streams

CONTROL = ("stream.desync", "shutdown")


class StreamOptions:
    def __init__(self, max_reconnects: int = 5, base_delay_ms: float = 500, max_delay_ms: float = 5000,
                 idle_timeout_s: float = 60.0):
        self.max_reconnects = max_reconnects
        self.base_delay_ms = base_delay_ms
        self.max_delay_ms = max_delay_ms
        self.idle_timeout_s = idle_timeout_s


def _id_parts(frame_id: Optional[str]) -> Tuple[Optional[str], int]:
    if not frame_id:
        return None, 0
    sid, dot, seq = frame_id.rpartition(".")
    try:
        return (sid if dot else None), int(seq)
    except ValueError:
        return None, 0


class StreamCore:
    """The state of a resumable stream: the last seq seen per session, the
    events to drop (repeats after a resume), where to stop."""

    def __init__(self, cursors: Mapping[str, int], options: StreamOptions,
                 stop_after: Optional[Callable[[dict], bool]] = None,
                 skip: Optional[Callable[[dict], bool]] = None):
        self.cursors: Dict[str, int] = {k: int(v) for k, v in cursors.items()}
        self.options = options
        self.stop_after = stop_after or (lambda e: False)
        self.skip = skip or (lambda e: False)
        self.reconnects = 0  # opens after the first: after a drop, an error, or a turn's pause
        self.opened = False
        self.failures = 0
        self.last_error: Optional[BaseException] = None
        self.progressed = False
        self.stopped = False
        self.control = False

    def last_seq(self, session_id: str) -> int:
        return self.cursors.get(session_id, 0)

    def begin_connection(self) -> None:
        if self.opened:
            self.reconnects += 1
        self.opened = True
        self.progressed = False
        self.control = False

    def reconnect_delay(self) -> Optional[float]:
        """Before an open: None the first time or after progress, else the
        wait in ms; raises StreamResumeError past the attempts."""
        if self.failures == 0:
            return None
        if self.failures > self.options.max_reconnects:
            raise StreamResumeError(
                "the event stream dropped and %d reconnects failed%s"
                % (self.options.max_reconnects, ": %s" % self.last_error if self.last_error else ""))
        delay = backoff_ms(self.failures - 1, self.options.base_delay_ms, self.options.max_delay_ms)
        if isinstance(self.last_error, APIError):
            ra = retry_after_ms(self.last_error.headers)
            if ra is not None:
                delay = max(delay, ra)
        return delay

    def open_failed(self, err: BaseException) -> None:
        """An open failed: raise what cannot be retried, count the rest."""
        if isinstance(err, APIError) and not is_retryable(err.status, err.code, err.headers):
            raise err
        if not isinstance(err, (APIError, APIConnectionError)):
            raise err
        self.last_error = err
        self.failures += 1

    def dropped(self, err: Optional[BaseException]) -> None:
        """The connection ended (err None: closed by the server)."""
        if err is not None:
            self.last_error = err
            self.failures = 1 if self.progressed else self.failures + 1
        elif self.progressed:
            self.failures = 0
            self.last_error = None
        else:
            self.failures += 1

    def on_frame(self, frame: dict) -> Optional[dict]:
        """The event to yield for a frame, or None; raises an error frame."""
        name = frame["event"]
        if name == "error":
            try:
                problem = json.loads(frame["data"])
            except ValueError:
                problem = None
            status = problem.get("status", 500) if isinstance(problem, dict) else 500
            raise make_api_error(int(status), problem, None)
        if name in CONTROL:
            if name == "shutdown":
                self.last_error = APIConnectionError("server shutting down")
            self.control = True
            return None
        try:
            ev = json.loads(frame["data"])
        except ValueError:
            return None
        if not isinstance(ev, dict):
            return None
        if not isinstance(ev.get("type"), str):
            ev["type"] = name
        id_sid, id_seq = _id_parts(frame.get("id"))
        sid = ev.get("session_id") or id_sid
        seq = ev.get("seq") if isinstance(ev.get("seq"), int) else id_seq
        if seq and seq > 0 and sid is not None:
            if seq <= self.last_seq(sid):
                return None  # a repeat after a resume
            self.cursors[sid] = seq
        self.progressed = True
        if self.skip(ev):
            return None
        if self.stop_after(ev):
            self.stopped = True
        return ev


class TurnPlan:
    """What a turn's stream opens next: the POST with Accept:
    text/event-stream first; after a drop or a pause the session's stream
    from the last event seen; when nothing of the turn was seen, the POST
    again with the same key (a replay starts nothing) for the turn's id, then
    the session's stream from the start, skipping up to its turn_begin."""

    def __init__(self, session_id: str, body: dict, idempotency_key: Optional[str], follow_pauses: bool):
        self.session_id = session_id
        self.body = body
        self.key = idempotency_key or new_key()
        self.follow = follow_pauses
        self.turn_id: Optional[str] = None
        self.result: Optional[dict] = None
        self.queued: Optional[dict] = None
        self.posted = False
        self.seeking = False

    def skip(self, ev: dict) -> bool:
        if ev.get("type") == "turn_begin" and (self.turn_id is None or ev.get("turn_id") == self.turn_id):
            self.seeking = False
            self.turn_id = ev.get("turn_id")
        if ev.get("type") == "queued":
            return False
        return self.seeking or (self.turn_id is not None and "turn_id" in ev and ev["turn_id"] != self.turn_id)

    def stop_after(self, ev: dict) -> bool:
        if ev.get("type") == "queued":
            self.queued = ev
            return True
        if ev.get("type") != "turn_end" or ev.get("turn_id") != self.turn_id:
            return False
        self.result = ev
        return not self.follow or ev.get("stop") not in PAUSED_STOPS

    def accepted(self, answer: Any, from_stream_post: bool) -> None:
        if isinstance(answer, dict) and answer.get("status") == "queued":
            self.queued = dict(answer, type="queued")
            return
        if isinstance(answer, dict) and answer.get("id"):
            self.turn_id = answer["id"]
        if from_stream_post:
            self.seeking = True

    def paused_end(self, ev: dict) -> List[str]:
        """The ids of the items of this turn's paused turn_end `ev` (to wait
        for until the server lists them), else []."""
        if ev.get("type") != "turn_end" or ev.get("turn_id") != self.turn_id or ev.get("stop") not in PAUSED_STOPS:
            return []
        return [p if isinstance(p, str) else p.get("id") for p in ev.get("pending") or []]

    def session_stream_request(self, core: StreamCore) -> Tuple[Dict[str, str], Dict[str, Any]]:
        """(headers, query) of the session stream's next open."""
        seq = core.last_seq(self.session_id)
        if seq == 0:
            self.seeking = True
            return {}, {"after": 0}
        return {"last-event-id": str(seq)}, {}
