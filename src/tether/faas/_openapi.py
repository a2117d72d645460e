"""The OpenAPI 3.1 description of the service's REST API (served at ``/openapi.json``).

Binary bodies (``application/x-tether-frame``) are tether wire frames: the versioned
prefix, payload lengths, a JSON header and the raw payloads (``docs/wire.md``).
"""

from __future__ import annotations

from typing import Any

__all__ = ['ROUTES', 'openapi']

_FRAME = 'application/x-tether-frame'

# (method, path, summary, request content type or None, response content type)
ROUTES: list[tuple[str, str, str, str | None, str]] = [
    ('get', '/health', 'Liveness check (no token).', None, 'application/json'),
    ('get', '/v1/whoami', 'The authenticated user.', None, 'application/json'),
    (
        'post',
        '/v1/functions',
        'Register a function (FUNCTION frame: name, serializer; '
        'one payload, the serialized body). Returns its function_id.',
        _FRAME,
        'application/json',
    ),
    (
        'get',
        '/v1/functions/{function_id}',
        "A function's name and serializer.",
        None,
        'application/json',
    ),
    (
        'delete',
        '/v1/functions/{function_id}',
        'Delete a registered function.',
        None,
        'application/json',
    ),
    (
        'get',
        '/v1/functions/{function_id}/sharing',
        'Who the function is shared with ({"users", "groups"}; its owner only).',
        None,
        'application/json',
    ),
    (
        'put',
        '/v1/functions/{function_id}/sharing',
        'Share the function with named users and groups ({"users", "groups"}), replacing '
        'the previous share (a name left out is revoked).',
        'application/json',
        'application/json',
    ),
    (
        'put',
        '/v1/groups/{group}',
        'Create a group of users ({"members": [names]}), or replace its members (its owner only).',
        'application/json',
        'application/json',
    ),
    (
        'post',
        '/v1/endpoints',
        'Register an endpoint ({"name"}); returns its endpoint_id and its token (shown once).',
        'application/json',
        'application/json',
    ),
    (
        'get',
        '/v1/endpoints',
        "The user's endpoints: online, workers, queued and running tasks.",
        None,
        'application/json',
    ),
    ('get', '/v1/endpoints/{endpoint_id}', "One endpoint's status.", None, 'application/json'),
    (
        'delete',
        '/v1/endpoints/{endpoint_id}',
        'Delete an endpoint and its task queue.',
        None,
        'application/json',
    ),
    (
        'post',
        '/v1/endpoints/{endpoint_id}/stop',
        'Stop an endpoint: close its connection as final (its agent exits; it is kept).',
        None,
        'application/json',
    ),
    (
        'get',
        '/v1/endpoints/{endpoint_id}/sharing',
        'Who may run tasks on the endpoint ({"users", "groups"}; its owner only).',
        None,
        'application/json',
    ),
    (
        'put',
        '/v1/endpoints/{endpoint_id}/sharing',
        'Let named users and groups run tasks on the endpoint ({"users", "groups"}), '
        'replacing the previous share (a name left out is revoked).',
        'application/json',
        'application/json',
    ),
    (
        'post',
        '/v1/task_groups',
        'Create a task group (its results share one queue).',
        None,
        'application/json',
    ),
    (
        'get',
        '/v1/task_groups/{task_group_id}',
        "The group's tasks and their status.",
        None,
        'application/json',
    ),
    (
        'post',
        '/v1/submit',
        'Submit a batch (SUBMIT frame: task_group_id, tasks with task_id, '
        'function_id, endpoint_id, data_serializer; one payload per task). Idempotent in the '
        'task ids.',
        _FRAME,
        'application/json',
    ),
    ('get', '/v1/tasks', "The user's most recent tasks (?limit=50).", None, 'application/json'),
    (
        'post',
        '/v1/tasks/status',
        'Status of many tasks ({"task_ids": [...]}).',
        'application/json',
        'application/json',
    ),
    (
        'post',
        '/v1/tasks/ack',
        'Acknowledge results ({"task_ids": [...]}): the service deletes them.',
        'application/json',
        'application/json',
    ),
    (
        'post',
        '/v1/tasks/cancel',
        'Cancel tasks ({"task_ids": [...]}): queued ones are removed, running ones stopped '
        'on their worker; answers {"tasks": {id: "cancelled" | the status it finished '
        'with | "unknown"}}.',
        'application/json',
        'application/json',
    ),
    (
        'get',
        '/v1/tasks/{task_id}',
        "A task's status, error and timings.",
        None,
        'application/json',
    ),
    (
        'get',
        '/v1/tasks/{task_id}/result',
        "A finished task's result (RESULTS frame); 409 while pending.",
        None,
        _FRAME,
    ),
    (
        'get',
        '/v1/endpoint/functions/{function_id}',
        'A function body, for an endpoint of its owner (endpoint token).',
        None,
        'application/octet-stream',
    ),
    (
        'get',
        '/v1/endpoint/status',
        "The calling endpoint's own status (endpoint token).",
        None,
        'application/json',
    ),
]

_ERRORS = {
    '400': 'bad-request: a malformed body, frame or field (the message names it)',
    '401': 'unauthorized: missing, wrong or revoked token',
    '403': "function-not-allowed: the endpoint's allowlist does not list the function",
    '404': "not-found: no such object for this user (another user's objects look missing)",
    '409': 'pending: the task has not finished',
    '413': 'payload-too-large: pass large objects by reference (a tether Store proxy)',
    '429': 'too-many-requests: a per-user limit was reached; retry after Retry-After',
    '503': 'unavailable: the broker or database is unreachable; retry',
}


def openapi() -> dict[str, Any]:
    """The OpenAPI document."""
    paths: dict[str, Any] = {}
    error = {'$ref': '#/components/schemas/Error'}
    for method, path, summary, request, response in ROUTES:
        op: dict[str, Any] = {
            'summary': summary,
            'responses': {
                '200': {'description': 'OK', 'content': {response: {}}},
                **{
                    code: {'description': text, 'content': {'application/json': {'schema': error}}}
                    for code, text in _ERRORS.items()
                },
            },
        }
        if path not in ('/health',) and not path.startswith('/v1/endpoint/'):
            op['security'] = [{'userToken': []}]
        elif path.startswith('/v1/endpoint/'):
            op['security'] = [{'endpointToken': []}]
        params = [p.strip('{}') for p in path.split('/') if p.startswith('{')]
        if params:
            op['parameters'] = [
                {'name': p, 'in': 'path', 'required': True, 'schema': {'type': 'string'}}
                for p in params
            ]
        if request is not None:
            op['requestBody'] = {'required': True, 'content': {request: {}}}
        paths.setdefault(path, {})[method] = op
    return {
        'openapi': '3.1.0',
        'info': {
            'title': 'tether function service',
            'version': '1',
            'description': 'Register Python functions, run them on endpoints, collect '
            'results. WebSockets (not described by OpenAPI): /v1/task_groups/{id}/results '
            "streams a group's results (send ACK frames; SUBMIT frames add tasks to the "
            'group, answered SUBMITTED or SUBMIT_FAILED), /v1/endpoint/connect is the '
            "endpoints' channel.",
        },
        'paths': paths,
        'components': {
            'securitySchemes': {
                'userToken': {'type': 'http', 'scheme': 'bearer'},
                'endpointToken': {'type': 'http', 'scheme': 'bearer'},
            },
            'schemas': {
                'Error': {
                    'type': 'object',
                    'properties': {'error': {'type': 'string'}, 'message': {'type': 'string'}},
                    'required': ['error', 'message'],
                },
            },
        },
    }
