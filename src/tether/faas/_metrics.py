"""The function service's Prometheus metrics (see :mod:`tether._serve.metrics`).

HTTP requests are counted and timed per route template and method (``GET
/v1/tasks/{task_id}``, never a task id), with the bytes of their bodies; a reply of
status 400 or more counts as an error. WebSockets are counted when they close, under
``WS <route>``, with how long they were open (their messages are not counted).
Gauges: compute endpoints connected, tasks being submitted, and tasks by state over every
user (``tether_faas_tasks{state}``). The task counts come from one ``GROUP BY`` query on
the service's event loop, run when a scrape asks for them and at most once a second: a
scrape reads the last counts (at most one scrape old) and never waits on the database,
and nothing queries it while nobody scrapes.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from typing import Any

from tether._serve.metrics import MetricsOptions, Served, ServerMetrics
from tether.faas._core import Service

__all__ = ['MetricsMiddleware', 'service_metrics']

logger = logging.getLogger(__name__)

# The states a task row can be in; any other counts as 'other' (labels stay bounded).
_STATES = ('waiting-for-ep', 'running', 'success', 'failed', 'cancelled')
# Seconds between two counts of the tasks, at the most.
_COUNT_EVERY_S = 1.0


class _TaskStates:
    """Tasks by state, counted on the service's loop when a scrape wants them."""

    def __init__(self, service: Service) -> None:
        self.service = service
        self.counts: dict[str, int] = {}
        self.loop = asyncio.get_running_loop()
        self.wanted = asyncio.Event()
        self.task = self.loop.create_task(self._run())

    def scrape(self) -> dict[tuple[str, ...], float]:
        """The last counts (called from the metrics endpoint's thread), and ask for new."""
        with contextlib.suppress(RuntimeError):  # the loop is closing
            self.loop.call_soon_threadsafe(self.wanted.set)
        out = dict.fromkeys(_STATES, 0.0)
        for state, n in self.counts.items():
            key = state if state in out else 'other'
            out[key] = out.get(key, 0.0) + n
        return {(state,): n for state, n in out.items()}

    async def _run(self) -> None:
        while True:
            await self.wanted.wait()
            self.wanted.clear()
            try:
                rows = await self.service.repo.db.fetch(
                    'SELECT status, COUNT(*) AS n FROM faas_tasks GROUP BY status'
                )
                self.counts = {str(r['status']): int(r['n']) for r in rows}
            except Exception as e:  # the database restarting: the next scrape tries again
                logger.debug('counting tasks by state for the metrics failed: %s', e)
            await asyncio.sleep(_COUNT_EVERY_S)


class _ServiceServed(Served):
    """The service's metrics, whose task counter stops with the endpoint."""

    states: _TaskStates | None = None

    def close(self) -> None:
        if self.states is not None:
            self.states.task.cancel()
        super().close()


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
    served = _ServiceServed(m, options)
    served.states = states = _TaskStates(service)
    m.gauge('tether_faas_tasks', 'Tasks by state, over every user', states.scrape, ('state',))
    return served


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
