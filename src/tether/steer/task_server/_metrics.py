"""Prometheus metrics of a steering task server (off unless a metrics port is given).

Exported, in the task server's own registry (``tether_server_info{kind="steer"}``):

* ``tether_requests_total{op=METHOD}``, ``tether_request_errors_total{op=METHOD}`` and the
  ``tether_request_seconds{op=METHOD}`` histogram: tasks finished per method (a retried
  task counts once, when it ends), failed ones, and each task's time from the task
  server receiving it to its result coming back from the worker;
* ``tether_request_bytes_total{op=METHOD,direction="in"}``: bytes of the task requests;
* ``tether_steer_tasks{state="running"}``: tasks received and not yet answered, and
  ``tether_steer_tasks_total{state=...}``: tasks received, finished, failed and retried;
* ``tether_steer_tasks_by_method{method=...}``: tasks in flight per method.

Method names are the task server's own (a fixed set); any other is counted as ``other``.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from tether._serve.metrics import MetricsEndpoint, MetricsOptions, ServerMetrics, start_endpoint

__all__ = ['TaskServerMetrics']


class TaskServerMetrics:
    """What a task server records, and its endpoint."""

    def __init__(
        self,
        name: str,
        methods: Iterable[str],
        options: MetricsOptions,
        in_flight: Callable[[], Mapping[str, int]],
    ) -> None:
        self.metrics = ServerMetrics('steer', name, methods)
        self._lock = threading.Lock()
        self._counts = {'received': 0, 'finished': 0, 'failed': 0, 'retried': 0}
        self.metrics.gauge(
            'tether_steer_tasks_by_method',
            'Tasks received and not yet answered, by method',
            lambda: {(self.metrics.op(m),): float(n) for m, n in in_flight().items()},
            ('method',),
        )
        self.metrics.gauge(
            'tether_steer_tasks',
            'Tasks received and not yet answered',
            lambda: {('running',): float(sum(in_flight().values()))},
            ('state',),
        )
        self.metrics.gauge(
            'tether_steer_tasks',
            'Tasks by what became of them',
            self._totals,
            ('state',),
            counter=True,
        )
        self.endpoint: MetricsEndpoint | None = start_endpoint(self.metrics, options)

    def _totals(self) -> dict[tuple[str, ...], float]:
        with self._lock:
            return {(state,): float(n) for state, n in self._counts.items()}

    def received(self) -> None:
        """A task request came in."""
        with self._lock:
            self._counts['received'] += 1

    def retried(self) -> None:
        """A failed task is run again."""
        with self._lock:
            self._counts['retried'] += 1

    def finished(self, method: str | None, seconds: float, success: bool, nbytes: int) -> None:
        """A task's result goes back to the Thinker (``nbytes``: its request's size)."""
        with self._lock:
            self._counts['finished'] += 1
            if not success:
                self._counts['failed'] += 1
        self.metrics.observe(method or 'other', seconds, nbytes, error=not success)

    def close(self) -> None:
        """Stop serving the endpoint."""
        if self.endpoint is not None:
            self.endpoint.close()

    def address(self) -> tuple[str, int] | None:
        """Where the endpoint listens."""
        return None if self.endpoint is None else self.endpoint.address

    @staticmethod
    def options(value: MetricsOptions | Mapping[str, Any] | None) -> MetricsOptions:
        """Options from what a task server was given."""
        if value is None:
            return MetricsOptions()
        if isinstance(value, MetricsOptions):
            return value
        return MetricsOptions.model_validate(dict(value))
