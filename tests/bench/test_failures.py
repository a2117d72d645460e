"""The failures app: injected failures are reported, and recovered where the executor retries."""

from __future__ import annotations

import concurrent.futures
import json
import pathlib
from typing import Any

import pytest

from tests.bench._helpers import check_records
from tether.bench.apps.failures import FailuresAppConfig, inject
from tether.bench.engine import Engine
from tether.bench.record import JSONRecordLogger, read_records


def run_failures(engine: Engine, tmp_path: pathlib.Path, **options: Any) -> dict[str, Any]:
    config = FailuresAppConfig.model_validate(
        {
            'base': 'synthetic',
            'base_config': {'structure': 'bag', 'task_count': 6},
            **options,
        },
    )
    app = config.get_app()
    with engine:
        app.run(engine, tmp_path)
    app.close()
    return json.loads((tmp_path / 'failures.json').read_text())  # type: ignore[no-any-return]


@pytest.mark.parametrize(
    ('kind', 'error'),
    [
        ('zero-division', 'ZeroDivisionError'),
        ('import', 'ModuleNotFoundError'),
        ('memory', 'MemoryError'),
        ('ulimit', 'OSError'),
        ('walltime', 'TimeoutError'),
        ('worker-kill', 'RuntimeError'),  # refused on a thread pool: it would kill the client
    ],
)
def test_failures_are_reported(kind: str, error: str, tmp_path: pathlib.Path) -> None:
    records = tmp_path / 'tasks.jsonl'
    engine = Engine(
        concurrent.futures.ThreadPoolExecutor(2),
        record_logger=JSONRecordLogger(records),
    )
    report = run_failures(
        engine,
        tmp_path,
        failure_type=kind,
        failure_rate=0.5,
        transient=False,
        walltime=0.01,
    )
    assert report['injected'] >= 1
    assert report['injected_by_type'] == {kind: report['injected']}
    assert report['injected_failed'] == report['injected']
    assert report['injected_recovered'] == 0
    assert report['base_app_completed'] is False
    failed = [r for r in read_records(records) if not r['success']]
    assert len(failed) == report['injected']
    assert {r['exception']['type'] for r in failed} == {error}
    assert all(', in inject' in (r['exception']['traceback'] or '') for r in failed)


def test_dependency_failures_are_counted(tmp_path: pathlib.Path) -> None:
    engine = Engine(concurrent.futures.ThreadPoolExecutor(2))
    config = FailuresAppConfig(
        base='synthetic',
        base_config={'structure': 'sequential', 'task_count': 5},
        failure_type='dependency',
        failure_rate=1.0,
        transient=False,
        seed=1,
    )
    app = config.get_app()
    with engine:
        app.run(engine, tmp_path)
    report = json.loads((tmp_path / 'failures.json').read_text())
    assert report['injected'] == 5
    assert report['injected_failed'] == 5


def test_transient_failures_recover_with_dask_retries(
    dask_client: Any,
    tmp_path: pathlib.Path,
) -> None:
    from tether.bench.executor.dask import DaskDistributedExecutor

    records = tmp_path / 'tasks.jsonl'
    engine = Engine(
        DaskDistributedExecutor(dask_client, close_client=False, retries=1),
        record_logger=JSONRecordLogger(records),
    )
    report = run_failures(engine, tmp_path, failure_rate=0.5, transient=True)
    assert report['injected'] >= 1
    assert report['injected_recovered'] == report['injected']
    assert report['injected_failed'] == 0
    assert report['base_app_completed'] is True
    check_records(records)


def test_worker_kill_on_dask_is_recovered(dask_client: Any, tmp_path: pathlib.Path) -> None:
    # Dask reschedules the tasks of a worker that died; the nanny restarts the worker.
    from tether.bench.executor.dask import DaskDistributedExecutor

    engine = Engine(DaskDistributedExecutor(dask_client, close_client=False))
    report = run_failures(
        engine,
        tmp_path,
        failure_type='worker-kill',
        failure_rate=0.2,
        transient=True,
        seed=3,
    )
    assert report['injected'] >= 1
    assert report['injected_recovered'] == report['injected']
    assert report['base_app_completed'] is True
    dask_client.wait_for_workers(2, timeout=60)


def test_inject_rejects_unknown_kind() -> None:
    with pytest.raises(ValueError, match='unknown failure type'):
        inject('meteor', 0)
    with pytest.raises(ValueError, match='cannot inject into itself'):
        FailuresAppConfig(base='failures')
