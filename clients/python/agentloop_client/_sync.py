"""The synchronous client, on http.client."""

from __future__ import annotations

import http.client
import json
import os
import socket
import time
from typing import Any, Callable, Dict, Iterator, List, Mapping, Optional, Union
from urllib.parse import urlencode, urlsplit

from ._api import Api, _turn_body
from ._core import (APIConnectionError, APIError, APITimeoutError, RetryPolicy, SSEParser,
                    StreamCore, StreamOptions, TurnPlan, lower_headers, make_api_error, new_key,
                    route)


class _Answer:
    """A JSON answer where a stream was asked for (a replayed 202)."""

    def __init__(self, value: Any, end: bool = False):
        self.value = value
        self.end = end


def _default_token(token: Any) -> Optional[str]:
    if token is _UNSET:
        return os.environ.get("AGENTLOOP_TOKEN") or None
    return token


_UNSET: Any = object()


class _Base:
    """Options shared by Client and AsyncClient."""

    def __init__(self, base_url: Optional[str] = None, token: Any = _UNSET, *, max_retries: int = 2,
                 timeout: float = 600.0, retry_base_ms: float = 500, retry_max_ms: float = 8000,
                 max_retry_after_ms: float = 60000, stream: Optional[StreamOptions] = None,
                 headers: Optional[Mapping[str, str]] = None,
                 sleep: Optional[Callable[[float], Any]] = None):
        base = base_url or os.environ.get("AGENTLOOP_URL") or "http://127.0.0.1:7878"
        self.base_url = base.rstrip("/")
        u = urlsplit(self.base_url)
        if u.scheme not in ("http", "https") or not u.hostname:
            raise ValueError("base_url must be http(s)://host[:port][/prefix]: %r" % base)
        self._scheme = u.scheme
        self._host = u.hostname
        self._port = u.port or (443 if u.scheme == "https" else 80)
        self._prefix = u.path.rstrip("/")
        self.token: Optional[str] = _default_token(token)
        self.retry = RetryPolicy(max_retries, retry_base_ms, retry_max_ms, max_retry_after_ms)
        self.timeout = timeout
        self.stream_options = stream or StreamOptions()
        self.default_headers = dict(headers or {})
        # How the client waits between attempts, in seconds (tests record it).
        self._sleep = sleep

    def _target(self, path: str, query: Optional[Mapping[str, Any]]) -> str:
        q = {k: v for k, v in (query or {}).items() if v is not None}
        return self._prefix + path + ("?" + urlencode(q) if q else "")

    def _headers(self, extra: Optional[Mapping[str, str]], accept: str, body: Optional[bytes],
                 method: str, key: Optional[str]) -> Dict[str, str]:
        h = {k.lower(): v for k, v in self.default_headers.items()}
        h["accept"] = accept
        h["host"] = "%s:%d" % (self._host, self._port)
        if self.token:
            h["authorization"] = "Bearer " + self.token
        if body is not None:
            h["content-type"] = "application/json"
        if method == "POST":
            h["idempotency-key"] = key or new_key()
        for k, v in (extra or {}).items():
            if v is not None:
                h[k.lower()] = str(v)
        return h


def _body(body: Any) -> Optional[bytes]:
    return None if body is None else json.dumps(body).encode()


def _json(raw: bytes, status: int) -> Any:
    if status == 204 or not raw:
        return None
    return json.loads(raw)


