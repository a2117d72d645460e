"""``tether bench plot``: figures 2.8-2.10 drawn from real run directories."""

from __future__ import annotations

import json
import pathlib
from typing import Any

import pytest
from click.testing import CliRunner

from tether.bench.plot import find_runs, table
from tether.bench.run import BenchmarkConfig, make_run_dir, run
from tether.cli import cli
from tether.exceptions import ConfigError


def _run(base: pathlib.Path, app: dict[str, Any], executor: dict[str, Any], **engine: Any) -> None:
    config = BenchmarkConfig.from_dict(
        {
            'app': app,
            'engine': {'executor': executor, **engine},
            'run': {'dir_format': '{name}_{timestamp}'},
        },
    )
    run(config, make_run_dir(config, base))


def test_plots(tmp_path: pathlib.Path) -> None:
    runs = tmp_path / 'runs'
    for workers in (1, 2):
        _run(
            runs,
            {'name': 'synthetic', 'task_count': 10, 'bag_max_running': workers},
            {'name': 'thread-pool', 'max_threads': workers},
        )
    for size in (100, 10_000):
        _run(
            runs,
            {'name': 'synthetic', 'task_count': 4, 'task_data_bytes': size},
            {'name': 'thread-pool', 'max_threads': 2},
            transformer={'name': 'store', 'connector': {'kind': 'file'}},
        )
    _run(runs, {'name': 'cholesky', 'matrix_size': 40, 'block_size': 20}, {'name': 'thread-pool'})
    found = find_runs([runs])
    assert len(found) == 5
    makespan = table(found, 'makespan')
    assert {r['app'] for r in makespan} == {'synthetic', 'cholesky'}
    scaling = table(found, 'scaling')
    assert [r['workers'] for r in scaling if r['transformer'] == 'none'] == [1, 2]
    assert all(r['tasks_per_s'] > 0 for r in scaling)
    data = table(found, 'data')
    assert [(r['transformer'], r['bytes']) for r in data if r['transformer'] == 'store'] == [
        ('store', 100),
        ('store', 10_000),
    ]
    runner = CliRunner()
    for kind in ('makespan', 'scaling', 'data'):
        out = tmp_path / 'figures' / kind
        result = runner.invoke(
            cli,
            ['bench', 'plot', str(runs), '--kind', kind, '-o', str(out), '--json'],
        )
        assert result.exit_code == 0, result.output
        assert json.loads(result.stdout)
        assert (out.parent / f'{kind}.png').stat().st_size > 1000
        assert (out.parent / f'{kind}.svg').read_text().startswith('<?xml')


def test_plot_errors(tmp_path: pathlib.Path) -> None:
    with pytest.raises(ConfigError, match='no run directories'):
        find_runs([tmp_path])
    result = CliRunner().invoke(cli, ['bench', 'plot', str(tmp_path), '--kind', 'data', '-o', 'x'])
    assert result.exit_code == 2


def _copy_run(src: pathlib.Path, dst: pathlib.Path, **summary: Any) -> None:
    """A copy of run directory ``src`` whose summary says ``summary`` instead."""
    import shutil

    shutil.copytree(src, dst)
    data = json.loads((dst / 'summary.json').read_text())
    data.update(summary)
    (dst / 'summary.json').write_text(json.dumps(data))


def _plot(runs: pathlib.Path, kind: str, out: pathlib.Path) -> tuple[list[Any], str]:
    result = CliRunner().invoke(
        cli, ['bench', 'plot', str(runs), '--kind', kind, '-o', str(out), '--json']
    )
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout), (out.parent / f'{out.name}.svg').read_text()


