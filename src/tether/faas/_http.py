"""The SDK's HTTP calls: where the service is, retries, and errors mapped to ours.

A request that fails because the service is unreachable or answers 503 (its broker or
database is down, or it is restarting) is retried with backoff until ``retry_deadline``
seconds have passed; one refused with 429 (a per-user limit of the service) is sent again
after the ``Retry-After`` the service asked for, until the same deadline, then raises
:class:`~tether.exceptions.FaasRateLimitError`; every other error is raised at once as a
:class:`~tether.exceptions.FaasError` subclass. Retrying is safe: submissions carry task
ids chosen by the SDK, so the service ignores a batch it already has.
"""

from __future__ import annotations

import json
import os
import random
import time
from collections.abc import Callable, Sequence
from typing import Any

from tether.exceptions import (
    ConfigError,
    FaasConnectionError,
    FaasError,
    FaasRateLimitError,
    TaskPending,
)
from tether.faas._config import read_dev_file
from tether.faas._errors import STATUS

__all__ = [
    'error_from',
    'locate',
    'raise_for',
    'request_with_retry',
    'retry_after',
    'split_urls',
    'ws_url',
]

# The client's side of the service's table of errors (tether.faas._errors.STATUS): the
# exception of each error code, and the code that an answer without one (a proxy's) means
# by its 4xx status (not 409: a pending task says so in its body).
_BY_CODE: dict[str, type[FaasError]] = {
    code: cls for cls, _, code in STATUS if issubclass(cls, FaasError)
}
_BY_STATUS = {
    status: code
    for cls, status, code in STATUS
    if issubclass(cls, FaasError) and status < 500 and cls is not TaskPending
}


def split_urls(service_url: str | Sequence[str]) -> list[str]:
    """The service URLs of ``service_url``: one URL, several separated by commas (the
    replicas of one service, in the order to try them), or a list of URLs."""
    items = service_url.split(',') if isinstance(service_url, str) else list(service_url)
    urls = [str(u).strip().rstrip('/') for u in items if str(u).strip()]
    if not urls:
        raise ConfigError('no service URL given (service_url is empty)')
    for u in urls:
        if not u.startswith(('http://', 'https://')):
            raise ConfigError(f'a service URL must start with http:// or https://, not {u!r}')
    return urls


def locate(service_url: str | None, token: str | None) -> tuple[str, str, dict[str, Any]]:
    """Find the service: arguments, then ``$TETHER_FAAS_URL``/``$TETHER_FAAS_TOKEN``, then
    the file of a running ``tether faas dev`` of this user. Returns ``(url, token, dev)``
    where ``dev`` is the dev file's content (or empty)."""
    url = service_url or os.environ.get('TETHER_FAAS_URL')
    tok = token or os.environ.get('TETHER_FAAS_TOKEN')
    dev: dict[str, Any] = {}
    if not url or not tok:
        dev = read_dev_file() or {}
        url = url or dev.get('url')
        tok = tok or dev.get('token')
    if not url or not tok:
        raise ConfigError(
            'no function service configured: start `tether faas dev` (this user, this '
            'machine), or pass service_url= and token= (or set TETHER_FAAS_URL and '
            'TETHER_FAAS_TOKEN)',
        )
    return url.rstrip('/'), tok, dev


def ws_url(http_url: str, path: str) -> str:
    """The WebSocket URL of ``path`` on the service at ``http_url``."""
    if http_url.startswith('https://'):
        return 'wss://' + http_url[len('https://') :] + path
    return 'ws://' + http_url.removeprefix('http://') + path


def error_from(status: int, body: bytes, what: str) -> FaasError:
    """The exception for an error answer of the service."""
    data: dict[str, Any] = {}
    try:
        data = json.loads(body)
        code, message = str(data['error']), str(data['message'])
    except Exception:
        code, message = _BY_STATUS.get(status, ''), body[:200].decode(errors='replace')
    if code == 'pending':
        return TaskPending(str(data.get('task_id', '')), str(data.get('status', 'pending')))
    cls = _BY_CODE.get(code) or _BY_CODE.get(_BY_STATUS.get(status, ''), FaasError)
    if cls is FaasRateLimitError:
        wait = data.get('retry_after') if isinstance(data, dict) else None
        return FaasRateLimitError(
            f'{what}: {message} (HTTP {status})',
            float(wait) if isinstance(wait, (int, float)) else 1.0,
        )
    return cls(f'{what}: {message} (HTTP {status})')


def raise_for(response: Any, what: str) -> None:
    if response.status_code >= 400:
        raise error_from(response.status_code, response.content, what)


def request_with_retry(
    http: Any,
    method: str,
    path: str,
    what: str,
    retry_deadline: float,
    *,
    failover: Callable[[], None] | None = None,
    **kwargs: Any,
) -> Any:
    """Send a request with ``http`` (an ``httpx.Client``), retrying as described above;
    ``failover`` is called before each retry of an unreachable or unavailable (503)
    service (the SDK's :class:`Client` moves to the next of its URLs)."""
    import httpx

    deadline = time.monotonic() + retry_deadline
    delay = 0.05
    while True:
        try:
            response = http.request(method, path, **kwargs)
        except httpx.TransportError as e:
            if time.monotonic() + delay > deadline:
                raise FaasConnectionError(
                    f'{what}: the service at {http.base_url} is unreachable ({e!r})'
                ) from e
            if failover is not None:
                failover()
        else:
            if response.status_code == 429:
                # A per-user limit of the service: wait as long as it asks (bounded), then
                # send again, until the deadline.
                wait = retry_after(response)
                if time.monotonic() + wait > deadline:
                    raise_for(response, what)
                time.sleep(wait)
                continue
            if response.status_code != 503:
                raise_for(response, what)
                return response
            if time.monotonic() + delay > deadline:
                raise_for(response, what)
            if failover is not None:
                failover()
        time.sleep(delay)
        delay = min(delay * 2, 2.0)


MAX_RETRY_AFTER = 30.0
"""Longest wait the SDK grants a ``Retry-After`` before sending again."""


def retry_after(response: Any) -> float:
    """The seconds a 429 answer asks to wait (``Retry-After``), within
    ``[0.05, MAX_RETRY_AFTER]`` and with a little jitter, so that many clients refused
    together do not come back together."""
    try:
        wait = float(response.headers.get('retry-after', '1'))
    except ValueError:  # an HTTP date: not sent by this service
        wait = 1.0
    wait = min(max(wait, 0.05), MAX_RETRY_AFTER)
    return wait * (1.0 + random.random() / 4)
