"""agentloop_client: a client of the agentloop HTTP API (docs/clients.md),
synchronous (`Client`) and asyncio (`AsyncClient`), on the standard
library only. Requests are retried with backoff (connection errors, 408,
429, 5xx), honouring Retry-After, with one Idempotency-Key per logical POST;
event streams resume after a dropped connection by Last-Event-ID and never
yield an event twice."""

from ._async import AsyncClient, AsyncEventStream, AsyncTurnStream
from ._core import (PAUSED_STOPS, ROUTES, AgentloopError, APIConnectionError, APIError,
                    APITimeoutError, AuthenticationError, BadRequestError, ConflictError, GoneError,
                    InternalServerError, NotFoundError, PermissionDeniedError, RateLimitError,
                    SSEParser, StreamOptions, StreamResumeError, UnprocessableEntityError,
                    backoff_ms, is_retryable, make_api_error, retry_after_ms)
from ._sync import Client, EventStream, TurnStream

__version__ = "0.1.0"

__all__ = [
    "AsyncClient", "AsyncEventStream", "AsyncTurnStream", "Client", "EventStream", "TurnStream",
    "StreamOptions", "SSEParser", "ROUTES", "PAUSED_STOPS",
    "AgentloopError", "APIError", "APIConnectionError", "APITimeoutError", "AuthenticationError",
    "BadRequestError", "ConflictError", "GoneError", "InternalServerError", "NotFoundError",
    "PermissionDeniedError", "RateLimitError", "StreamResumeError", "UnprocessableEntityError",
    "backoff_ms", "is_retryable", "make_api_error", "retry_after_ms",
]
