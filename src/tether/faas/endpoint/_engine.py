"""What an endpoint's engines share: the task record and the engine interface."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any, Protocol

__all__ = ['Engine', 'OnHandoff', 'OnResult', 'Task', 'result_header']


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

    def stats(self) -> dict[str, Any]:
        """``workers``, ``idle``, ``pending`` and ``warm`` (function id -> workers)."""

    def stop(self) -> None:
        """Stop every worker."""


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
