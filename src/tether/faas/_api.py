"""What the service's routes share (Starlette): who is asking, bodies within limits,
per-user bounds, errors as JSON, WebSocket sessions.

Every route except ``/``, ``/health`` and ``/openapi.json`` needs ``Authorization:
Bearer <token>``: a user token for the SDK's routes, an endpoint token for the two
endpoint routes. Errors are JSON ``{"error": code, "message": text}`` with the HTTP
status of the table in ``docs/faas.md``; WebSockets are closed with ``4000 + status``.
"""

from __future__ import annotations

import contextlib
import functools
import json
import logging
import math
from collections.abc import Awaitable, Callable
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.websockets import WebSocket, WebSocketDisconnect

from tether.exceptions import (
    FaasAuthenticationError,
    FaasBadRequestError,
    FaasPayloadTooLargeError,
    FaasRateLimitError,
    ProtocolError,
    TaskPending,
)
from tether.faas._core import Service, Socket
from tether.faas._errors import status_of
from tether.faas._validate import check_id, loads

__all__ = ['Api', 'PerUser', 'serve_ws', 'refuse', 'task_view']

logger = logging.getLogger(__name__)


def _status_of(e: Exception) -> tuple[int, str]:
    return status_of(e)


def _error(e: Exception) -> JSONResponse:
    status, code = _status_of(e)
    if status == 500:
        logger.exception('internal error')
    message = str(e) if status != 500 else 'internal error (see the service log)'
    body: dict[str, Any] = {'error': code, 'message': message}
    headers = None
    if isinstance(e, TaskPending):
        body.update(task_id=e.task_id, status=e.status)
    elif isinstance(e, FaasRateLimitError):
        body['retry_after'] = e.retry_after
        headers = {'retry-after': str(max(1, math.ceil(e.retry_after)))}
    return JSONResponse(body, status_code=status, headers=headers)


class PerUser:
    """How many of something (requests in progress, open WebSockets) each user holds,
    with a bound: one more is refused with :class:`~tether.exceptions.FaasRateLimitError`
    (HTTP 429, WebSocket close 4429), so one user's excess never costs another user."""

    def __init__(self, limit: int, what: str, setting: str) -> None:
        self.limit = limit
        self.what = what
        self.setting = setting
        self.held: dict[str, int] = {}

    def take(self, user: str) -> None:
        n = self.held.get(user, 0)
        if n >= self.limit:
            raise FaasRateLimitError(
                f'this user already has {n} {self.what}, the most the service allows one '
                f'user ({self.setting}): wait for some to finish, then try again',
                retry_after=1.0,
            )
        self.held[user] = n + 1

    def give(self, user: str) -> None:
        n = self.held.get(user, 0) - 1
        if n > 0:
            self.held[user] = n
        else:
            self.held.pop(user, None)


def _bearer(headers: Any) -> str:
    value = str(headers.get('authorization', ''))
    scheme, _, token = value.partition(' ')
    if scheme.lower() != 'bearer' or not token:
        raise FaasAuthenticationError('missing token: send "Authorization: Bearer <token>"')
    return token.strip()


