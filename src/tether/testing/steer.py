"""The task server conformance suite: what every steering task server does (needs pytest).

Subclass :class:`TaskServerConformance` in a test module (its name must start with
``Test``) and give it a fixture ``make_task_server`` that returns a function
``make(queues, methods)`` building an unstarted task server (the contract
:class:`tether.steer.task_server.base.BaseTaskServer`) over those queues and methods;
the suite starts it and stops it with the kill signal. The queues are
:class:`~tether.steer.queue.PipeQueues` from the suite's ``queues`` fixture, which a
subclass may override::

    import pytest

    from tether.testing.steer import TaskServerConformance


    class TestMyTaskServer(TaskServerConformance):
        @pytest.fixture
        def make_task_server(self):
            return lambda queues, methods: MyTaskServer(queues, methods)

The methods the suite sends are functions of this module, so workers in other processes
must be able to import ``tether``.
"""

from __future__ import annotations

import contextlib
import pathlib
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from tether.steer.task_server.base import BaseTaskServer
from tether.testing._shared import ClassShared, class_fixture

__all__ = ['METHODS', 'TaskServerConformance', 'serving']

_TIMEOUT = 100


def _add(x: int, y: int = 0) -> int:
    """A method that returns ``x + y``."""
    return x + y


def _fail(message: str) -> None:
    """A method that raises ``ValueError(message)``."""
    raise ValueError(message)


def _fail_once(marker: str) -> str:
    """A method that fails the first time (creating the file ``marker``), succeeds after."""
    path = pathlib.Path(marker)
    if not path.exists():
        path.write_text('tried')
        raise RuntimeError('first attempt fails')
    return 'second attempt'


METHODS = (_add, _fail, _fail_once)
"""The methods the suite gives the task server."""


@contextlib.contextmanager
def serving(server: Any) -> Iterator[Any]:
    """Start a task server; stop it (kill signal, then terminate) whatever happens."""
    server.start()
    try:
        yield server
    finally:
        with contextlib.suppress(Exception):
            server.queues.send_kill_signal()
        server.join(60)
        if server.is_alive():
            server.terminate()
            server.join(10)


class _Shared(ClassShared[Any]):
    """The task server a suite class shares between its tests (:class:`ClassShared`),
    served while it is alive."""

    def __init__(self) -> None:
        super().__init__()
        self._stack = contextlib.ExitStack()

    def _start(self, made: Any) -> Any:
        self._stack = contextlib.ExitStack()
        return self._stack.enter_context(serving(made))

    def _end(self, current: Any) -> None:
        self._stack.close()

    def _usable(self, current: Any) -> bool:
        return bool(current.is_alive())


class TaskServerConformance:
    """What every task server does: run requests, report failures, retry, stop on request.

    Needs a fixture ``make_task_server``: ``make(queues, methods)`` returns an unstarted
    task server. The tests of a class share one started server (starting a pool of
    workers can take seconds) while they pass; a test that fails has the next one start a
    fresh server.
    """

    @pytest.fixture
    def queues(self) -> Any:
        """The queues shared by the test (the Thinker's side) and a new task server."""
        from tether.steer.queue import PipeQueues

        return PipeQueues()

    shared_task_server = class_fixture(
        'shared_task_server',
        lambda cls: _Shared(),
        "The server the class's tests share (stopped after the class's last test).",
    )

    @pytest.fixture
    def served(
        self,
        make_task_server: Callable[..., Any],
        queues: Any,
        shared_task_server: _Shared,
        request: pytest.FixtureRequest,
    ) -> Iterator[Any]:
        """The class's started task server over :data:`METHODS` (its queues are
        ``served.queues``), started over ``queues`` if there is none."""
        with shared_task_server.lent(request):
            yield shared_task_server.take(lambda: make_task_server(queues, METHODS))

    def test_is_a_task_server(self, make_task_server: Callable[..., Any], queues: Any) -> None:
        server = make_task_server(queues, METHODS)
        assert isinstance(server, BaseTaskServer)
        assert sorted(server.methods) == sorted(m.__name__ for m in METHODS)

    def test_runs_a_method(self, served: Any) -> None:
        queues = served.queues
        queues.send_inputs(2, method='_add', input_kwargs={'y': 3})
        result = queues.get_result(timeout=_TIMEOUT)
        assert result.success, result.failure_info
        assert result.value == 5
        assert result.method == '_add'

    def test_many_requests(self, served: Any) -> None:
        queues = served.queues
        ids = {queues.send_inputs(i, i, method='_add'): 2 * i for i in range(10)}
        for _ in ids:
            result = queues.get_result(timeout=_TIMEOUT)
            assert result.success, result.failure_info
            assert result.value == ids[result.task_id]

    def test_a_failure_comes_back(self, served: Any) -> None:
        queues = served.queues
        queues.send_inputs('conformance failure', method='_fail')
        result = queues.get_result(timeout=_TIMEOUT)
        assert result.success is False
        assert 'conformance failure' in result.failure_info.exception

    def test_unknown_method_is_refused(self, served: Any) -> None:
        queues = served.queues
        queues.send_inputs(1, method='no_such_method')
        result = queues.get_result(timeout=_TIMEOUT)
        assert result.success is False
        assert 'unknown method' in result.failure_info.exception

    def test_retries(self, served: Any, tmp_path: pathlib.Path) -> None:
        queues = served.queues
        queues.send_inputs(str(tmp_path / 'retried'), method='_fail_once', max_retries=1)
        retried = queues.get_result(timeout=_TIMEOUT)
        queues.send_inputs(str(tmp_path / 'once'), method='_fail_once')
        failed = queues.get_result(timeout=_TIMEOUT)
        assert retried.success, retried.failure_info
        assert retried.value == 'second attempt'
        assert retried.retries == 1
        assert failed.success is False
        assert failed.retries == 0

    def test_kill_signal_stops_it(self, served: Any, shared_task_server: _Shared) -> None:
        # It ends the class's server: the next test that needs one starts another.
        server, queues = served, served.queues
        queues.send_inputs(1, method='_add')
        assert queues.get_result(timeout=_TIMEOUT).value == 1
        queues.send_kill_signal()
        server.join(_TIMEOUT)
        assert not server.is_alive()
        assert server.exitcode == 0
        shared_task_server.stop()