def test_runs_that_differ_are_not_averaged(tmp_path: pathlib.Path) -> None:
    runs = tmp_path / 'runs'
    for sleep in (0.0, 0.0, 0.05):
        _run(
            runs,
            {'name': 'synthetic', 'task_count': 2, 'task_sleep': sleep},
            {'name': 'thread-pool', 'max_threads': 2},
        )
    rows, svg = _plot(runs, 'makespan', tmp_path / 'makespan')
    # The two runs with equal parameters make one bar; the third is a bar of its own.
    assert sorted((r['app.task_sleep'], r['runs']) for r in rows) == [(0.0, 2), (0.05, 1)]
    assert all(r['failed_runs'] == 0 for r in rows)
    assert 'runs differ in: task_sleep' in svg
    assert 'task_sleep=0.05' in svg
    # The default title names what every run shares.
    assert 'Makespan (app=synthetic, workers=2, executor=thread-pool' in svg


def test_workers_and_stores_are_series_not_averages(tmp_path: pathlib.Path) -> None:
    runs = tmp_path / 'runs'
    for workers in (1, 2):
        for transformer in ({}, {'transformer': {'name': 'store', 'connector': {'kind': 'file'}}}):
            _run(
                runs,
                {'name': 'synthetic', 'task_count': 4, 'task_data_bytes': 1000},
                {'name': 'thread-pool', 'max_threads': workers},
                **transformer,
            )
    rows, svg = _plot(runs, 'scaling', tmp_path / 'scaling')
    # max_threads changes only with workers: it is not a series of its own.
    assert sorted((r['workers'], r['transformer']) for r in rows) == [
        (1, 'none'),
        (1, 'store'),
        (2, 'none'),
        (2, 'store'),
    ]
    assert 'runs differ in: transformer' in svg
    assert 'max_threads' not in svg
    rows, svg = _plot(runs, 'data', tmp_path / 'data')
    # Workers differ at one payload size: four series of one point each.
    assert len(rows) == 4
    assert {r['bytes'] for r in rows} == {1000}
    assert '1 kB' in svg  # plain tick labels: no powers of ten
    assert '10^' not in svg
    assert '\N{MULTIPLICATION SIGN}' not in svg


def test_failed_runs_are_reported(tmp_path: pathlib.Path) -> None:
    runs = tmp_path / 'runs'
    _run(runs, {'name': 'synthetic', 'task_count': 2}, {'name': 'thread-pool'})
    (good,) = list(runs.iterdir())
    _copy_run(good, runs / 'failed', success=False, error='RuntimeError: worker lost')
    _copy_run(
        good,
        runs / 'failed_other',
        success=False,
        error='boom',
        executor='process-pool',
    )
    rows, _ = _plot(runs, 'makespan', tmp_path / 'makespan')
    by_executor = {r['executor']: r for r in rows}
    assert by_executor['thread-pool']['runs'] == 1
    assert by_executor['thread-pool']['failed_runs'] == 1
    assert by_executor['thread-pool']['errors'] == ['RuntimeError: worker lost']
    assert by_executor['process-pool']['makespan_s'] is None
    assert by_executor['process-pool']['errors'] == ['boom']


def test_no_data_is_an_error_not_an_empty_image(tmp_path: pathlib.Path) -> None:
    runs = tmp_path / 'runs'
    _run(runs, {'name': 'cholesky', 'matrix_size': 20, 'block_size': 10}, {'name': 'thread-pool'})
    out = tmp_path / 'fig' / 'scaling'
    with pytest.raises(ConfigError, match='needs a synthetic run with task records'):
        table(find_runs([runs]), 'scaling')
    result = CliRunner().invoke(
        cli, ['bench', 'plot', str(runs), '--kind', 'scaling', '-o', str(out)]
    )
    assert result.exit_code == 2
    assert 'passed over' in result.output
    assert not out.parent.exists()
    (good,) = list(runs.iterdir())
    _copy_run(good, tmp_path / 'only_failed' / 'r', success=False, error='x')
    with pytest.raises(ConfigError, match='1 failed run'):
        table(find_runs([tmp_path / 'only_failed']), 'makespan')