class Client(_Base, Api):
    """A synchronous client of one agentloop server (docs/clients.md)."""

    # --- transport

    def _connect(self, timeout: Optional[float]) -> http.client.HTTPConnection:
        if self._scheme == "https":
            return http.client.HTTPSConnection(self._host, self._port, timeout=timeout)
        return http.client.HTTPConnection(self._host, self._port, timeout=timeout)

    def _wait(self, ms: float) -> None:
        if self._sleep is not None:
            self._sleep(ms / 1000.0)
        else:
            time.sleep(ms / 1000.0)

    def _send(self, method: str, path: str, *, query: Optional[Mapping[str, Any]] = None,
              body: Any = None, headers: Optional[Mapping[str, str]] = None,
              idempotency_key: Optional[str] = None, timeout: Optional[float] = None,
              max_retries: Optional[int] = None, accept: str = "application/json",
              stream: bool = False) -> Any:
        """One logical request: retried on connection errors, 408, 429, 5xx
        and 409 idempotency_in_flight with backoff, waiting at least what
        Retry-After says; a POST keeps one Idempotency-Key across its
        attempts. With `stream`, an event-stream answer is returned open (a
        (connection, response) pair); a JSON one as _Answer."""
        data = _body(body)
        key = idempotency_key or (new_key() if method == "POST" else None)
        hdrs = self._headers(headers, accept, data, method, key)
        target = self._target(path, query)
        retries = self.retry.max_retries if max_retries is None else max_retries
        t = self.timeout if timeout is None else timeout
        attempt = 0
        while True:
            if attempt:
                hdrs["x-agentloop-retry-count"] = str(attempt)
            conn = self._connect(t)
            keep = False
            try:
                try:
                    conn.request(method, target, body=data, headers=hdrs)
                    resp = conn.getresponse()
                    rh = lower_headers(resp.getheaders())
                    if 200 <= resp.status < 300:
                        if stream and rh.get("content-type", "").startswith("text/event-stream"):
                            keep = True
                            if conn.sock is not None:
                                conn.sock.settimeout(self.stream_options.idle_timeout_s)
                            return conn, resp
                        raw = resp.read()
                        if accept == "text/plain":
                            return raw.decode("utf-8", "replace")
                        parsed = _json(raw, resp.status)
                        return _Answer(parsed) if stream else parsed
                    err: BaseException = make_api_error(resp.status, resp.read(), rh)
                except socket.timeout as e:
                    err = APITimeoutError("%s %s timed out" % (method, path))
                    err.__cause__ = e
                except (OSError, http.client.HTTPException) as e:
                    err = APIConnectionError("%s %s: %s" % (method, path, e))
                    err.__cause__ = e
            finally:
                if not keep:
                    conn.close()
            delay = self.retry.delay_after(err, attempt, retries)
            if delay is None:
                raise err
            self._wait(delay)
            attempt += 1

    def request(self, method: str, path: str, **kw: Any) -> Any:
        """A request to any route: the parsed JSON answer (None for 204)."""
        return self._send(method, path, **kw)

    def _call(self, name: str, params: Optional[Mapping[str, Any]] = None, **kw: Any) -> Any:
        method, path = route(name, **(params or {}))
        return self._send(method, path, **kw)

    def iter_sessions(self, agent: Optional[str] = None, status: Optional[str] = None,
                      limit: Optional[int] = None) -> Iterator[dict]:
        """Every session of the listing, page after page."""
        cursor = None
        while True:
            page = self.list_sessions(agent, status, limit, cursor)
            yield from page["items"]
            cursor = page.get("next_cursor")
            if not cursor:
                return

    def wait_for_turn(self, id: str, turn: str, poll_timeout_s: int = 30) -> dict:
        """Long-polls until the turn is done (ended, or paused on an item)."""
        while True:
            r = self.wait_turn(id, turn, poll_timeout_s)
            if r.get("status") == "done":
                return r

    def stream_turn(self, id: str, input: Optional[str] = None, *, continue_: bool = False,
                    on_busy: Optional[str] = None, follow_pauses: bool = True,
                    idempotency_key: Optional[str] = None) -> "TurnStream":
        """Starts a turn and streams its events (see TurnStream)."""
        return TurnStream(self, id, _turn_body(input, continue_, on_busy), follow_pauses, idempotency_key)

    def stream_events(self, id: str, after: int = 0,
                      stop_after: Optional[Callable[[dict], bool]] = None) -> "EventStream":
        """The session's events after `after`, live, resumed after drops."""
        _, path = route("stream_events", id=id)

        def open_(core: StreamCore) -> Any:
            seq = core.last_seq(id)
            return self._send("GET", path, headers={"last-event-id": str(seq)} if seq else None,
                              query=None if seq else {"after": 0}, max_retries=0,
                              accept="text/event-stream", stream=True)

        return EventStream(self, StreamCore({id: after}, self.stream_options, stop_after), open_)

    def stream_sessions(self, ids: List[str], after: Optional[Mapping[str, int]] = None,
                        stop_after: Optional[Callable[[dict], bool]] = None) -> "EventStream":
        """Several sessions on one connection; `after` maps a session to the
        seq to start after."""
        if not ids:
            raise ValueError("stream_sessions: ids required")
        _, path = route("stream_sessions")

        def open_(core: StreamCore) -> Any:
            q = {"sessions": ",".join(ids), "after": ",".join("%s:%d" % (s, core.last_seq(s)) for s in ids)}
            return self._send("GET", path, query=q, max_retries=0, accept="text/event-stream", stream=True)

        cursors = {s: (after or {}).get(s, 0) for s in ids}
        return EventStream(self, StreamCore(cursors, self.stream_options, stop_after), open_)


def _frames(resp: http.client.HTTPResponse) -> Iterator[dict]:
    parser = SSEParser()
    while True:
        try:
            chunk = resp.read1(65536) if hasattr(resp, "read1") else resp.readline()
        except socket.timeout as e:
            raise APIConnectionError("the event stream was silent too long") from e
        except (OSError, http.client.HTTPException) as e:
            raise APIConnectionError("the event stream dropped: %s" % e) from e
        if not chunk:
            return
        for f in parser.feed(chunk.decode("utf-8", "replace")):
            yield f


