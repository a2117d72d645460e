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