class Api:
    """What the routes share: the service, its limits, and who is asking."""

    def __init__(self, service: Service) -> None:
        self.service = service
        self.repo = service.repo
        self.max_body = service.config.max_request_bytes
        self.requests = PerUser(
            service.config.max_requests_per_user, 'requests in progress', 'max_requests_per_user'
        )
        self.sockets = PerUser(
            service.config.max_websockets_per_user, 'WebSockets open', 'max_websockets_per_user'
        )

    async def user_of(self, headers: Any) -> str:
        user = await self.repo.user_by_token(_bearer(headers))
        if user is None:
            raise FaasAuthenticationError('unknown or revoked token')
        return str(user)

    async def endpoint_of(self, headers: Any) -> tuple[str, str]:
        found = await self.repo.endpoint_by_token(_bearer(headers))
        if found is None:
            raise FaasAuthenticationError('unknown or revoked endpoint token')
        return found

    async def body_of(self, request: Request) -> bytes:
        max_body = self.max_body
        length = request.headers.get('content-length')
        if length is not None and int(length) > max_body:
            raise FaasPayloadTooLargeError(
                f'request of {length} bytes exceeds the service limit of {max_body} bytes: '
                'pass large objects by reference through a tether Store',
            )
        chunks = []
        total = 0
        async for chunk in request.stream():
            total += len(chunk)
            if total > max_body:
                raise FaasPayloadTooLargeError(
                    f'request exceeds the service limit of {max_body} bytes: pass large '
                    'objects by reference through a tether Store',
                )
            chunks.append(chunk)
        return b''.join(chunks)

    async def json_of(self, request: Request) -> dict[str, Any]:
        data = loads(await self.body_of(request) or b'{}', 'the request body')
        if not isinstance(data, dict):
            raise FaasBadRequestError('the request body must be a JSON object')
        return data

    def param(self, request: Request, name: str) -> str:
        return check_id(request.path_params[name], name)

    def route(
        self, fn: Callable[[Api, Request, str], Awaitable[Response]]
    ) -> Callable[[Request], Awaitable[Response]]:
        """A user's route: authenticated, counted against the user's requests in
        progress, errors answered as JSON."""

        async def handler(request: Request) -> Response:
            try:
                user = await self.user_of(request.headers)
                self.requests.take(user)
                try:
                    return await fn(self, request, user)
                finally:
                    self.requests.give(user)
            except Exception as e:
                return _error(e)

        return handler

    def bind(self, fn: Callable[..., Awaitable[Any]]) -> Callable[..., Awaitable[Any]]:
        """A route that authenticates by itself (or needs no token)."""
        return functools.partial(fn, self)


def task_view(row: dict[str, Any]) -> dict[str, Any]:
    header = json.loads(row['result_header']) if row.get('result_header') else {}
    view = {
        k: row[k]
        for k in ('task_id', 'task_group_id', 'endpoint_id', 'function_id', 'status', 'created')
    }
    view['finished'] = row.get('finished')
    view['acknowledged'] = bool(row.get('acknowledged'))
    view['attempts'] = row.get('attempts', 0)
    if 'error' in header:
        view['error'] = header['error']
    if 't' in header:
        view['timings'] = header['t']
    if 'retries' in header:  # workers lost while running it (it ran again)
        view['retries'] = header['retries']
    if 'block' in header:  # where it ran: Parsl block, host, batch job (SLURM_JOB_ID ...)
        view['block'] = header['block']
    output = header.get('output')
    if isinstance(output, dict):  # what it wrote (the endpoint's max_output_bytes of each)
        view['stdout'] = str(output.get('stdout', ''))
        view['stderr'] = str(output.get('stderr', ''))
    return view


async def serve_ws(websocket: WebSocket, session: Callable[[Socket], Awaitable[None]]) -> None:
    async def recv() -> bytes:
        message = await websocket.receive()
        if message['type'] == 'websocket.disconnect':
            raise WebSocketDisconnect(message.get('code', 1000))
        data = message.get('bytes')
        if data is None:
            raise ProtocolError('text WebSocket messages are not accepted: send frames')
        return bytes(data)

    sock = Socket(websocket.send_bytes, recv)
    code = 1000
    reason = ''
    try:
        await session(sock)
    except WebSocketDisconnect:
        return
    except Exception as e:
        status, _ = _status_of(e)
        code, reason = 4000 + status, str(e)[:120]
        if status == 500:
            logger.exception('WebSocket session failed')
    with contextlib.suppress(Exception):
        await websocket.close(code=code, reason=reason)


async def refuse(websocket: WebSocket, e: Exception) -> None:
    """Accept, then close with ``4000 + status``: the client learns why (a refused
    handshake would only say 403)."""
    await websocket.accept()
    await websocket.close(code=4000 + _status_of(e)[0], reason=str(e)[:120])
