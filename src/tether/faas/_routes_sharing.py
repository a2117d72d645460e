"""The sharing routes (a user's token): groups, and who a function or an endpoint is
shared with (:mod:`tether.faas._shares`)."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from tether.exceptions import FaasBadRequestError, FaasNotFoundError
from tether.faas._api import Api
from tether.faas._shares import check_share_body


async def put_group(api: Api, request: Request, user: str) -> Response:
    """Create a group, or replace its members (its owner only)."""
    name = api.param(request, 'group')
    members = (await api.json_of(request)).get('members', [])
    if not isinstance(members, list) or not all(isinstance(m, str) for m in members):
        raise FaasBadRequestError('"members" must be a list of user names')
    names = await api.repo.shares.set_group(user, name, members)
    return JSONResponse({'group': name, 'members': names})


async def _owned(api: Api, request: Request, user: str) -> tuple[str, str]:
    """The kind and id of the object of the path, which ``user`` must own."""
    if 'function_id' in request.path_params:
        fid = api.param(request, 'function_id')
        if await api.repo.get_function(fid, user) is None:
            raise FaasNotFoundError(f'function {fid} not found')
        return 'function', fid
    eid = api.param(request, 'endpoint_id')
    if not await api.repo.endpoints(user, [eid]):
        raise FaasNotFoundError(f'endpoint {eid} not found')
    return 'endpoint', eid


async def get_sharing(api: Api, request: Request, user: str) -> Response:
    kind, oid = await _owned(api, request, user)
    return JSONResponse(await api.repo.shares.shares(kind, oid))


async def put_sharing(api: Api, request: Request, user: str) -> Response:
    """Replace who the function or endpoint is shared with (its owner only)."""
    kind, oid = await _owned(api, request, user)
    users, groups = check_share_body(await api.json_of(request))
    await api.repo.shares.set_shares(kind, oid, users, groups)
    return JSONResponse(await api.repo.shares.shares(kind, oid))
