"""The function service's Prometheus metrics (see :mod:`tether._serve.metrics`).

HTTP requests are counted and timed per route template and method (``GET
/v1/tasks/{task_id}``, never a task id), with the bytes of their bodies; a reply of
status 400 or more counts as an error. WebSockets are counted when they close, under
``WS <route>``, with how long they were open (their messages are not counted).
Gauges: compute endpoints connected, tasks being submitted.
"""

from __future__ import annotations

import time
from typing import Any

from tether._serve.metrics import MetricsOptions, Served, ServerMetrics
from tether.faas._core import Service

__all__ = ['MetricsMiddleware', 'service_metrics']


def service_metrics(service: Service, options: MetricsOptions, routes: list[Any]) -> Served:
    """The service's metrics (nothing recorded when ``options`` has no port)."""
    if not options.enabled:
        return Served(None, options)
    ops = [
        f'{method} {r.path}' for r in routes for method in (getattr(r, 'methods', None) or ['WS'])
    ]
    m = ServerMetrics('faas', 'service', ops)
    m.gauge(
        'tether_faas_endpoints_connected',
        'Compute endpoints connected',
        lambda: len(service.sessions),
    )
    m.gauge(
        'tether_faas_tasks_submitting',
        'Tasks in submissions under way',
        lambda: sum(service._submitting.values()),
    )
    return Served(m, options)


class MetricsMiddleware:
    """ASGI middleware recording each HTTP request against its route template."""

    def __init__(self, app: Any, metrics: ServerMetrics) -> None:
        self.app = app
        self.metrics = metrics

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        kind = scope['type']
        if kind not in ('http', 'websocket'):
            await self.app(scope, receive, send)
            return
        start = time.perf_counter()
        got = [0, 0, 0]  # bytes in, bytes out, status

        async def counted_receive() -> Any:
            message = await receive()
            got[0] += len(message.get('body', b''))
            return message

        async def counted_send(message: Any) -> None:
            if message['type'] == 'http.response.start':
                got[2] = int(message['status'])
            elif message['type'] == 'http.response.body':
                got[1] += len(message.get('body', b''))
            await send(message)

        try:
            await self.app(scope, counted_receive, counted_send)
        finally:
            route = scope.get('route')
            method = scope['method'] if kind == 'http' else 'WS'
            op = f'{method} {route.path}' if route is not None else 'other'
            seconds = time.perf_counter() - start  # a WebSocket: how long it was open
            error = kind == 'http' and not 0 < got[2] < 400
            self.metrics.observe(op, seconds, got[0], got[1], error=error)
