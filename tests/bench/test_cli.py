"""The command line: configuration merging, per-plugin help, list, errors, progress."""

from __future__ import annotations

import json
import pathlib
from typing import Any

import pytest
from click.testing import CliRunner

from tether.bench.engine import EngineStats
from tether.bench.run._options import parse_run_args
from tether.bench.run._progress import format_stats
from tether.bench.run.config import BenchmarkConfig, merge, redact
from tether.cli import cli
from tether.exceptions import ConfigError, PluginNotFoundError


def write(path: pathlib.Path, text: str) -> str:
    path.write_text(text)
    return str(path)


def test_files_merge_in_order_with_the_command_line_on_top(tmp_path: pathlib.Path) -> None:
    a = write(
        tmp_path / 'a.toml',
        '[app]\nname = "cholesky"\nmatrix_size = 100\nblock_size = 25\n'
        '[engine.executor]\nname = "process-pool"\nmax_processes = 3\n',
    )
    b = write(tmp_path / 'b.toml', '[app]\nblock_size = 50\n[logging]\nlevel = "DEBUG"\n')
    parsed = parse_run_args(['-c', a, b, '--app.matrix_size', '200'])
    config = BenchmarkConfig.from_dict(parsed.config)
    assert config.app.model_dump() == {
        'name': 'cholesky',
        'matrix_size': 200,
        'block_size': 50,
        'seed': 0,
    }
    assert config.engine.executor.model_dump() == {
        'name': 'process-pool',
        'max_processes': 3,
        'context': 'spawn',
    }
    assert config.logging.level == 'DEBUG'
    # Another executor on the command line: the file's process-pool options do not apply.
    parsed = parse_run_args(['-c', a, '--executor', 'thread-pool'])
    assert BenchmarkConfig.from_dict(parsed.config).engine.executor.name == 'thread-pool'


def test_merge_replaces_a_table_of_another_plugin() -> None:
    merged = merge(
        [
            {'engine': {'executor': {'name': 'dask', 'workers': 4}}},
            {'engine': {'executor': {'name': 'ray'}}},
            {'engine': {'executor': {'num_cpus': 2}}},
        ],
    )
    assert merged == {'engine': {'executor': {'name': 'ray', 'num_cpus': 2}}}


def test_help_shows_only_the_chosen_plugins() -> None:
    text = parse_run_args(
        ['--app', 'cholesky', '--executor', 'dask', '--transformer', 'store', '--help'],
    ).help
    assert text is not None
    assert '--app.matrix_size' in text
    assert '--engine.executor.scheduler' in text
    assert '--engine.transformer.connector.kind' in text
    assert '--app.task_count' not in text  # synthetic's
    assert '--engine.executor.max_processes' not in text  # process-pool's
    assert '--engine.filter' not in text
    result = CliRunner().invoke(cli, ['bench', 'run', '--app', 'synthetic', '--help'])
    assert result.exit_code == 0
    assert '--app.structure' in result.output
    assert '--engine.executor.max_processes' in result.output  # the default executor


def test_values_are_typed_and_validated() -> None:
    parsed = parse_run_args(
        [
            '--app',
            'failures',
            '--app.base_config',
            '{"task_count": 2}',
            '--executor',
            'parsl-htex',
            '--engine.executor.provider.options',
            '{"init_blocks": 1}',
            '--transformer',
            'file',
            '--filter',
            'object-type',
            '--engine.filter.types',
            '["numpy.ndarray"]',
        ],
    )
    config = BenchmarkConfig.from_dict(parsed.config)
    assert config.app.base_config == {'task_count': 2}  # type: ignore[attr-defined]
    assert config.engine.filter is not None
    assert config.engine.filter.types == ['numpy.ndarray']  # type: ignore[attr-defined]
    with pytest.raises(ConfigError, match=r'app\.matrix_size'):
        BenchmarkConfig.from_dict(
            parse_run_args(['--app', 'cholesky', '--app.matrix_size', 'big']).config,
        )
    with pytest.raises(ConfigError, match='takes JSON'):
        parse_run_args(['--app', 'failures', '--app.base_config', '{nope'])
    with pytest.raises(ConfigError, match='unrecognized arguments'):
        parse_run_args(['--app', 'cholesky', '--app.no_such_option', '1'])
    with pytest.raises(PluginNotFoundError, match='no app named'):
        parse_run_args(['--app', 'nonesuch'])
    with pytest.raises(ConfigError, match='no application'):
        BenchmarkConfig.from_dict({})
    with pytest.raises(ConfigError, match='unknown connector kind'):
        BenchmarkConfig.from_dict(
            {
                'app': {'name': 'synthetic'},
                'engine': {'transformer': {'name': 'store', 'connector': {'kind': 'x'}}},
            },
        )
    with pytest.raises(ConfigError, match='cannot read'):
        parse_run_args(['-c', '/no/such/file.toml'])


def test_secrets_are_redacted() -> None:
    data = {'engine': {'transformer': {'connector': {'options': {'password': 'hunter2'}}}}}
    assert 'hunter2' not in json.dumps(redact(data))


def test_run_list_and_errors_from_the_cli(tmp_path: pathlib.Path, monkeypatch: Any) -> None:
    monkeypatch.chdir(tmp_path)
    runner = CliRunner()
    listed = runner.invoke(cli, ['bench', 'list', '--json'])
    assert listed.exit_code == 0
    data = json.loads(listed.stdout)
    names = {kind: {e['name'] for e in entries} for kind, entries in data.items()}
    assert {'cholesky', 'synthetic', 'fedlearn', 'moldesign', 'physics'} <= names['app']
    assert {'thread-pool', 'process-pool', 'dask', 'parsl-local', 'ray'} <= names['executor']
    assert {'store', 'proxystore', 'file'} <= names['transformer']
    result = runner.invoke(
        cli,
        [
            'bench',
            'run',
            '--app',
            'mapreduce',
            '--executor',
            'thread-pool',
            '--app.map_tasks',
            '2',
            '--app.words_per_task',
            '100',
            '--transformer',
            'store',
            '--progress',
            '--run.dir_format',
            'out/{name}-{transformer}',
        ],
    )
    assert result.exit_code == 0, result.output
    run_dir = tmp_path / 'out' / 'mapreduce-store'
    assert {p.name for p in run_dir.iterdir()} >= {
        'config.toml',
        'environment.json',
        'log.txt',
        'mapreduce.txt',
        'summary.json',
        'tasks.jsonl',
    }
    env = json.loads((run_dir / 'environment.json').read_text())
    assert env['cpu_count'] >= 1
    assert 'tether' in env['packages']
    bad = runner.invoke(cli, ['bench', 'run', '--app', 'cholesky', '--app.block_size', '0'])
    assert bad.exit_code == 2
    assert 'app.block_size' in bad.output
    failed = runner.invoke(
        cli,
        ['bench', 'run', '--app', 'mapreduce', '--executor', 'thread-pool', '--app.mode', 'files',
         '--app.files', str(tmp_path / 'none-*.txt')],
    )  # fmt: skip
    assert failed.exit_code == 1
    assert 'no file matches' in failed.output
    summaries = [json.loads(p.read_text()) for p in tmp_path.glob('runs/*/summary.json')]
    assert [s['success'] for s in summaries] == [False]


def test_progress_line() -> None:
    line = format_stats(EngineStats(10, 1, 2, 6, 1), 3.25)
    assert line == 'tasks: 10 submitted, 1 waiting, 2 running, 6 done, 1 failed [3.2 s]'
