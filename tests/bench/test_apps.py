"""Every application runs to completion, at one small size, on every executor.

Each run uses the Store transformer over Redis (so task data of every app crosses every
executor as proxies) and leaves complete, consistent records. On the thread pool, each
app runs through ``tether bench run`` with TOML files and command-line options.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import csv
import json
import pathlib
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

from tests.bench._helpers import check_records
from tether.bench.engine import Engine
from tether.bench.record import JSONRecordLogger
from tether.bench.registry import get_plugin
from tether.bench.transformer.store import StoreTransformerConfig

EXECUTORS = ('thread-pool', 'process-pool', 'dask', 'parsl', 'ray', 'faas')

SMALL: dict[str, dict[str, Any]] = {
    'cholesky': {'matrix_size': 60, 'block_size': 20},
    'docking': {
        'initial_simulations': 4,
        'num_iterations': 1,
        'batch_size': 2,
        'exhaustiveness': 1,
    },
    'montage': {'synthetic_rows': 2, 'synthetic_columns': 2, 'synthetic_size': 24},
    'fedlearn': {'clients': 2, 'rounds': 1, 'epochs': 1},
    'mapreduce': {'map_tasks': 3, 'words_per_task': 500},
    'moldesign': {'search_size': 30, 'initial_count': 4, 'batch_size': 1, 'search_count': 5},
    'physics': {'simulations': 2, 'ball_count': 2, 'steps': 100},
    'synthetic': {'structure': 'diamond', 'task_count': 3, 'task_data_bytes': 20_000},
    'failures': {
        'base': 'synthetic',
        'base_config': {'structure': 'reduce', 'task_count': 4},
        'failure_rate': 0.5,
        'transient': False,
    },
}


def _csv(path: pathlib.Path) -> list[dict[str, str]]:
    with open(path, encoding='utf-8') as f:
        return list(csv.DictReader(f))


def check_outputs(app: str, run_dir: pathlib.Path) -> None:
    if app == 'cholesky':
        lower = np.load(run_dir / 'cholesky.npy')
        assert np.allclose(np.triu(lower, 1), 0)
    elif app == 'docking':
        rows = _csv(run_dir / 'docking.csv')
        assert [r['iteration'] for r in rows] == ['0'] * 4 + ['1'] * 2
        assert all(float(r['score']) < 0 for r in rows)
    elif app == 'montage':
        from tether.bench.apps.montage import read_fits

        mosaic, _ = read_fits(run_dir / 'data' / 'mosaic.fits')
        assert np.isfinite(mosaic).mean() > 0.9
    elif app == 'fedlearn':
        rows = _csv(run_dir / 'fedlearn.csv')
        assert len(rows) == 1
        assert 0 <= float(rows[0]['accuracy']) <= 1
    elif app == 'mapreduce':
        lines = (run_dir / 'mapreduce.txt').read_text().splitlines()
        counts = [int(line.split()[1]) for line in lines]
        assert counts == sorted(counts, reverse=True)
        assert len(lines) == 10
    elif app == 'moldesign':
        rows = _csv(run_dir / 'moldesign.csv')
        assert len(rows) == 5
        assert all(5 < float(r['ip']) < 30 for r in rows)  # eV
    elif app == 'physics':
        rows = _csv(run_dir / 'physics.csv')
        assert len(rows) == 4
    elif app == 'failures':
        report = json.loads((run_dir / 'failures.json').read_text())
        assert report['injected'] >= 1
        assert report['injected_failed'] == report['injected']
        assert report['base_app_completed'] is False


def run_from_the_cli(
    app: str,
    redis_store_options: dict[str, Any],
    tmp_path: pathlib.Path,
    monkeypatch: pytest.MonkeyPatch,
) -> pathlib.Path:
    """``tether bench run -c app.toml store.toml --OPTION ...``: return the run directory."""
    import tomli_w
    from click.testing import CliRunner

    from tether.cli import cli

    monkeypatch.chdir(tmp_path)
    app_toml = tmp_path / 'app.toml'
    app_toml.write_text(tomli_w.dumps({'app': {'name': app, **SMALL[app]}}))
    store_toml = tmp_path / 'store.toml'
    store_toml.write_text(
        tomli_w.dumps(
            {
                'engine': {
                    'executor': {'name': 'process-pool'},  # replaced on the command line
                    'transformer': {
                        'name': 'store',
                        'connector': {'kind': 'redis', 'options': redis_store_options},
                    },
                },
            },
        ),
    )
    result = CliRunner().invoke(
        cli,
        ['bench', 'run', '-c', str(app_toml), str(store_toml), '--executor', 'thread-pool',
         '--engine.executor.max_threads', '2', '--run.dir_format', 'run', '--json'],
        catch_exceptions=False,
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    summary = json.loads(result.stdout)
    assert summary['transformer'] == 'store'
    assert summary['executor'] == 'thread-pool'
    assert summary['app'] == app
    return tmp_path / 'run'


@pytest.mark.parametrize('executor', EXECUTORS)
@pytest.mark.parametrize('app', sorted(SMALL))
def test_app_on_executor(  # noqa: PLR0917 (pytest passes fixtures by name)
    app: str,
    executor: str,
    make_executor: Callable[[str], concurrent.futures.Executor],
    redis_store_options: dict[str, Any],
    tmp_path: pathlib.Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    if executor == 'thread-pool':
        # On the thread pool, each app runs from the command line and TOML files.
        run_dir = run_from_the_cli(app, redis_store_options, tmp_path, monkeypatch)
        check_records(run_dir / 'tasks.jsonl', all_succeed=app != 'failures')
        check_outputs(app, run_dir)
        return
    config = get_plugin('app', app).model_validate({'name': app, **SMALL[app]})
    transformer = StoreTransformerConfig.model_validate(
        {'connector': {'kind': 'redis', 'options': redis_store_options}},
    ).get_transformer()
    records = tmp_path / 'tasks.jsonl'
    instance = config.get_app()
    with (
        contextlib.closing(instance),
        Engine(
            make_executor(executor),
            transformer=transformer,
            record_logger=JSONRecordLogger(records),
        ) as engine,
    ):
        instance.run(engine, tmp_path)
    check_records(records, all_succeed=app != 'failures')
    check_outputs(app, tmp_path)
