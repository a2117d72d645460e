"""Engines of an endpoint: elastic worker pool, warm-function routing, Parsl HTEX."""

from __future__ import annotations

import queue
import uuid
from collections.abc import Callable
from typing import Any

import pytest

from tests.faas import _tasks
from tests.faas.conftest import AgentThread, new_user, wait_for
from tether.faas import EndpointConfig, Executor
from tether.faas._payload import pack_args, pack_function
from tether.faas._server import ServiceThread
from tether.faas.endpoint._pool import ProcessPoolEngine
from tether.faas.endpoint.engine import Task


def task(fn: Callable[..., Any], *args: Any) -> Task:
    return Task(
        task_id=str(uuid.uuid4()),
        function_id=f'{fn.__module__}.{fn.__name__}',
        function_serializer='pickle',
        function_body=pack_function(fn),
        data_serializer='tether',
        payload=pack_args(args, {}),
    )


class Collector:
    def __init__(self) -> None:
        self.handed: list[str] = []
        self.results: queue.Queue[tuple[dict[str, Any], bytes]] = queue.Queue()

    def handoff(self, ids: list[str]) -> None:
        self.handed.extend(ids)

    def result(self, header: dict[str, Any], payload: bytes) -> None:
        self.results.put((header, payload))

    def take(self, n: int) -> dict[str, Any]:
        from tether.faas._payload import unpack_result

        out = {}
        for _ in range(n):
            header, payload = self.results.get(timeout=60)
            assert header['status'] == 'success', header
            out[header['task_id']] = unpack_result('tether', payload)
        return out


def engine_config(**options: Any) -> EndpointConfig:
    return EndpointConfig(name='e', endpoint_id='e', service_url='http://127.0.0.1:1', **options)


def test_elastic_scaling_between_min_and_max_with_idle_timeout() -> None:
    c = Collector()
    engine = ProcessPoolEngine(
        engine_config(min_workers=1, max_workers=3, idle_timeout_s=0.5, worker_prefetch=0),
        c.handoff,
        c.result,
    )
    engine.start()
    try:
        assert engine.stats()['workers'] == 1
        tasks = [task(_tasks.sleep_then, 0.5, i) for i in range(6)]
        engine.submit(tasks)
        peak = wait_for(lambda: engine.stats()['workers'] == 3 and 3, 60, 'scale-up to 3')
        assert peak == 3
        assert sorted(c.take(6).values()) == list(range(6))
        assert sorted(c.handed) == sorted(t.task_id for t in tasks)  # each handed once
        wait_for(lambda: engine.stats()['workers'] == 1, 60, 'scale-down to min_workers')
        assert engine.started_workers == 3
    finally:
        engine.stop()


def test_functions_are_routed_to_workers_where_they_are_warm() -> None:
    c = Collector()
    engine = ProcessPoolEngine(
        engine_config(min_workers=2, max_workers=2, worker_prefetch=0), c.handoff, c.result
    )
    engine.start()
    try:
        a, b = task(_tasks.pid), task(_tasks.pid_b)
        engine.submit([a, b])
        first = c.take(2)
        assert first[a.task_id] != first[b.task_id]  # one worker each
        for _ in range(4):
            ta, tb = task(_tasks.pid), task(_tasks.pid_b)
            engine.submit([ta])
            assert c.take(1)[ta.task_id] == first[a.task_id]
            engine.submit([tb])
            assert c.take(1)[tb.task_id] == first[b.task_id]
        assert engine.cold_starts == 2  # each function deserialized once, in one worker
        assert engine.stats()['warm'] == {a.function_id: 1, b.function_id: 1}
    finally:
        engine.stop()


def test_worker_death_is_reported_after_retries() -> None:
    c = Collector()
    engine = ProcessPoolEngine(engine_config(max_workers=1, max_retries=1), c.handoff, c.result)
    engine.start()
    try:
        doomed = task(_tasks.always_die)
        engine.submit([doomed])
        header, _ = c.results.get(timeout=60)
        assert header['status'] == 'failed'
        assert header['error']['type'] == 'WorkerLostError'
        assert 'died 2 times' in header['error']['message']
        assert c.handed == [doomed.task_id]  # retries are not new hand-offs
    finally:
        engine.stop()


def test_parsl_htex_engine(
    dev_service: ServiceThread, start_endpoint: Callable[..., AgentThread]
) -> None:
    user, token = new_user(dev_service)
    ep = start_endpoint(dev_service, user, engine='parsl', max_workers=2, max_retries=0)
    with Executor(ep.config.endpoint_id, service_url=dev_service.url, token=token) as ex:
        assert list(ex.map(_tasks.square, range(8))) == [i * i for i in range(8)]
        with pytest.raises(Exception, match='ValueError: no'):
            ex.submit(_tasks.fail, 'no').result(timeout=60)
