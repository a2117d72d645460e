"""ParslLauncher: each agent runs as a long task on a Parsl executor (HTEX ...).

Workers of a High-Throughput Executor are started once and reused, so launching an
agent costs a task submission. A worker that dies (or a node that is lost) fails the
task; the launcher then submits the agent again, per its restart policy.
"""

from __future__ import annotations

import pickle
import threading
from typing import Any

from tether.agents.launcher._base import Launcher, RestartPolicy, _Supervised

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
        from parsl.dataflow.dflow import DataFlowKernel

        self.dfk = DataFlowKernel(config)
        self.executor = executor or config.executors[0].label
        from parsl import python_app

        from tether.agents._worker import run_agent_bytes

        self._app = python_app(
            run_agent_bytes, data_flow_kernel=self.dfk, executors=[self.executor]
        )
        self._futures: dict[str, Any] = {}
        self._flock = threading.Lock()

    def _run_once(self, entry: _Supervised) -> None:
        data = pickle.dumps(entry.spec)
        with self._flock:
            if entry.stopping:
                return
            future = self._app(data)
            self._futures[entry.spec.agent_id] = future
        future.result()

    def _kill(self, entry: _Supervised) -> None:
        with self._flock:
            future = self._futures.get(entry.spec.agent_id)
        if future is not None:
            future.cancel()

    def close(self, timeout: float = 30.0) -> None:
        """Stop the agents, then the data-flow kernel and its executors."""
        import logging

        run_dir = str(self.dfk.run_dir)
        try:
            super().close(timeout)
        finally:
            self.dfk.cleanup()
            # Parsl detaches the file handler of its run log at cleanup but never closes it.
            loggers = [logging.getLogger()] + [
                x
                for x in logging.Logger.manager.loggerDict.values()
                if isinstance(x, logging.Logger)
            ]
            for log in loggers:
                for handler in list(log.handlers):
                    if run_dir in str(getattr(handler, 'baseFilename', '')):
                        log.removeHandler(handler)
                        handler.close()
