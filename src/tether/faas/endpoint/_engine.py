"""What an endpoint's engines share: the task record and the engine interface."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any, Protocol

__all__ = ['Engine', 'OnHandoff', 'OnResult', 'Task', 'cancelled_error', 'result_header']


@dataclasses.dataclass(slots=True)
class Task:
    """A task as the endpoint holds it."""

    task_id: str
    function_id: str
    function_serializer: str
    function_body: bytes
    data_serializer: str
    payload: bytes
    result_store: Any = None
    result_threshold: Any = None
    attempts: int = 0
    # Time limit in seconds (None: none): past it, the task fails with TaskTimeoutError
    # and its worker is stopped and replaced.
    timeout: float | None = None
    # Each time a worker running the task was lost: {'reason', 'exit_code', 'at'}. The
    # result's header carries it (the task's record says why it ran more than once).
    retries: list[dict[str, Any]] = dataclasses.field(default_factory=list)


OnHandoff = Callable[[list[str]], None]
"""Called (from the engine's thread) with ids of tasks just handed to workers."""

OnResult = Callable[[dict[str, Any], bytes], None]
"""Called (from the engine's thread) with a result header and payload."""


class Engine(Protocol):
    """Runs tasks on workers; thread-safe ``submit``."""

    def start(self) -> None:
        """Start (and the ``min_workers``)."""

    def submit(self, tasks: list[Task]) -> None:
        """Queue tasks; hand-offs and results are reported through the callbacks."""

    def cancel(self, task_ids: list[str]) -> None:
        """Cancel tasks (thread-safe): drop those not started, stop the workers running
        the others; each is reported with a ``'cancelled'`` result. Unknown ids are
        ignored."""

    def stats(self) -> dict[str, Any]:
        """``workers``, ``idle``, ``pending`` and ``warm`` (function id -> workers)."""

    def stop(self) -> None:
        """Stop every worker."""


def cancelled_error() -> dict[str, str]:
    """The error of a task cancelled at the endpoint."""
    return {
        'type': 'TaskCancelledError',
        'message': 'the task was cancelled before it finished',
        'traceback': '',
    }


def result_header(  # noqa: PLR0917
    task_id: str,
    status: str,
    serializer: str,
    error: dict[str, str] | None,
    start: float,
    end: float,
) -> dict[str, Any]:
    """The header of a result message."""
    header: dict[str, Any] = {
        'task_id': task_id,
        'status': status,
        'result_serializer': serializer,
        't': {'worker_start': start, 'worker_end': end},
    }
    if error is not None:
        header['error'] = error
    return header
