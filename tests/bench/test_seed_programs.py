"""The seed's figures 2.3-2.6 run with only the imports and the command name changed."""

from __future__ import annotations

import json
import os
import pathlib
import subprocess
import sys
from typing import Any

from click.testing import CliRunner

from tests.bench._helpers import check_records
from tether.cli import cli

HERE = pathlib.Path(__file__).resolve().parent / 'seed_programs'
ROOT = HERE.parents[2]
TETHER = str(pathlib.Path(sys.executable).parent / 'tether')


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env['PYTHONPATH'] = os.pathsep.join(p for p in (str(ROOT), env.get('PYTHONPATH')) if p)
    return env


def _only_run(base: pathlib.Path) -> pathlib.Path:
    runs = [p for p in (base / 'runs').iterdir() if p.is_dir()]
    assert len(runs) == 1, runs
    return runs[0]


def test_fig_2_3_app_registered_and_run_from_the_cli(tmp_path: pathlib.Path) -> None:
    result = subprocess.run(
        [
            TETHER,
            'bench',
            'run',
            '--import',
            'tests.bench.seed_programs.fig_2_3',
            '--app',
            'foo',
            '--app.sleep',
            '0.01',
            '--app.count',
            '3',
            '--executor',
            'thread-pool',
            '--json',
        ],
        cwd=tmp_path,
        env=_env(),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    summary = json.loads(result.stdout)
    assert summary['app'] == 'foo'
    assert summary['tasks']['completed'] == 3
    run_dir = _only_run(tmp_path)
    assert (run_dir / 'foo.txt').read_text() == '3 tasks\n'
    check_records(run_dir / 'tasks.jsonl')
    # The required option with no default is reported, not guessed.
    missing = subprocess.run(
        [TETHER, 'bench', 'run', '--import',
         'tests.bench.seed_programs.fig_2_3', '--app', 'foo', '--executor', 'thread-pool'],
        cwd=tmp_path,
        env=_env(),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )  # fmt: skip
    assert missing.returncode != 0
    assert 'app.sleep' in missing.stderr


def test_fig_2_5_program(tmp_path: pathlib.Path) -> None:
    result = subprocess.run(
        [sys.executable, str(HERE / 'fig_2_5.py')],
        cwd=tmp_path,
        env=_env(),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    run_dir = _only_run(tmp_path)
    assert (run_dir / 'cholesky.npy').exists()
    assert 'max |LL^T - A|' in result.stderr


def test_fig_2_4_and_2_6_config_files(
    tmp_path: pathlib.Path,
    monkeypatch: Any,
    redis_client: Any,
) -> None:
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(
        cli,
        [
            'bench',
            'run',
            '--config',
            str(HERE / 'fig_2_4.toml'),
            str(HERE / 'fig_2_6.toml'),
            '--engine.executor.max_processes',
            '2',
            '--json',
        ],
        catch_exceptions=False,
    )
    assert result.exit_code == 0, result.output
    summary = json.loads(result.stdout)
    assert summary['executor'] == 'process-pool'
    assert summary['transformer'] == 'proxystore'
    assert summary['filter'] == 'object-size'
    run_dir = _only_run(tmp_path)
    assert run_dir.name.startswith('cholesky_process-pool_')
    config = (run_dir / 'config.toml').read_text()
    assert 'max_processes = 2' in config  # the command line wins over the file
    assert 'min_size = 1000' in config
    assert (run_dir / 'log.txt').exists()
    records = check_records(run_dir / 'tasks.jsonl')
    # 25x25 float64 tiles (5 kB) are within the filter: they went through Redis.
    assert any(r['execution']['input_resolve_time'] > 0 for r in records)
