"""Steering queues and a task server pass unresolved proxies through unresolved.

The same check as ``test_engines_unresolved.py``: this process is the thinker, sending
proxies as task inputs through ``PipeQueues`` to a ``LocalTaskServer`` (a process with
worker processes of its own).
"""

from __future__ import annotations

from typing import Any

from tests.patterns import _guard
from tests.patterns._guard import Engine, check_passes_unresolved
from tether.steer import LocalTaskServer, PipeQueues
from tether.store import Store


class _Thinker:
    """Submits by method name; collects results by task id as they come back."""

    def __init__(self, queues: Any) -> None:
        self.queues = queues
        self.results: dict[str, Any] = {}

    def submit(self, fn: Any, *args: Any) -> str:
        return str(self.queues.send_inputs(*args, method=fn.__name__))

    def result(self, task_id: str) -> Any:
        while task_id not in self.results:
            result = self.queues.get_result(timeout=60)
            assert result is not None, 'no result within a minute'
            self.results[result.task_id] = result
        result = self.results.pop(task_id)
        assert result.success, result.failure_info
        return result.value


def test_steer_local_task_server(store: Store[Any]) -> None:
    queues = PipeQueues()
    methods = [_guard.consume, _guard.set_result, _guard.make_proxies]
    server = LocalTaskServer(queues, methods, num_workers=2)
    server.start()
    try:
        thinker = _Thinker(queues)
        engine = Engine(thinker.submit, thinker.result)
        check_passes_unresolved(
            engine,
            store,
            lambda config, pid: engine.result(engine.submit(_guard.make_proxies, config, pid)),
        )
    finally:
        queues.send_kill_signal()
        server.join(60)
        if server.is_alive():
            server.terminate()
            server.join(10)
