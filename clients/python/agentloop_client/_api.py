"""The routes as methods, shared by Client and AsyncClient: each returns
what `_call` returns (the answer, or a coroutine of it for AsyncClient)."""

from __future__ import annotations

from typing import Any, Dict, Mapping, Optional


def _clean(**kw: Any) -> Dict[str, Any]:
    return {k: v for k, v in kw.items() if v is not None}


def _turn_body(input: Optional[str], continue_: bool, on_busy: Optional[str]) -> dict:
    if continue_:
        body: Dict[str, Any] = {"continue": True}
    elif input:
        body = {"input": input}
    else:
        raise ValueError("a turn needs input or continue_=True")
    if on_busy:
        body["on_busy"] = on_busy
    return body


class Api:
    def _call(self, name: str, params: Optional[Mapping[str, Any]] = None, **kw: Any) -> Any:
        raise NotImplementedError
    # --- server
    def health(self) -> Any: return self._call("health")
    def ready(self) -> Any: return self._call("ready")
    def openapi(self) -> Any: return self._call("openapi")
    def metrics(self) -> Any: return self._call("metrics", accept="text/plain")

    # --- agents
    def list_agents(self) -> Any: return self._call("list_agents")
    def get_agent(self, name: str) -> Any: return self._call("get_agent", {"name": name})

    # --- sessions
    def create_session(self, agent: Optional[str] = None, title: Optional[str] = None,
                       metadata: Optional[dict] = None, workspace: Optional[str] = None, *,
                       idempotency_key: Optional[str] = None) -> Any:
        return self._call("create_session", body=_clean(agent=agent, title=title, metadata=metadata,
                                                         workspace=workspace),
                          idempotency_key=idempotency_key)

    def list_sessions(self, agent: Optional[str] = None, status: Optional[str] = None,
                      limit: Optional[int] = None, cursor: Optional[str] = None) -> Any:
        return self._call("list_sessions", query=_clean(agent=agent, status=status, limit=limit, cursor=cursor))

    def get_session(self, id: str) -> Any: return self._call("get_session", {"id": id})

    def update_session(self, id: str, **body: Any) -> Any:
        return self._call("update_session", {"id": id}, body=body)

    def delete_session(self, id: str) -> Any: return self._call("delete_session", {"id": id})

    def list_messages(self, id: str, limit: Optional[int] = None, cursor: Optional[str] = None) -> Any:
        return self._call("list_messages", {"id": id}, query=_clean(limit=limit, cursor=cursor))

    def list_pending(self, id: str) -> Any: return self._call("list_pending", {"id": id})
    def get_mcp(self, id: str) -> Any: return self._call("get_mcp", {"id": id})

    def compact(self, id: str, focus: Optional[str] = None) -> Any:
        return self._call("compact", {"id": id}, body=_clean(focus=focus))

    # --- turns
    def start_turn(self, id: str, input: Optional[str] = None, *, continue_: bool = False,
                   on_busy: Optional[str] = None, idempotency_key: Optional[str] = None) -> Any:
        """Starts a turn with `input` (or `continue_=True`); 202 {id, ...} or
        {status: "queued", ...} with on_busy="enqueue"."""
        return self._call("start_turn", {"id": id}, body=_turn_body(input, continue_, on_busy),
                          idempotency_key=idempotency_key)

    def get_turn(self, id: str, turn: str) -> Any: return self._call("get_turn", {"id": id, "turn": turn})

    def wait_turn(self, id: str, turn: str, timeout_s: int = 30) -> Any:
        """One long poll (0-300 s)."""
        return self._call("wait_turn", {"id": id, "turn": turn}, query={"timeout_s": timeout_s},
                          timeout=timeout_s + 30)

    def cancel_turn(self, id: str, turn: str) -> Any:
        return self._call("cancel_turn", {"id": id, "turn": turn})

    # --- events
    def list_events(self, id: str, after: Optional[int] = None, limit: Optional[int] = None) -> Any:
        return self._call("list_events", {"id": id}, query=_clean(after=after, limit=limit))

    # --- approvals and questions
    def list_approvals(self) -> Any: return self._call("list_approvals")
    def get_approval(self, id: str) -> Any: return self._call("get_approval", {"id": id})
    def get_approval_diff(self, id: str) -> Any: return self._call("get_approval_diff", {"id": id})

    def decide_approval(self, id: str, decision: str, *, edited_args: Optional[dict] = None,
                        reason: Optional[str] = None, scope: Optional[str] = None,
                        idempotency_key: Optional[str] = None) -> Any:
        """decision "approve" or "deny"; scope "once" or "session"."""
        return self._call("decide_approval", {"id": id},
                          body=_clean(decision=decision, edited_args=edited_args, reason=reason, scope=scope),
                          idempotency_key=idempotency_key)

    def approve(self, id: str, *, edited_args: Optional[dict] = None, scope: Optional[str] = None) -> Any:
        return self.decide_approval(id, "approve", edited_args=edited_args, scope=scope)

    def deny(self, id: str, reason: Optional[str] = None) -> Any:
        return self.decide_approval(id, "deny", reason=reason)

    def list_questions(self) -> Any: return self._call("list_questions")
    def get_question(self, id: str) -> Any: return self._call("get_question", {"id": id})

    def answer_question(self, id: str, answer: str, *, idempotency_key: Optional[str] = None) -> Any:
        return self._call("answer_question", {"id": id}, body={"answer": answer},
                          idempotency_key=idempotency_key)
