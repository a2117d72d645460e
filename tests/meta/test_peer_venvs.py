"""The benchmarks' peer virtual environments default to an ignored folder of the checkout.

A machine running the benchmarks needs nothing outside the repository: each
``benchmarks/peer*_env.sh`` places its environment under ``benchmarks/.peer-venvs/``,
which git ignores, unless a variable or an argument says otherwise.
"""

from __future__ import annotations

import os
import pathlib
import shutil
import subprocess

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
SCRIPTS = sorted((ROOT / 'benchmarks').glob('peer*_env.sh'))
# Every variable that moves one environment or all of them.
OVERRIDES = (
    'ACADEMY_VENV',
    'PEER_COLMENA_VENV',
    'PEER_ENDPOINTS_VENV',
    'PEER_VENV',
    'PEER_VENVS_DIR',
    'PEER_ZMQ_VENV',
)


def _python_path(script: pathlib.Path, **env: str) -> pathlib.Path:
    base = {k: v for k, v in os.environ.items() if k not in OVERRIDES}
    out = subprocess.run(
        ['bash', str(script)],
        env={**base, 'PEER_VENV_PRINT_ONLY': '1', **env},
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    ).stdout
    return pathlib.Path(out.strip().splitlines()[-1])


def test_every_peer_script_is_covered() -> None:
    names = {s.name for s in SCRIPTS}
    assert {'peer_env.sh', 'peer_zmq_env.sh', 'peer_endpoints_env.sh'} <= names
    assert len(SCRIPTS) >= 5


@pytest.mark.skipif(shutil.which('git') is None, reason='git is not installed')
@pytest.mark.parametrize('script', SCRIPTS, ids=[s.name for s in SCRIPTS])
def test_default_venv_is_inside_the_checkout_and_ignored(script: pathlib.Path) -> None:
    python = _python_path(script)
    venv = python.parent.parent
    assert venv.is_relative_to(ROOT / 'benchmarks' / '.peer-venvs'), venv
    for path in (venv, python, venv.with_name(venv.name + '.lock')):
        check = subprocess.run(
            ['git', 'check-ignore', '--no-index', '-q', str(path)], cwd=ROOT, check=False
        )
        assert check.returncode == 0, f'{path} is not ignored by git'


@pytest.mark.parametrize('script', SCRIPTS, ids=[s.name for s in SCRIPTS])
def test_venv_folder_can_be_moved(script: pathlib.Path, tmp_path: pathlib.Path) -> None:
    python = _python_path(script, PEER_VENVS_DIR=str(tmp_path))
    assert python.parent.parent.parent == tmp_path
    moved = tmp_path / 'one'
    assert subprocess.run(
        ['bash', str(script), str(moved)],
        env={**os.environ, 'PEER_VENV_PRINT_ONLY': '1'},
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    ).stdout.strip().splitlines()[-1] == str(moved / 'bin' / 'python')
