"""Executor plugins: typed configs, tether's function service and Ray as executors."""

from __future__ import annotations

import concurrent.futures
import gc
import operator
import os
import pathlib
import time
from collections.abc import Callable
from typing import Any

import pydantic
import pytest

from tests.bench._helpers import check_records
from tests.conftest import count_keys
from tests.patterns import _tasks
from tether.bench.engine import Engine
from tether.bench.executor.faas import FaasConfig
from tether.bench.record import JSONRecordLogger
from tether.bench.registry import get_plugin
from tether.bench.run import BenchmarkConfig, make_run_dir, run
from tether.exceptions import TaskExecutionFailed


def add(*values: int) -> int:
    return sum(values)


def test_faas_config_is_typed_and_registered() -> None:
    assert get_plugin('executor', 'faas') is FaasConfig
    assert FaasConfig(workers=3).get_workers() == 3
    assert FaasConfig(mode='service').get_workers() is None
    with pytest.raises(pydantic.ValidationError, match='mode'):
        FaasConfig(mode='cloud')  # type: ignore[arg-type]
    with pytest.raises(pydantic.ValidationError, match='workers'):
        FaasConfig(workers=0)
    # The token is never part of the configuration (it comes from the environment).
    with pytest.raises(pydantic.ValidationError, match='token'):
        FaasConfig.model_validate({'token': 'secret'})


def test_faas_executor_on_a_running_service(
    faas_local: Any,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: pathlib.Path,
) -> None:
    monkeypatch.setenv('TETHER_FAAS_TOKEN', faas_local.token)
    config = FaasConfig(
        mode='service',
        service_url=faas_local.url,
        endpoint_id=faas_local.endpoint_id,
    )
    records = tmp_path / 'tasks.jsonl'
    with Engine(config.get_executor(), record_logger=JSONRecordLogger(records)) as engine:
        futures = engine.map_futures(add, range(4), range(4))
        total = engine.submit(add, *futures)
        bad = engine.submit(operator.truediv, 1, 0)
        assert total.result(timeout=60) == 12
        with pytest.raises(TaskExecutionFailed, match='ZeroDivisionError'):
            bad.result(timeout=60)
    rows = {r['task_id']: r for r in check_records(records, all_succeed=False)}
    assert rows[total.task_id]['success']
    assert rows[total.task_id]['execution']['pid'] != os.getpid()  # a worker process ran it
    failed = rows[bad.task_id]
    assert not failed['success']
    assert 'ZeroDivisionError' in failed['exception']['traceback']  # the worker's traceback


def test_globus_compute_config_is_faas_at_an_endpoint(
    faas_local: Any,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """TaPS's GlobusComputeConfig(endpoint=...) runs on tether's function service."""
    from tether.bench.executor.faas import GlobusComputeConfig

    assert get_plugin('executor', 'globus') is GlobusComputeConfig
    monkeypatch.setenv('TETHER_FAAS_TOKEN', faas_local.token)
    config = GlobusComputeConfig(endpoint=faas_local.endpoint_id, service_url=faas_local.url)
    assert config.mode == 'service'
    assert config.endpoint_id == faas_local.endpoint_id
    executor = config.get_executor()
    try:
        assert executor.submit(add, 2, 3).result(timeout=60) == 5
    finally:
        executor.shutdown()
    with pytest.raises(pydantic.ValidationError, match='different endpoints'):
        GlobusComputeConfig(endpoint='a', endpoint_id='b')


def test_faas_tasks_with_large_inputs_and_results(
    make_executor: Callable[[str], concurrent.futures.Executor],
) -> None:
    """Several tasks in flight with 500 kB in and out each: all come back (none hangs)."""
    from tether.bench.apps.synthetic import noop_task

    size = 500_000
    with Engine(make_executor('faas')) as engine:
        futures = [engine.submit(noop_task, os.urandom(size), output_size=size) for _ in range(4)]
        assert [len(f.result(timeout=60)) for f in futures] == [size] * 4


def test_faas_in_process_from_a_run_config(
    tmp_path: pathlib.Path,
    redis_store_options: dict[str, Any],
) -> None:
    config = BenchmarkConfig.from_dict(
        {
            'app': {'name': 'synthetic', 'structure': 'diamond', 'task_count': 3},
            'engine': {
                'executor': {'name': 'faas', 'workers': 1},
                'transformer': {
                    'name': 'store',
                    'connector': {'kind': 'redis', 'options': redis_store_options},
                },
            },
        },
    )
    run_dir = make_run_dir(config, tmp_path)
    summary = run(config, run_dir)
    assert summary['success'], summary
    assert summary['executor'] == 'faas'
    assert summary['workers'] == 1
    check_records(run_dir / 'tasks.jsonl')


def test_store_executor_on_ray(
    ray_executor: concurrent.futures.Executor,
    redis_client: Any,
    redis_store_options: dict[str, Any],
) -> None:
    """tether.plugins.ray under a StoreExecutor (on the tests' Ray node): no key leaks."""
    from tether.connectors.redis import RedisConnector
    from tether.plugins.ray import RayExecutor
    from tether.store import Store
    from tether.store.executor import ProxySize, StoreExecutor
    from tether.store.ref import OwnedProxy

    prefix = redis_store_options['prefix']
    store = Store(f'ray-{prefix}', RedisConnector(**redis_store_options), register=True)
    try:
        with StoreExecutor(
            RayExecutor(),  # Ray is initialised (ray_executor): this one leaves it running
            store,
            should_proxy=ProxySize(1000),
            close_store=False,
        ) as executor:
            assert executor.submit(_tasks.length, b'x' * 5000).result(timeout=120) == 5000
            result = executor.submit(_tasks.make_bytes, 5000).result(timeout=120)
            assert isinstance(result, OwnedProxy)
            assert result == b'x' * 5000
            del result
            gc.collect()
        deadline = time.monotonic() + 10
        while count_keys(redis_client, prefix) and time.monotonic() < deadline:
            gc.collect()
            time.sleep(0.05)
        assert count_keys(redis_client, prefix) == 0
    finally:
        store.close()
