"""A task server on Parsl (for example its High-Throughput Executor)."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from typing import Any

from tether.steer.models import Result
from tether.steer.task_server._worker import run_task
from tether.steer.task_server.base import BaseTaskServer, method_name

__all__ = ['ParslTaskServer']

logger = logging.getLogger(__name__)


class ParslTaskServer(BaseTaskServer):
    """Run tasks as Parsl apps.

    Args:
        methods: Functions, or ``(function, {'executors': [...]})`` pairs to pin a method
            to some of the Parsl config's executors.
        queues: The queues shared with the Thinker.
        config: The Parsl ``Config``, loaded in the task server's process.
        timeout: Idle seconds before stopping (``None``: wait for the kill signal).
        default_executors: Executors of methods given without options (``'all'``).
    """

    def __init__(
        self,
        methods: Iterable[Any],
        queues: Any,
        config: Any,
        timeout: float | None = None,
        default_executors: str | list[str] = 'all',
    ) -> None:
        super().__init__(queues, methods, timeout)
        self.config = config
        self.default_executors = default_executors
        self._apps: dict[str, Any] = {}
        self._dfk: Any = None

    def _setup(self) -> None:
        from parsl.app.python import PythonApp
        from parsl.dataflow.dflow import DataFlowKernel

        # A kernel of its own, not ``parsl.load``'s global one: the task server runs in a
        # forked process, which inherits whatever global kernel its parent had loaded
        # (without that kernel's threads), and ``parsl.load`` would refuse to load again.
        self._dfk = DataFlowKernel(self.config)
        for name, method in self.methods.items():
            executors = self.default_executors
            if isinstance(method, tuple):
                executors = method[1].get('executors', executors)
            app = PythonApp(  # type: ignore[no-untyped-call]
                run_task,
                data_flow_kernel=self._dfk,
                executors=executors,
            )
            self._apps[name] = app
            logger.info('method %s on executors %s', name, executors)

    def _cleanup(self) -> None:
        if self._dfk is not None:
            self._dfk.cleanup()
            self._dfk = None

    def _submit(self, method: Any, result: Result, done: Callable[[Result], None]) -> None:
        fn = method[0] if isinstance(method, tuple) else method
        future = self._apps[method_name(fn)](fn, result)

        def callback(f: Any) -> None:
            try:
                finished = f.result()
            except Exception as e:
                # The app never returned: its worker was lost, or Parsl failed.
                result.set_failure(f'{type(e).__name__}: the task did not finish on Parsl: {e}')
                finished = result
            done(finished)

        future.add_done_callback(callback)
