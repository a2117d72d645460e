"""The service's HTTP and WebSocket interface (Starlette).

Every route except ``/``, ``/health`` and ``/openapi.json`` needs ``Authorization:
Bearer <token>``: a user token for the SDK's routes, an endpoint token for the two
endpoint routes. Errors are JSON ``{"error": code, "message": text}`` with the HTTP
status of the table in ``docs/faas.md``; WebSockets are closed with ``4000 + status``.
"""

from __future__ import annotations

import contextlib
import json
import logging
import math
from collections.abc import Awaitable, Callable
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, Response
from starlette.routing import Route, WebSocketRoute
from starlette.websockets import WebSocket, WebSocketDisconnect

from tether.exceptions import (
    FaasAuthenticationError,
    FaasBadRequestError,
    FaasNotFoundError,
    FaasPayloadTooLargeError,
    FaasRateLimitError,
    ProtocolError,
    TaskPending,
)
from tether.faas import _frames
from tether.faas._core import Service, Socket
from tether.faas._errors import status_of
from tether.faas._openapi import openapi
from tether.faas._validate import MAX_NAME, check_id, check_ids, check_name, loads
from tether.faas._web import PAGE

__all__ = ['PerUser', 'build_app']

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


def build_app(service: Service, lifespan: Any = None) -> Starlette:
    """The ASGI application over ``service``."""
    repo = service.repo
    max_body = service.config.max_request_bytes

    async def user_of(headers: Any) -> str:
        user = await repo.user_by_token(_bearer(headers))
        if user is None:
            raise FaasAuthenticationError('unknown or revoked token')
        return str(user)

    async def endpoint_of(headers: Any) -> tuple[str, str]:
        found = await repo.endpoint_by_token(_bearer(headers))
        if found is None:
            raise FaasAuthenticationError('unknown or revoked endpoint token')
        return found

    async def body_of(request: Request) -> bytes:
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

    async def json_of(request: Request) -> dict[str, Any]:
        data = loads(await body_of(request) or b'{}', 'the request body')
        if not isinstance(data, dict):
            raise FaasBadRequestError('the request body must be a JSON object')
        return data

    def param(request: Request, name: str) -> str:
        return check_id(request.path_params[name], name)

    requests = PerUser(
        service.config.max_requests_per_user, 'requests in progress', 'max_requests_per_user'
    )
    sockets = PerUser(
        service.config.max_websockets_per_user, 'WebSockets open', 'max_websockets_per_user'
    )

    def route(
        fn: Callable[[Request, str], Awaitable[Response]],
    ) -> Callable[[Request], Awaitable[Response]]:
        async def handler(request: Request) -> Response:
            try:
                user = await user_of(request.headers)
                requests.take(user)
                try:
                    return await fn(request, user)
                finally:
                    requests.give(user)
            except Exception as e:
                return _error(e)

        return handler

    async def whoami(request: Request, user: str) -> Response:
        return JSONResponse({'user_id': user, 'name': await repo.user_name(user)})

    async def register_function(request: Request, user: str) -> Response:
        frame = _frames.decode(await body_of(request), service.limits)
        if frame.type != _frames.FUNCTION or len(frame.payloads) != 1:
            raise ProtocolError('POST /v1/functions takes one FUNCTION frame with its body')
        serializer = str(frame.header.get('serializer', 'pickle'))
        if serializer not in ('pickle', 'source'):
            raise ProtocolError(f'unknown function serializer {serializer!r}')
        body = bytes(frame.payloads[0])
        if len(body) > service.config.max_payload_bytes:
            raise FaasPayloadTooLargeError(
                f'function body of {len(body)} bytes exceeds the limit of '
                f'{service.config.max_payload_bytes} bytes',
            )
        name = frame.header.get('name', '')
        if not isinstance(name, str):
            raise FaasBadRequestError('a function\'s "name" must be a string')
        name = name[:MAX_NAME]
        function_id = await repo.add_function(user, name, serializer, body)
        return JSONResponse({'function_id': function_id})

    async def get_function(request: Request, user: str) -> Response:
        fid = param(request, 'function_id')
        row = await repo.get_function(fid, user)
        if row is None:
            raise FaasNotFoundError(f'function {fid} not found')
        return JSONResponse({k: row[k] for k in ('function_id', 'name', 'serializer')})

    async def create_endpoint(request: Request, user: str) -> Response:
        data = await json_of(request)
        name = check_name(data.get('name'), 'an endpoint\'s "name"')
        endpoint_id, token = await repo.add_endpoint(user, name)
        return JSONResponse({'endpoint_id': endpoint_id, 'token': token})

    async def list_endpoints(request: Request, user: str) -> Response:
        return JSONResponse({'endpoints': await repo.endpoints(user)})

    async def get_endpoint(request: Request, user: str) -> Response:
        eid = param(request, 'endpoint_id')
        rows = await repo.endpoints(user, [eid])
        if not rows:
            raise FaasNotFoundError(f'endpoint {eid} not found')
        return JSONResponse(rows[0])

    async def delete_endpoint(request: Request, user: str) -> Response:
        eid = param(request, 'endpoint_id')
        await service.delete_endpoint(user, eid)
        return JSONResponse({'deleted': eid})

    async def create_task_group(request: Request, user: str) -> Response:
        return JSONResponse({'task_group_id': await repo.add_task_group(user)})

    async def get_task_group(request: Request, user: str) -> Response:
        gid = param(request, 'task_group_id')
        if not await repo.owns_task_group(gid, user):
            raise FaasNotFoundError(f'task group {gid} not found')
        return JSONResponse({'task_group_id': gid, 'tasks': await repo.group_tasks(user, gid)})

    async def submit(request: Request, user: str) -> Response:
        frame = _frames.decode(await body_of(request), service.limits)
        if frame.type != _frames.SUBMIT:
            raise ProtocolError('POST /v1/submit takes one SUBMIT frame')
        return JSONResponse(await service.submit(user, frame.header, frame.payloads))

    async def batch_status(request: Request, user: str) -> Response:
        ids = check_ids((await json_of(request)).get('task_ids', []), '"task_ids"')
        found: list[dict[str, Any]] = []
        for start in range(0, len(ids), 1000):
            found.extend(await repo.tasks(user, ids[start : start + 1000]))
        return JSONResponse({'tasks': [_task_view(r) for r in found]})

    async def get_task(request: Request, user: str) -> Response:
        tid = param(request, 'task_id')
        rows = await repo.tasks(user, [tid])
        if not rows:
            raise FaasNotFoundError(f'task {tid} not found')
        return JSONResponse(_task_view(rows[0]))

    async def get_result(request: Request, user: str) -> Response:
        tid = param(request, 'task_id')
        row = await repo.result(user, tid)
        if row is None:
            raise FaasNotFoundError(f'task {tid} not found')
        if row['status'] not in ('success', 'failed', 'cancelled'):
            raise TaskPending(tid, row['status'])
        if row['acknowledged']:
            raise FaasNotFoundError(f'the result of task {tid} was acknowledged and deleted')
        header = json.loads(row['result_header'])
        body = _frames.encode(_frames.RESULTS, header, [row['result'] or b''])
        return Response(body, media_type=_frames.CONTENT_TYPE)

    async def acknowledge(request: Request, user: str) -> Response:
        ids = check_ids((await json_of(request)).get('task_ids', []), '"task_ids"')
        await service.acknowledge(user, ids)
        return JSONResponse({'acknowledged': len(ids)})

    async def cancel(request: Request, user: str) -> Response:
        ids = check_ids((await json_of(request)).get('task_ids', []), '"task_ids"')
        return JSONResponse({'tasks': await service.cancel(user, ids)})

    async def recent(request: Request, user: str) -> Response:
        text = request.query_params.get('limit', '50')
        if not text.isdigit() or len(text) > 6:
            raise FaasBadRequestError(f'"limit" must be a whole number, not {text[:20]!r}')
        limit = max(1, min(int(text), 1000))
        return JSONResponse({'tasks': await repo.recent_tasks(user, limit)})

    async def endpoint_function(request: Request) -> Response:
        try:
            _eid, user = await endpoint_of(request.headers)
            fid = param(request, 'function_id')
            row = await repo.get_function(fid, user)
            if row is None:
                raise FaasNotFoundError(f'function {fid} not found')
            return Response(
                bytes(row['body']),
                media_type='application/octet-stream',
                headers={'x-tether-serializer': row['serializer']},
            )
        except Exception as e:
            return _error(e)

    async def endpoint_status(request: Request) -> Response:
        try:
            eid, user = await endpoint_of(request.headers)
            rows = await repo.endpoints(user, [eid])
            if not rows:
                raise FaasNotFoundError(f'endpoint {eid} not found')
            return JSONResponse(rows[0])
        except Exception as e:
            return _error(e)

    async def ws_endpoint(websocket: WebSocket) -> None:
        try:
            eid, user = await endpoint_of(websocket.headers)
            sockets.take(user)
        except Exception as e:
            await _refuse(websocket, e)
            return
        try:
            await websocket.accept()
            await _serve_ws(websocket, lambda sock: service.endpoint_session(sock, eid, user))
        finally:
            sockets.give(user)

    async def ws_results(websocket: WebSocket) -> None:
        gid = websocket.path_params['task_group_id']
        try:
            check_id(gid, 'task_group_id')
            user = await user_of(websocket.headers)
            if not await repo.owns_task_group(gid, user):
                raise FaasNotFoundError(f'task group {gid} not found')
            sockets.take(user)
        except Exception as e:
            await _refuse(websocket, e)
            return
        try:
            await websocket.accept()
            await _serve_ws(websocket, lambda sock: service.result_session(sock, user, gid))
        finally:
            sockets.give(user)

    async def page(request: Request) -> Response:
        return HTMLResponse(PAGE)

    async def health(request: Request) -> Response:
        return JSONResponse({'ok': True, 'max_payload_bytes': service.config.max_payload_bytes})

    async def openapi_json(request: Request) -> Response:
        return JSONResponse(openapi())

    routes = [
        Route('/', page),
        Route('/health', health),
        Route('/openapi.json', openapi_json),
        Route('/v1/whoami', route(whoami)),
        Route('/v1/functions', route(register_function), methods=['POST']),
        Route('/v1/functions/{function_id}', route(get_function)),
        Route('/v1/endpoints', route(create_endpoint), methods=['POST']),
        Route('/v1/endpoints', route(list_endpoints), methods=['GET']),
        Route('/v1/endpoints/{endpoint_id}', route(get_endpoint), methods=['GET']),
        Route('/v1/endpoints/{endpoint_id}', route(delete_endpoint), methods=['DELETE']),
        Route('/v1/task_groups', route(create_task_group), methods=['POST']),
        Route('/v1/task_groups/{task_group_id}', route(get_task_group)),
        Route('/v1/submit', route(submit), methods=['POST']),
        Route('/v1/tasks', route(recent)),
        Route('/v1/tasks/status', route(batch_status), methods=['POST']),
        Route('/v1/tasks/ack', route(acknowledge), methods=['POST']),
        Route('/v1/tasks/cancel', route(cancel), methods=['POST']),
        Route('/v1/tasks/{task_id}', route(get_task)),
        Route('/v1/tasks/{task_id}/result', route(get_result)),
        Route('/v1/endpoint/functions/{function_id}', endpoint_function),
        Route('/v1/endpoint/status', endpoint_status),
        WebSocketRoute('/v1/endpoint/connect', ws_endpoint),
        WebSocketRoute('/v1/task_groups/{task_group_id}/results', ws_results),
    ]
    return Starlette(routes=routes, lifespan=lifespan)


def _task_view(row: dict[str, Any]) -> dict[str, Any]:
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
    return view


async def _serve_ws(websocket: WebSocket, session: Callable[[Socket], Awaitable[None]]) -> None:
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


async def _refuse(websocket: WebSocket, e: Exception) -> None:
    """Accept, then close with ``4000 + status``: the client learns why (a refused
    handshake would only say 403)."""
    await websocket.accept()
    await websocket.close(code=4000 + _status_of(e)[0], reason=str(e)[:120])
