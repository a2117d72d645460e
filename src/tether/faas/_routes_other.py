"""The endpoints' routes (an endpoint's token), the two WebSockets, and the open pages."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, Response
from starlette.websockets import WebSocket

from tether.exceptions import (
    FaasNotFoundError,
)
from tether.faas._api import Api, _error, refuse, serve_ws
from tether.faas._openapi import openapi
from tether.faas._queues import Socket
from tether.faas._validate import check_id
from tether.faas._web import PAGE


async def endpoint_function(api: Api, request: Request) -> Response:
    try:
        eid, user = await api.endpoint_of(request.headers)
        fid = api.param(request, 'function_id')
        # The owner's, or a function shared with a user who sent a task here.
        row = await api.repo.shares.function_for_endpoint(fid, eid, user)
        if row is None:
            raise FaasNotFoundError(f'function {fid} not found')
        return Response(
            bytes(row['body']),
            media_type='application/octet-stream',
            headers={'x-tether-serializer': row['serializer']},
        )
    except Exception as e:
        return _error(e)


async def endpoint_status(api: Api, request: Request) -> Response:
    try:
        eid, user = await api.endpoint_of(request.headers)
        rows = await api.repo.endpoints(user, [eid])
        if not rows:
            raise FaasNotFoundError(f'endpoint {eid} not found')
        return JSONResponse(rows[0])
    except Exception as e:
        return _error(e)


async def ws_endpoint(api: Api, websocket: WebSocket) -> None:
    async def admit() -> tuple[str, Session]:
        eid, user = await api.endpoint_of(websocket.headers)
        return user, lambda sock: api.service.endpoint_session(sock, eid, user)

    await _open(api, websocket, admit)


async def ws_results(api: Api, websocket: WebSocket) -> None:
    async def admit() -> tuple[str, Session]:
        gid = check_id(websocket.path_params['task_group_id'], 'task_group_id')
        user = await api.user_of(websocket.headers)
        if not await api.repo.owns_task_group(gid, user):
            raise FaasNotFoundError(f'task group {gid} not found')
        return user, lambda sock: api.service.result_session(sock, user, gid)

    await _open(api, websocket, admit)


Session = Callable[[Socket], Awaitable[None]]


async def _open(
    api: Api, websocket: WebSocket, admit: Callable[[], Awaitable[tuple[str, Session]]]
) -> None:
    """Serve a WebSocket whose user ``admit`` names (or refuse it with why), counted
    against the user's open WebSockets."""
    try:
        user, session = await admit()
        api.sockets.take(user)
    except Exception as e:
        await refuse(websocket, e)
        return
    try:
        await websocket.accept()
        await serve_ws(websocket, session)
    finally:
        api.sockets.give(user)


async def page(api: Api, request: Request) -> Response:
    return HTMLResponse(PAGE)


async def health(api: Api, request: Request) -> Response:
    return JSONResponse({'ok': True, 'max_payload_bytes': api.service.config.max_payload_bytes})


async def openapi_json(api: Api, request: Request) -> Response:
    return JSONResponse(openapi())
