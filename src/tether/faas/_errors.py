"""The service's errors as HTTP statuses and codes (REST answers, WebSocket close codes
``4000 + status``, and failed submissions on a result stream)."""

from __future__ import annotations

from tether.exceptions import (
    FaasAuthenticationError,
    FaasBadRequestError,
    FaasConnectionError,
    FaasNotFoundError,
    FaasPayloadTooLargeError,
    FaasRateLimitError,
    FunctionNotAllowedError,
    TaskPending,
    WireError,
)

__all__ = ['STATUS', 'status_of']

STATUS: list[tuple[type[Exception], int, str]] = [
    (FaasAuthenticationError, 401, 'unauthorized'),
    (FaasNotFoundError, 404, 'not-found'),
    (FaasPayloadTooLargeError, 413, 'payload-too-large'),
    (FunctionNotAllowedError, 403, 'function-not-allowed'),
    (TaskPending, 409, 'pending'),
    (FaasRateLimitError, 429, 'too-many-requests'),
    (FaasBadRequestError, 400, 'bad-request'),
    (FaasConnectionError, 503, 'unavailable'),
    (WireError, 400, 'bad-request'),
    (ValueError, 400, 'bad-request'),
    (KeyError, 400, 'bad-request'),
    (TypeError, 400, 'bad-request'),
]


def status_of(e: Exception) -> tuple[int, str]:
    """``(HTTP status, error code)`` of an exception (500, ``'internal'`` if unknown)."""
    for cls, status, code in STATUS:
        if isinstance(e, cls):
            return status, code
    return 500, 'internal'
