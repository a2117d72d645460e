"""The service's HTTP and WebSocket interface (Starlette): its routes.

Every route except ``/``, ``/health`` and ``/openapi.json`` needs ``Authorization:
Bearer <token>``: a user token for the SDK's routes (:mod:`tether.faas._routes_user`), an
endpoint token for the two endpoint routes (:mod:`tether.faas._routes_other`). Errors are
JSON ``{"error": code, "message": text}`` with the HTTP status of the table in
``docs/faas.md``; WebSockets are closed with ``4000 + status``.
"""

from __future__ import annotations

from typing import Any

from starlette.applications import Starlette
from starlette.routing import Route, WebSocketRoute

from tether.faas._api import Api, PerUser
from tether.faas._core import Service
from tether.faas._routes_other import (
    endpoint_function,
    endpoint_status,
    health,
    openapi_json,
    page,
    ws_endpoint,
    ws_results,
)
from tether.faas._routes_sharing import get_sharing, put_group, put_sharing
from tether.faas._routes_user import (
    acknowledge,
    batch_status,
    cancel,
    create_endpoint,
    create_task_group,
    delete_endpoint,
    delete_function,
    get_endpoint,
    get_function,
    get_result,
    get_task,
    get_task_group,
    list_endpoints,
    recent,
    register_function,
    stop_endpoint,
    submit,
    whoami,
)

__all__ = ['PerUser', 'build_app']


def build_app(service: Service, lifespan: Any = None) -> Starlette:
    """The ASGI application over ``service``."""
    api = Api(service)
    r, plain = api.route, api.bind
    routes = [
        Route('/', plain(page)),
        Route('/health', plain(health)),
        Route('/openapi.json', plain(openapi_json)),
        Route('/v1/whoami', r(whoami)),
        Route('/v1/functions', r(register_function), methods=['POST']),
        Route('/v1/functions/{function_id}', r(get_function), methods=['GET']),
        Route('/v1/functions/{function_id}', r(delete_function), methods=['DELETE']),
        Route('/v1/functions/{function_id}/sharing', r(get_sharing), methods=['GET']),
        Route('/v1/functions/{function_id}/sharing', r(put_sharing), methods=['PUT']),
        Route('/v1/groups/{group}', r(put_group), methods=['PUT']),
        Route('/v1/endpoints', r(create_endpoint), methods=['POST']),
        Route('/v1/endpoints', r(list_endpoints), methods=['GET']),
        Route('/v1/endpoints/{endpoint_id}', r(get_endpoint), methods=['GET']),
        Route('/v1/endpoints/{endpoint_id}', r(delete_endpoint), methods=['DELETE']),
        Route('/v1/endpoints/{endpoint_id}/stop', r(stop_endpoint), methods=['POST']),
        Route('/v1/endpoints/{endpoint_id}/sharing', r(get_sharing), methods=['GET']),
        Route('/v1/endpoints/{endpoint_id}/sharing', r(put_sharing), methods=['PUT']),
        Route('/v1/task_groups', r(create_task_group), methods=['POST']),
        Route('/v1/task_groups/{task_group_id}', r(get_task_group)),
        Route('/v1/submit', r(submit), methods=['POST']),
        Route('/v1/tasks', r(recent)),
        Route('/v1/tasks/status', r(batch_status), methods=['POST']),
        Route('/v1/tasks/ack', r(acknowledge), methods=['POST']),
        Route('/v1/tasks/cancel', r(cancel), methods=['POST']),
        Route('/v1/tasks/{task_id}', r(get_task)),
        Route('/v1/tasks/{task_id}/result', r(get_result)),
        Route('/v1/endpoint/functions/{function_id}', plain(endpoint_function)),
        Route('/v1/endpoint/status', plain(endpoint_status)),
        WebSocketRoute('/v1/endpoint/connect', plain(ws_endpoint)),
        WebSocketRoute('/v1/task_groups/{task_group_id}/results', plain(ws_results)),
    ]
    return Starlette(routes=routes, lifespan=lifespan)