class EventStream:
    """A resumable stream of events: iterate it once. After a dropped
    connection it reconnects from the last event seen (Last-Event-ID, or
    after=ID:SEQ,... on the multiplexed stream), at most
    `max_reconnects` times in a row without a new event, and never yields
    an event (seq > 0) twice."""

    def __init__(self, client: Client, core: StreamCore, open_: Callable[[StreamCore], Any]):
        self.client = client
        self.core = core
        self._open = open_
        self._conn: Optional[http.client.HTTPConnection] = None
        self._closed = False

    @property
    def reconnects(self) -> int:
        return self.core.reconnects

    @property
    def cursors(self) -> Dict[str, int]:
        return self.core.cursors

    def close(self) -> None:
        """Ends the stream (from another thread too)."""
        self._closed = True
        if self._conn is not None:
            try:
                if self._conn.sock is not None:
                    self._conn.sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def __iter__(self) -> Iterator[dict]:
        core = self.core
        while not self._closed:
            delay = core.reconnect_delay()
            if delay is not None:
                self.client._wait(delay)
            core.begin_connection()
            try:
                opened = self._open(core)
            except (APIError, APIConnectionError) as e:
                core.open_failed(e)
                continue
            if isinstance(opened, _Answer):
                if opened.end:
                    return
                continue
            conn, resp = opened
            self._conn = conn
            err: Optional[BaseException] = None
            try:
                for frame in _frames(resp):
                    ev = core.on_frame(frame)
                    if core.control:
                        break
                    if ev is None:
                        continue
                    yield ev
                    if core.stopped:
                        return
            except APIConnectionError as e:
                err = e
            finally:
                self._conn = None
                conn.close()
            if self._closed:
                return
            core.dropped(err)

    def __enter__(self) -> "EventStream":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


class TurnStream:
    """The events of one turn, as one iterable: the POST with Accept:
    text/event-stream, then after a drop or a pause the session's stream
    from the last event seen. With follow_pauses (the default) it goes on
    through approval and question pauses to the final turn_end; without,
    it ends after the first. A paused turn_end is yielded once its items can
    be decided (the server lists them): decide them there, from its
    `pending`. A queued input yields its `queued` frame and ends. `turn_id`
    is known once the turn began; `result` is the last turn_end."""

    def __init__(self, client: Client, session_id: str, body: dict, follow_pauses: bool,
                 idempotency_key: Optional[str]):
        self.client = client
        self.session_id = session_id
        self.plan = TurnPlan(session_id, body, idempotency_key, follow_pauses)
        _, self._turns = route("start_turn", id=session_id)
        _, self._events = route("stream_events", id=session_id)
        core = StreamCore({session_id: 0}, client.stream_options, self.plan.stop_after, self.plan.skip)
        self.stream = EventStream(client, core, self._open)

    @property
    def turn_id(self) -> Optional[str]:
        return self.plan.turn_id

    @property
    def result(self) -> Optional[dict]:
        return self.plan.result

    @property
    def queued(self) -> Optional[dict]:
        return self.plan.queued

    def close(self) -> None:
        self.stream.close()

    def _open(self, core: StreamCore) -> Any:
        plan = self.plan
        c = self.client
        if not plan.posted:
            plan.posted = True
            r = c._send("POST", self._turns, body=plan.body, idempotency_key=plan.key,
                        accept="text/event-stream", stream=True)
            if isinstance(r, _Answer):
                plan.accepted(r.value, True)
                if plan.queued:
                    return _Answer(plan.queued, end=True)
            return r
        if core.last_seq(self.session_id) == 0 and plan.turn_id is None:
            plan.accepted(c._send("POST", self._turns, body=plan.body, idempotency_key=plan.key), False)
        if plan.queued:
            return _Answer(plan.queued, end=True)
        headers, query = plan.session_stream_request(core)
        return c._send("GET", self._events, headers=headers, query=query, max_retries=0,
                       accept="text/event-stream", stream=True)

    def _until_decidable(self, ids: List[str]) -> None:
        """A pause's items can be decided once the server lists them, just
        after its turn_end: a few short polls until the session's pending
        items hold every one of `ids`."""
        for i in range(12):
            have = {p.get("id") for p in self.client.list_pending(self.session_id).get("items", [])}
            if all(x in have for x in ids):
                return
            self.client._wait(min(25 * 2 ** i, 1000))

    def __iter__(self) -> Iterator[dict]:
        saw_queued = False
        for ev in self.stream:
            saw_queued = saw_queued or ev.get("type") == "queued"
            ids = self.plan.paused_end(ev)
            if ids:
                self._until_decidable(ids)
            yield ev
        if self.plan.queued and not saw_queued:
            yield self.plan.queued
