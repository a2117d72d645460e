"""``tether faas dev`` and the seeds' programs, run as programs against it."""

from __future__ import annotations

import json
import os
import pathlib
import signal
import stat
import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import pytest

from tests.conftest import RUN_ID

HERE = pathlib.Path(__file__).resolve().parent
ROOT = HERE.parents[1]


class Dev:
    def __init__(self, proc: subprocess.Popen[str], info: dict[str, Any], home: pathlib.Path):
        self.proc = proc
        self.info = info
        self.home = home


@pytest.fixture(scope='module')
def faas_home_module(tmp_path_factory: pytest.TempPathFactory) -> Iterator[pathlib.Path]:
    home = pathlib.Path(os.environ.get('TMPDIR', '/tmp')) / f'tfh-{RUN_ID}-dev'
    home.mkdir(mode=0o700)
    mp = pytest.MonkeyPatch()
    mp.setenv('TETHER_FAAS_HOME', str(home))
    mp.delenv('TETHER_FAAS_URL', raising=False)
    mp.delenv('TETHER_FAAS_TOKEN', raising=False)
    yield home
    mp.undo()
    import shutil

    shutil.rmtree(home, ignore_errors=True)


@pytest.fixture(scope='module')
def dev(faas_home_module: pathlib.Path) -> Iterator[Dev]:
    """``tether faas dev --json`` in its own process, with a private TETHER_FAAS_HOME
    (one for the module; stopping it must remove its file)."""
    faas_home = faas_home_module
    env = {**os.environ, 'PYTHONPATH': str(ROOT)}
    log = open(faas_home / 'dev.log', 'w')  # noqa: SIM115
    proc = subprocess.Popen(
        [
            sys.executable,
            '-c',
            'from tether.cli import main; main()',
            'faas',
            'dev',
            '--json',
            '--max-workers',
            '2',
        ],
        stdout=subprocess.PIPE,
        stderr=log,
        text=True,
        env=env,
        cwd=ROOT,
    )
    assert proc.stdout is not None
    with proc.stdout, log:
        line = proc.stdout.readline()
        if not line:
            proc.wait(10)
            pytest.fail(f'tether faas dev failed: {(faas_home / "dev.log").read_text()}')
        info = json.loads(line)
        yield Dev(proc, info, faas_home)
        proc.send_signal(signal.SIGINT)
        proc.wait(30)
    assert proc.returncode == 0
    assert not (faas_home / 'dev.json').exists(), 'the dev file outlived tether faas dev'


def run_program(name: str, *args: str) -> str:
    proc = subprocess.run(
        [sys.executable, str(HERE / 'programs' / name), *args],
        capture_output=True,
        text=True,
        timeout=110,
        env={**os.environ, 'PYTHONPATH': str(ROOT)},
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def test_dev_prints_endpoint_id_and_announces_itself_privately(dev: Dev) -> None:
    assert set(dev.info) == {'url', 'endpoint_id', 'pid'}
    assert 'token' not in dev.info  # the token only goes to the private file
    path = dev.home / 'dev.json'
    mode = stat.S_IMODE(path.stat().st_mode)
    assert mode == 0o600
    assert stat.S_IMODE(dev.home.stat().st_mode) == 0o700
    data = json.loads(path.read_text())
    assert data['endpoint_id'] == dev.info['endpoint_id']
    assert data['token'].startswith('tfu_')


def test_a_second_dev_is_refused(dev: Dev) -> None:
    proc = subprocess.run(
        [sys.executable, '-c', 'from tether.cli import main; main()', 'faas', 'dev', '--json'],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert proc.returncode != 0
    assert 'already runs' in proc.stderr


def test_figure_3_10_runs_with_only_imports_changed(dev: Dev) -> None:
    out = run_program('fig_3_10.py', dev.info['endpoint_id'], f'tether-test-{RUN_ID}-fig310:')
    assert 'fig 3.10 ok' in out


def test_funcx_listings_run_with_only_imports_changed(dev: Dev) -> None:
    out = run_program('funcx_listing.py', dev.info['endpoint_id'], f'tether-test-{RUN_ID}-l3')
    assert 'funcx listings ok' in out


def test_client_and_executor_without_arguments_use_dev(dev: Dev) -> None:
    code = (
        'from tether.faas import Client, Executor\n'
        'c = Client()\n'
        f'assert c.service_url == {dev.info["url"]!r}\n'
        'with Executor() as ex:\n'
        '    assert ex.submit(pow, 2, 10).result() == 1024\n'
        'print("ok")\n'
    )
    proc = subprocess.run(
        [sys.executable, '-c', code], capture_output=True, text=True, timeout=60, check=False
    )
    assert proc.returncode == 0, proc.stderr


def test_client_without_service_says_what_to_do(faas_home: pathlib.Path) -> None:
    from tether.exceptions import ConfigError
    from tether.faas import Client

    with pytest.raises(ConfigError, match='tether faas dev'):
        Client()
