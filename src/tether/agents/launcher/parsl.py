"""ParslLauncher: each agent runs as a long task on a Parsl executor (HTEX ...).

Workers of a High-Throughput Executor are started once and reused, so launching an
agent costs a task submission. A worker that dies (or a node that is lost) fails the
task; the launcher then submits the agent again, per its restart policy.
"""

from __future__ import annotations

import pickle
import threading
from typing import Any

from tether.agents.launcher._base import Launcher, RestartPolicy, Supervised

__all__ = ['ParslLauncher']


class ParslLauncher(Launcher):
    """Runs agents on the executors of a Parsl configuration.

    Args:
        config: A ``parsl.config.Config``; the launcher builds its own data-flow kernel
            from it (the global ``parsl.load`` kernel is left alone).
        executor: Label of the executor to use (default: the first).
        restart: The restart policy, or a number of restarts (default: never).
    """

    def __init__(
        self,
        config: Any,
        *,
        executor: str | None = None,
        restart: RestartPolicy | int | None = None,
    ) -> None:
        super().__init__(restart=restart)
        from tether.agents._worker import run_agent_bytes
        from tether.plugins.parsl import make_app, start_kernel

        self.dfk = start_kernel(config)
        self.executor = executor or config.executors[0].label
        self._app = make_app(self.dfk, run_agent_bytes, [self.executor])
        self._futures: dict[str, Any] = {}
        self._flock = threading.Lock()

    def run_once(self, entry: Supervised) -> None:
        data = pickle.dumps(entry.spec)
        with self._flock:
            if entry.stopping:
                return
            future = self._app(data)
            self._futures[entry.spec.agent_id] = future
        future.result()

    def kill(self, entry: Supervised) -> None:
        with self._flock:
            future = self._futures.get(entry.spec.agent_id)
        if future is not None:
            future.cancel()

    def close(self, timeout: float = 30.0) -> None:
        """Stop the agents, then the data-flow kernel and its executors."""
        from tether.plugins.parsl import stop_kernel

        try:
            super().close(timeout)
        finally:
            stop_kernel(self.dfk)
