"""A task server on a local process pool."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from tether.steer.models import Result
from tether.steer.task_server._pool import WorkerPool
from tether.steer.task_server.base import BaseTaskServer

__all__ = ['LocalTaskServer']


class LocalTaskServer(BaseTaskServer):
    """Run tasks on ``num_workers`` worker processes of this machine.

    The workers are forked from the task server, and each task goes to an idle one
    straight through its own socket (see ``tether.steer.task_server._pool``). A worker
    that dies (killed, crashed) fails the task it was running, with a message that says
    so, and is replaced; the task is retried up to its ``max_retries``.

    Args:
        queues: The queues shared with the Thinker.
        methods: Functions (module-level, so workers can find them).
        num_workers: Worker processes (each in a process group of its own, killed with
            the processes its task started when the server stops them).
        timeout: Idle seconds before stopping (``None``: wait for the kill signal).
        kill_timeout: Seconds the tasks get to finish after the kill signal, before
            their workers are killed (see :class:`BaseTaskServer`).
    """

    def __init__(
        self,
        queues: Any,
        methods: Iterable[Any],
        num_workers: int = 1,
        timeout: float | None = None,
        *,
        kill_timeout: float | None = 10.0,
        metrics: Any = None,
    ) -> None:
        super().__init__(queues, methods, timeout, kill_timeout=kill_timeout, metrics=metrics)
        self.num_workers = num_workers
        self._pool: WorkerPool | None = None

    def start_executor(self) -> None:
        functions = {name: m[0] if isinstance(m, tuple) else m for name, m in self.methods.items()}
        self._pool = WorkerPool(self.num_workers, functions)

    def stop_executor(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(kill=self.stop_now)
            self._pool = None

    def kill_workers(self) -> None:
        if self._pool is not None:
            self._pool.kill_now()

    def submit_task(self, method: Any, result: Result, done: Callable[[Result], None]) -> None:
        assert self._pool is not None
        # The name it was found by (the workers hold the same table, by name).
        self._pool.submit(result.method or '', result, done)
