"""The SDK's routes (a user's token): functions, endpoints, task groups and tasks."""

from __future__ import annotations

import json
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from tether.exceptions import (
    FaasBadRequestError,
    FaasNotFoundError,
    FaasPayloadTooLargeError,
    ProtocolError,
    TaskPending,
)
from tether.faas import _frames
from tether.faas._api import Api, task_view
from tether.faas._replicas import forget_function
from tether.faas._validate import MAX_NAME, check_ids, check_name


async def whoami(api: Api, request: Request, user: str) -> Response:
    return JSONResponse({'user_id': user, 'name': await api.repo.user_name(user)})


async def register_function(api: Api, request: Request, user: str) -> Response:
    frame = _frames.decode(await api.body_of(request), api.service.limits)
    if frame.type != _frames.FUNCTION or len(frame.payloads) != 1:
        raise ProtocolError('POST /v1/functions takes one FUNCTION frame with its body')
    serializer = str(frame.header.get('serializer', 'pickle'))
    if serializer not in ('pickle', 'source'):
        raise ProtocolError(f'unknown function serializer {serializer!r}')
    body = bytes(frame.payloads[0])
    if len(body) > api.service.config.max_payload_bytes:
        raise FaasPayloadTooLargeError(
            f'function body of {len(body)} bytes exceeds the limit of '
            f'{api.service.config.max_payload_bytes} bytes',
        )
    name = frame.header.get('name', '')
    if not isinstance(name, str):
        raise FaasBadRequestError('a function\'s "name" must be a string')
    name = name[:MAX_NAME]
    function_id = await api.repo.add_function(user, name, serializer, body)
    return JSONResponse({'function_id': function_id})


async def get_function(api: Api, request: Request, user: str) -> Response:
    fid = api.param(request, 'function_id')
    row = await api.repo.shares.shared_function(fid, user)  # the user's, or shared
    if row is None:
        raise FaasNotFoundError(f'function {fid} not found')
    return JSONResponse({k: row[k] for k in ('function_id', 'name', 'serializer')})


async def delete_function(api: Api, request: Request, user: str) -> Response:
    fid = api.param(request, 'function_id')
    if not await api.repo.delete_function(fid, user):
        raise FaasNotFoundError(f'function {fid} not found')
    await forget_function(api.service, fid, user)  # on the other replicas too
    return JSONResponse({'deleted': fid})


async def create_endpoint(api: Api, request: Request, user: str) -> Response:
    data = await api.json_of(request)
    name = check_name(data.get('name'), 'an endpoint\'s "name"')
    endpoint_id, token = await api.repo.add_endpoint(user, name)
    return JSONResponse({'endpoint_id': endpoint_id, 'token': token})


async def list_endpoints(api: Api, request: Request, user: str) -> Response:
    return JSONResponse({'endpoints': await api.repo.endpoints(user)})


async def get_endpoint(api: Api, request: Request, user: str) -> Response:
    eid = api.param(request, 'endpoint_id')
    rows = await api.repo.endpoints(user, [eid])
    if not rows:
        raise FaasNotFoundError(f'endpoint {eid} not found')
    return JSONResponse(rows[0])


async def delete_endpoint(api: Api, request: Request, user: str) -> Response:
    eid = api.param(request, 'endpoint_id')
    await api.service.delete_endpoint(user, eid)
    return JSONResponse({'deleted': eid})


async def stop_endpoint(api: Api, request: Request, user: str) -> Response:
    """Close the endpoint's connection as final (``4404``: its agent stops; the endpoint
    and its queue stay)."""
    eid = api.param(request, 'endpoint_id')
    rows = await api.repo.endpoints(user, [eid])
    if not rows:
        raise FaasNotFoundError(f'endpoint {eid} not found')
    # This replica's session, or a stand-in that tells the replica holding it.
    session = api.service.sessions.get(eid)
    if session is not None:
        await session.stop(FaasNotFoundError(f'endpoint {eid} was stopped by its owner'))
    return JSONResponse({'stopped': eid, 'was_connected': bool(rows[0]['online'])})


async def create_task_group(api: Api, request: Request, user: str) -> Response:
    return JSONResponse({'task_group_id': await api.repo.add_task_group(user)})


async def get_task_group(api: Api, request: Request, user: str) -> Response:
    gid = api.param(request, 'task_group_id')
    if not await api.repo.owns_task_group(gid, user):
        raise FaasNotFoundError(f'task group {gid} not found')
    return JSONResponse({'task_group_id': gid, 'tasks': await api.repo.group_tasks(user, gid)})


async def submit(api: Api, request: Request, user: str) -> Response:
    frame = _frames.decode(await api.body_of(request), api.service.limits)
    if frame.type != _frames.SUBMIT:
        raise ProtocolError('POST /v1/submit takes one SUBMIT frame')
    return JSONResponse(await api.service.submit(user, frame.header, frame.payloads))


async def batch_status(api: Api, request: Request, user: str) -> Response:
    ids = check_ids((await api.json_of(request)).get('task_ids', []), '"task_ids"')
    found: list[dict[str, Any]] = []
    for start in range(0, len(ids), 1000):
        found.extend(await api.repo.tasks(user, ids[start : start + 1000]))
    return JSONResponse({'tasks': [task_view(r) for r in found]})


async def get_task(api: Api, request: Request, user: str) -> Response:
    tid = api.param(request, 'task_id')
    rows = await api.repo.tasks(user, [tid])
    if not rows:
        raise FaasNotFoundError(f'task {tid} not found')
    return JSONResponse(task_view(rows[0]))


async def get_result(api: Api, request: Request, user: str) -> Response:
    tid = api.param(request, 'task_id')
    row = await api.repo.result(user, tid)
    if row is None:
        raise FaasNotFoundError(f'task {tid} not found')
    if row['status'] not in ('success', 'failed', 'cancelled'):
        raise TaskPending(tid, row['status'])
    if row['acknowledged']:
        raise FaasNotFoundError(f'the result of task {tid} was acknowledged and deleted')
    header = json.loads(row['result_header'])
    body = _frames.encode(_frames.RESULTS, header, [row['result'] or b''])
    return Response(body, media_type=_frames.CONTENT_TYPE)


async def acknowledge(api: Api, request: Request, user: str) -> Response:
    ids = check_ids((await api.json_of(request)).get('task_ids', []), '"task_ids"')
    await api.service.acknowledge(user, ids)
    return JSONResponse({'acknowledged': len(ids)})


async def cancel(api: Api, request: Request, user: str) -> Response:
    ids = check_ids((await api.json_of(request)).get('task_ids', []), '"task_ids"')
    return JSONResponse({'tasks': await api.service.cancel(user, ids)})


async def recent(api: Api, request: Request, user: str) -> Response:
    text = request.query_params.get('limit', '50')
    if not text.isdigit() or len(text) > 6:
        raise FaasBadRequestError(f'"limit" must be a whole number, not {text[:20]!r}')
    limit = max(1, min(int(text), 1000))
    return JSONResponse({'tasks': await api.repo.recent_tasks(user, limit)})
