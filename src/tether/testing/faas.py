"""The conformance suite of function-service engines (needs pytest).

An engine (:class:`tether.faas.endpoint.engine.Engine`, also ``tether.abc.FaasEngine``)
runs an endpoint's tasks on workers. Subclass :class:`EngineConformance` in a test module
(its name must start with ``Test``) and give it a fixture named ``engine_factory`` that
returns the engine's :data:`~tether.faas.endpoint.engine.EngineFactory`; pytest then runs
every test of the suite against engines it makes::

    import pytest

    from tether.testing.faas import EngineConformance


    class TestMyEngine(EngineConformance):
        @pytest.fixture
        def engine_factory(self):
            return my_package.engine.make_engine

The engines run the functions of ``tether.testing._faas_tasks`` on their workers, which
must therefore import ``tether``.
"""

from __future__ import annotations

import pathlib
import queue
from collections.abc import Iterator
from typing import Any

import pytest

from tether.faas import ComputeEndpointConfig
from tether.faas.endpoint.engine import Engine, EngineFactory, make_task, task_value
from tether.testing import _faas_tasks
from tether.testing._shared import ClassShared, class_fixture
from tether.testing._waiting import wait_until

__all__ = ['Collector', 'EngineConformance']


class Collector:
    """The two callbacks of an engine, recording what they are told."""

    def __init__(self) -> None:
        self.handed: list[str] = []
        self.results: queue.Queue[tuple[dict[str, Any], bytes]] = queue.Queue()

    def on_handoff(self, ids: list[str]) -> None:
        self.handed.extend(ids)

    def on_result(self, header: dict[str, Any], payload: bytes) -> None:
        self.results.put((header, bytes(payload)))

    def take(self, n: int, timeout: float = 120.0) -> dict[str, tuple[dict[str, Any], bytes]]:
        """The next ``n`` results, by task id."""
        out = {}
        for _ in range(n):
            header, payload = self.results.get(timeout=timeout)
            out[str(header['task_id'])] = (header, payload)
        return out


class _SharedEngine(ClassShared[Engine]):
    """The engine a suite class shares between its tests (:class:`ClassShared`).

    Its two callbacks go to the collector of the test now running (``to``).
    """

    def __init__(self) -> None:
        super().__init__()
        self.to: Collector | None = None

    def on_handoff(self, ids: list[str]) -> None:
        if self.to is not None:
            self.to.on_handoff(ids)

    def on_result(self, header: dict[str, Any], payload: bytes) -> None:
        if self.to is not None:
            self.to.on_result(header, payload)

    def _start(self, made: Engine) -> Engine:
        made.start()
        return made

    def _end(self, current: Engine) -> None:
        current.stop()


class EngineConformance:
    """What every engine does: runs tasks, reports each hand-off and exactly one result
    per task through its two callbacks, fails a raising task with its error, cancels.

    Needs a fixture ``engine_factory`` returning the engine's factory. The tests of a
    class share one started engine (starting workers can take seconds) while they pass;
    after a failed test the next starts a fresh one.
    """

    max_workers = 2

    @pytest.fixture
    def collector(self) -> Collector:
        return Collector()

    shared_engine = class_fixture(
        'shared_engine',
        lambda cls: _SharedEngine(),
        "The engine the class's tests share (stopped after the class's last test).",
    )

    @pytest.fixture
    def engine(
        self,
        engine_factory: EngineFactory,
        collector: Collector,
        shared_engine: _SharedEngine,
        request: pytest.FixtureRequest,
    ) -> Iterator[Engine]:
        """The class's started engine, its callbacks passed on to this test's
        ``collector``; started if there is none (after a failed test, a fresh one)."""
        config = ComputeEndpointConfig(
            name='conformance',
            endpoint_id='conformance',
            service_url='http://127.0.0.1:1',
            max_workers=self.max_workers,
            max_retries=0,
            worker_prefetch=0,
        )
        shared = shared_engine
        with shared.lent(request):
            made = shared.take(
                lambda: engine_factory(config, shared.on_handoff, shared.on_result, {})
            )
            shared.to = collector
            try:
                yield made
            finally:
                shared.to = None

    def test_is_an_engine(self, engine: Engine) -> None:
        assert isinstance(engine, Engine)

    def test_runs_tasks_with_one_handoff_and_one_result_each(
        self, engine: Engine, collector: Collector
    ) -> None:
        tasks = [make_task(_faas_tasks.square, i) for i in range(5)]
        engine.submit(tasks)
        got = collector.take(len(tasks))
        assert {t.task_id: task_value(*got[t.task_id]) for t in tasks} == {
            t.task_id: i * i for i, t in enumerate(tasks)
        }
        for header, _ in got.values():
            assert header['status'] == 'success'
            assert set(header['t']) >= {'worker_start', 'worker_end'}
        wait_until(
            lambda: sorted(collector.handed) == sorted(t.task_id for t in tasks),
            timeout=120,
            message='hand-offs',
        )
        assert collector.results.empty()  # one result per task

    def test_a_raising_task_fails_with_its_error(
        self, engine: Engine, collector: Collector
    ) -> None:
        task = make_task(_faas_tasks.fail, 'no luck')
        engine.submit([task])
        header, _ = collector.take(1)[task.task_id]
        assert header['status'] == 'failed'
        assert header['error']['type'] == 'ValueError'
        assert 'no luck' in header['error']['message']

    def test_callbacks_replaced_before_start_are_the_ones_called(
        self, engine_factory: EngineFactory
    ) -> None:
        first, second = Collector(), Collector()
        config = ComputeEndpointConfig(
            name='conformance', endpoint_id='conformance', service_url='http://127.0.0.1:1'
        )
        made = engine_factory(config, first.on_handoff, first.on_result, {})
        made.on_handoff = second.on_handoff
        made.on_result = second.on_result
        made.start()
        try:
            task = make_task(_faas_tasks.square, 7)
            made.submit([task])
            assert task_value(*second.take(1)[task.task_id]) == 49
            assert first.results.empty()
            assert not first.handed
        finally:
            made.stop()

    def test_stats_name_workers_idle_pending_and_warm(self, engine: Engine) -> None:
        stats = engine.stats()
        assert set(stats) >= {'workers', 'idle', 'pending', 'warm'}
        assert isinstance(stats['warm'], dict)

    def test_cancel_ignores_unknown_ids(self, engine: Engine, collector: Collector) -> None:
        engine.cancel(['no-such-task'])
        task = make_task(_faas_tasks.square, 3)
        engine.submit([task])
        assert task_value(*collector.take(1)[task.task_id]) == 9

    def test_a_cancelled_running_task_ends_cancelled(
        self, engine: Engine, collector: Collector, tmp_path: pathlib.Path
    ) -> None:
        started, marker = tmp_path / 'started', tmp_path / 'marker'
        task = make_task(_faas_tasks.wait_for_file, str(started), str(marker))
        engine.submit([task])
        wait_until(started.exists, timeout=120, message='the task to start')
        engine.cancel([task.task_id])
        marker.touch()  # an engine that cannot stop it lets it end, then drops its result
        header, _ = collector.take(1)[task.task_id]
        assert header['status'] == 'cancelled'
        assert header['error']['type'] == 'TaskCancelledError'
        assert collector.results.empty()
