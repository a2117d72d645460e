"""The managers engine: the engine conformance suite, warmth-aware against random routing
(cold starts counted), and the bounded prefetch of each manager."""

from __future__ import annotations

import pathlib
from collections.abc import Iterator
from typing import Any

import pytest
from click.testing import CliRunner

from tests.faas.conftest import new_user
from tether.faas import ComputeEndpointConfig
from tether.faas._server import ServiceThread
from tether.faas.endpoint._managers import ManagersEngine
from tether.faas.endpoint.engine import EngineFactory, OnHandoff, OnResult, make_task
from tether.testing import _faas_tasks
from tether.testing.faas import Collector, EngineConformance


def two_managers(
    config: ComputeEndpointConfig, on_handoff: OnHandoff, on_result: OnResult, env: dict[str, str]
) -> ManagersEngine:
    return ManagersEngine(config.model_copy(update={'managers': 2}), on_handoff, on_result, env)


class TestManagersEngine(EngineConformance):
    @pytest.fixture
    def engine_factory(self) -> EngineFactory:
        return two_managers


def config(**options: Any) -> ComputeEndpointConfig:
    return ComputeEndpointConfig(
        name='m',
        endpoint_id='m',
        service_url='http://127.0.0.1:1',
        engine='managers',
        **options,
    )


@pytest.fixture
def engines() -> Iterator[list[ManagersEngine]]:
    made: list[ManagersEngine] = []
    yield made
    for engine in made:
        engine.stop()


def run_batch(engine: ManagersEngine, c: Collector, functions: list[Any]) -> None:
    tasks = [make_task(fn, 3) if fn is _faas_tasks.square else make_task(fn) for fn in functions]
    engine.submit(tasks)
    results = c.take(len(tasks))
    assert all(h['status'] == 'success' for h, _ in results.values())


SQUARE = f'{_faas_tasks.square.__module__}.{_faas_tasks.square.__qualname__}'
PID = f'{_faas_tasks.pid.__module__}.{_faas_tasks.pid.__qualname__}'


def routed(engines: list[ManagersEngine], routing: str, seed: int) -> dict[str, int]:
    """Where two waiting tasks go (function id -> manager) when manager 0 has ``square``
    warm and manager 1 ``pid`` (the pools are not started: the tasks stay with them)."""
    c = Collector()
    engine = ManagersEngine(
        config(managers=2, max_workers=1, worker_prefetch=0, routing=routing),
        c.on_handoff,
        c.on_result,
        seed=seed,
    )
    engines.append(engine)
    engine._managers[0].warm.add(SQUARE)
    engine._managers[1].warm.add(PID)
    engine.submit([make_task(_faas_tasks.pid), make_task(_faas_tasks.square, 2)])
    return {m.held[t].function_id: m.index for t, m in engine._where.items()}


def test_a_task_goes_to_the_manager_where_its_function_is_warm(
    engines: list[ManagersEngine],
) -> None:
    for seed in range(20):
        assert routed(engines, 'warm', seed) == {SQUARE: 0, PID: 1}
    # Random routing (the baseline) sends some to the cold manager.
    assert any(routed(engines, 'random', seed) != {SQUARE: 0, PID: 1} for seed in range(20))


def test_warm_routing_loads_each_function_on_few_managers(
    engines: list[ManagersEngine],
) -> None:
    c = Collector()
    engine = ManagersEngine(
        config(managers=2, max_workers=1, worker_prefetch=0), c.on_handoff, c.on_result, seed=7
    )
    engines.append(engine)
    engine.start()
    run_batch(engine, c, [_faas_tasks.square, _faas_tasks.pid] * 12)
    # Each function loaded on one manager; at the end of the batch, the manager whose
    # function ran out may take the other's (it never idles while tasks wait).
    assert engine.cold_starts in (2, 3)
    # What the managers advertise is what their workers loaded.
    assert sum(engine.stats()['warm'].values()) == engine.cold_starts


def test_each_manager_holds_at_most_its_workers_and_prefetch(
    engines: list[ManagersEngine], tmp_path: pathlib.Path
) -> None:
    c = Collector()
    engine = ManagersEngine(
        config(managers=2, max_workers=1, worker_prefetch=1), c.on_handoff, c.on_result
    )
    engines.append(engine)
    engine.start()
    marker = tmp_path / 'go'
    tasks = [
        make_task(_faas_tasks.wait_for_file, str(tmp_path / f'started-{i}'), str(marker))
        for i in range(7)
    ]
    engine.submit(tasks)
    # Both workers run one task each; each manager holds one more; 3 wait at the endpoint.
    assert [m.free for m in engine._managers] == [0, 0]
    assert [len(m.held) for m in engine._managers] == [2, 2]
    assert len(engine._queue) == 3
    assert engine.stats()['pending'] >= 3
    assert len(c.handed) <= 4  # those queued at the endpoint are not handed off
    marker.touch()
    results = c.take(7)
    assert {h['status'] for h, _ in results.values()} == {'success'}
    assert len(engine._queue) == 0
    assert sorted(c.handed) == sorted(t.task_id for t in tasks)


def test_configure_sets_the_managers_and_routing(
    dev_service: ServiceThread, tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from tether.faas.endpoint.cli import endpoint

    _user, token = new_user(dev_service)
    monkeypatch.setenv('TETHER_FAAS_HOME', str(tmp_path))
    monkeypatch.setenv('TETHER_FAAS_TOKEN', token)
    args = ['configure', 'warm', '--service', dev_service.url, '--engine', 'managers']
    out = CliRunner().invoke(endpoint, [*args, '--managers', '3', '--routing', 'random'])
    assert out.exit_code == 0, out.output
    written = ComputeEndpointConfig.from_toml(tmp_path / 'endpoints' / 'warm' / 'config.toml')
    assert (written.engine, written.managers, written.routing) == ('managers', 3, 'random')
    bad = CliRunner().invoke(endpoint, [*args[:1], 'cold', *args[2:], '--managers', '0'])
    assert bad.exit_code == 1
    assert 'managers: Input should be greater than or equal to 1' in bad.output
