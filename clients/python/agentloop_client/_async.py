"""The asyncio client, on asyncio streams (HTTP/1.1, one connection per
request)."""

from __future__ import annotations

import asyncio
import json
import ssl
from typing import Any, AsyncIterator, Callable, Dict, List, Mapping, Optional, Tuple

from ._api import Api, _turn_body
from ._core import (APIConnectionError, APIError, APITimeoutError, SSEParser, StreamCore, TurnPlan,
                    make_api_error, new_key, route)
from ._sync import _Answer, _Base, _body, _json


class _Body:
    """The body of an answer: Content-Length, chunked, or up to EOF."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, headers: Dict[str, str]):
        self.reader = reader
        self.writer = writer
        self.chunked = "chunked" in headers.get("transfer-encoding", "").lower()
        cl = headers.get("content-length")
        self.left: Optional[int] = int(cl) if cl is not None and not self.chunked else None
        self.chunk_left = 0
        self.done = False

    async def read_some(self) -> bytes:
        if self.done:
            return b""
        r = self.reader
        if self.chunked:
            if self.chunk_left == 0:
                line = await r.readline()
                if not line:
                    raise APIConnectionError("the connection closed inside a chunked body")
                size = int(line.split(b";")[0].strip() or b"0", 16)
                if size == 0:
                    self.done = True
                    return b""
                self.chunk_left = size
            data = await r.read(self.chunk_left)
            if not data:
                raise APIConnectionError("the connection closed inside a chunk")
            self.chunk_left -= len(data)
            if self.chunk_left == 0:
                await r.readexactly(2)
            return data
        if self.left is not None:
            if self.left == 0:
                self.done = True
                return b""
            data = await r.read(min(self.left, 65536))
            if not data:
                raise APIConnectionError("the connection closed before the end of the body")
            self.left -= len(data)
            return data
        data = await r.read(65536)
        if not data:
            self.done = True
        return data

    async def read_all(self) -> bytes:
        out = []
        while True:
            d = await self.read_some()
            if not d:
                return b"".join(out)
            out.append(d)

    def close(self) -> None:
        self.writer.close()


class AsyncClient(_Base, Api):
    """The asyncio client: the same methods as Client, awaited; streams are
    async iterables."""

    async def _wait(self, ms: float) -> None:
        if self._sleep is not None:
            r = self._sleep(ms / 1000.0)
            if asyncio.iscoroutine(r):
                await r
        else:
            await asyncio.sleep(ms / 1000.0)

    async def _exchange(self, method: str, target: str, headers: Dict[str, str],
                        data: Optional[bytes]) -> Tuple[int, Dict[str, str], _Body]:
        ctx = ssl.create_default_context() if self._scheme == "https" else None
        reader, writer = await asyncio.open_connection(self._host, self._port, ssl=ctx)
        try:
            lines = ["%s %s HTTP/1.1" % (method, target)]
            hdrs = dict(headers, connection="close")
            if data is not None:
                hdrs["content-length"] = str(len(data))
            lines += ["%s: %s" % (k, v) for k, v in hdrs.items()]
            writer.write(("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + (data or b""))
            await writer.drain()
            status_line = await reader.readline()
            parts = status_line.decode("latin-1").split(" ", 2)
            if len(parts) < 2 or not parts[0].startswith("HTTP/"):
                raise APIConnectionError("not an HTTP answer: %r" % status_line[:80])
            status = int(parts[1])
            rh: Dict[str, str] = {}
            while True:
                line = await reader.readline()
                if not line:
                    raise APIConnectionError("the connection closed inside the headers")
                if line in (b"\r\n", b"\n"):
                    break
                k, _, v = line.decode("latin-1").partition(":")
                rh[k.strip().lower()] = v.strip()
            return status, rh, _Body(reader, writer, rh)
        except BaseException:
            writer.close()
            raise

    async def _send(self, method: str, path: str, *, query: Optional[Mapping[str, Any]] = None,
                    body: Any = None, headers: Optional[Mapping[str, str]] = None,
                    idempotency_key: Optional[str] = None, timeout: Optional[float] = None,
                    max_retries: Optional[int] = None, accept: str = "application/json",
                    stream: bool = False) -> Any:
        """As Client._send; an open stream is returned as a _Body."""
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
            try:
                status, rh, b = await asyncio.wait_for(self._exchange(method, target, hdrs, data), t)
                keep = False
                try:
                    if 200 <= status < 300:
                        if stream and rh.get("content-type", "").startswith("text/event-stream"):
                            keep = True
                            return b
                        raw = await asyncio.wait_for(b.read_all(), t)
                        if accept == "text/plain":
                            return raw.decode("utf-8", "replace")
                        parsed = _json(raw, status)
                        return _Answer(parsed) if stream else parsed
                    err: BaseException = make_api_error(status, await asyncio.wait_for(b.read_all(), t), rh)
                finally:
                    if not keep:
                        b.close()
            except asyncio.TimeoutError as e:
                err = APITimeoutError("%s %s timed out" % (method, path))
                err.__cause__ = e
            except APIConnectionError as e:
                err = e
            except (OSError, ValueError, asyncio.IncompleteReadError) as e:
                err = APIConnectionError("%s %s: %s" % (method, path, e))
                err.__cause__ = e
            delay = self.retry.delay_after(err, attempt, retries)
            if delay is None:
                raise err
            await self._wait(delay)
            attempt += 1

    async def request(self, method: str, path: str, **kw: Any) -> Any:
        return await self._send(method, path, **kw)

    async def _call(self, name: str, params: Optional[Mapping[str, Any]] = None, **kw: Any) -> Any:
        method, path = route(name, **(params or {}))
        return await self._send(method, path, **kw)

    async def iter_sessions(self, agent: Optional[str] = None, status: Optional[str] = None,
                            limit: Optional[int] = None) -> AsyncIterator[dict]:
        cursor = None
        while True:
            page = await self.list_sessions(agent, status, limit, cursor)
            for s in page["items"]:
                yield s
            cursor = page.get("next_cursor")
            if not cursor:
                return

    async def wait_for_turn(self, id: str, turn: str, poll_timeout_s: int = 30) -> dict:
        while True:
            r = await self.wait_turn(id, turn, poll_timeout_s)
            if r.get("status") == "done":
                return r

    def stream_turn(self, id: str, input: Optional[str] = None, *, continue_: bool = False,
                    on_busy: Optional[str] = None, follow_pauses: bool = True,
                    idempotency_key: Optional[str] = None) -> "AsyncTurnStream":
        return AsyncTurnStream(self, id, _turn_body(input, continue_, on_busy), follow_pauses, idempotency_key)

    def stream_events(self, id: str, after: int = 0,
                      stop_after: Optional[Callable[[dict], bool]] = None) -> "AsyncEventStream":
        _, path = route("stream_events", id=id)

        async def open_(core: StreamCore) -> Any:
            seq = core.last_seq(id)
            return await self._send("GET", path, headers={"last-event-id": str(seq)} if seq else None,
                                    query=None if seq else {"after": 0}, max_retries=0,
                                    accept="text/event-stream", stream=True)

        return AsyncEventStream(self, StreamCore({id: after}, self.stream_options, stop_after), open_)

    def stream_sessions(self, ids: List[str], after: Optional[Mapping[str, int]] = None,
                        stop_after: Optional[Callable[[dict], bool]] = None) -> "AsyncEventStream":
        if not ids:
            raise ValueError("stream_sessions: ids required")
        _, path = route("stream_sessions")

        async def open_(core: StreamCore) -> Any:
            q = {"sessions": ",".join(ids), "after": ",".join("%s:%d" % (s, core.last_seq(s)) for s in ids)}
            return await self._send("GET", path, query=q, max_retries=0, accept="text/event-stream", stream=True)

        cursors = {s: (after or {}).get(s, 0) for s in ids}
        return AsyncEventStream(self, StreamCore(cursors, self.stream_options, stop_after), open_)


class AsyncEventStream:
    """The asyncio EventStream: same resume rules; iterate it once with
    `async for`."""

    def __init__(self, client: AsyncClient, core: StreamCore, open_: Callable[[StreamCore], Any]):
        self.client = client
        self.core = core
        self._open = open_
        self._body: Optional[_Body] = None
        self._closed = False

    @property
    def reconnects(self) -> int:
        return self.core.reconnects

    @property
    def cursors(self) -> Dict[str, int]:
        return self.core.cursors

    def close(self) -> None:
        self._closed = True
        if self._body is not None:
            self._body.close()

    async def __aiter__(self) -> AsyncIterator[dict]:
        core = self.core
        idle = core.options.idle_timeout_s
        while not self._closed:
            delay = core.reconnect_delay()
            if delay is not None:
                await self.client._wait(delay)
            core.begin_connection()
            try:
                opened = await self._open(core)
            except (APIError, APIConnectionError) as e:
                core.open_failed(e)
                continue
            if isinstance(opened, _Answer):
                if opened.end:
                    return
                continue
            body: _Body = opened
            self._body = body
            parser = SSEParser()
            err: Optional[BaseException] = None
            try:
                while True:
                    try:
                        chunk = await asyncio.wait_for(body.read_some(), idle if idle > 0 else None)
                    except asyncio.TimeoutError as e:
                        raise APIConnectionError("the event stream was silent too long") from e
                    except (OSError, asyncio.IncompleteReadError, ValueError) as e:
                        raise APIConnectionError("the event stream dropped: %s" % e) from e
                    if not chunk:
                        break
                    stop = False
                    for frame in parser.feed(chunk.decode("utf-8", "replace")):
                        ev = core.on_frame(frame)
                        if core.control:
                            stop = True
                            break
                        if ev is None:
                            continue
                        yield ev
                        if core.stopped:
                            return
                    if stop:
                        break
            except APIConnectionError as e:
                err = e
            finally:
                self._body = None
                body.close()
            if self._closed:
                return
            core.dropped(err)


class AsyncTurnStream:
    """The asyncio TurnStream."""

    def __init__(self, client: AsyncClient, session_id: str, body: dict, follow_pauses: bool,
                 idempotency_key: Optional[str]):
        self.client = client
        self.session_id = session_id
        self.plan = TurnPlan(session_id, body, idempotency_key, follow_pauses)
        _, self._turns = route("start_turn", id=session_id)
        _, self._events = route("stream_events", id=session_id)
        core = StreamCore({session_id: 0}, client.stream_options, self.plan.stop_after, self.plan.skip)
        self.stream = AsyncEventStream(client, core, self._open)

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

    async def _open(self, core: StreamCore) -> Any:
        plan = self.plan
        c = self.client
        if not plan.posted:
            plan.posted = True
            r = await c._send("POST", self._turns, body=plan.body, idempotency_key=plan.key,
                              accept="text/event-stream", stream=True)
            if isinstance(r, _Answer):
                plan.accepted(r.value, True)
                if plan.queued:
                    return _Answer(plan.queued, end=True)
            return r
        if core.last_seq(self.session_id) == 0 and plan.turn_id is None:
            plan.accepted(await c._send("POST", self._turns, body=plan.body, idempotency_key=plan.key), False)
        if plan.queued:
            return _Answer(plan.queued, end=True)
        headers, query = plan.session_stream_request(core)
        return await c._send("GET", self._events, headers=headers, query=query, max_retries=0,
                             accept="text/event-stream", stream=True)

    async def _until_decidable(self, ids: List[str]) -> None:
        for i in range(12):
            have = {p.get("id") for p in (await self.client.list_pending(self.session_id)).get("items", [])}
            if all(x in have for x in ids):
                return
            await self.client._wait(min(25 * 2 ** i, 1000))

    async def __aiter__(self) -> AsyncIterator[dict]:
        saw_queued = False
        async for ev in self.stream:
            saw_queued = saw_queued or ev.get("type") == "queued"
            ids = self.plan.paused_end(ev)
            if ids:
                await self._until_decidable(ids)
            yield ev
        if self.plan.queued and not saw_queued:
            yield self.plan.queued
