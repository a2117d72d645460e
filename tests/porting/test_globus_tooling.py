"""A Globus Compute user's tooling with the imports changed: the home-folder helper and
the diagnostic report (``globus-compute-diagnostic`` is ``tether faas diagnostic``),
run as the user runs them: the helper in a program, the report as a command."""

from __future__ import annotations

import gzip
import os
import pathlib
import subprocess
import sys

import pytest

# from globus_compute_sdk.sdk.compute_dir import ensure_compute_dir
# from globus_compute_sdk.sdk.diagnostic import get_recent_endpoints
from tether.faas import ensure_compute_dir
from tether.faas.diagnostic import get_recent_endpoints

SECRET = 'tok-3b1f-never-shown'


def user_program() -> list[str]:
    """A user's script: find the home folder, list the endpoints it has there."""
    home = ensure_compute_dir()
    return [p.name for p in get_recent_endpoints(home / 'endpoints', [])]


@pytest.fixture
def home(tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch) -> pathlib.Path:
    folder = tmp_path / 'gc-home'
    monkeypatch.setenv('TETHER_FAAS_HOME', str(folder))  # the SDK's GLOBUS_COMPUTE_USER_DIR
    return folder


def test_the_program_finds_and_creates_the_home(home: pathlib.Path) -> None:
    assert user_program() == []
    assert home.is_dir()
    (home / 'endpoints' / 'hpc').mkdir(parents=True)
    assert user_program() == ['hpc']


def test_the_diagnostic_command_as_a_user_runs_it(
    home: pathlib.Path, tmp_path: pathlib.Path
) -> None:
    ep = home / 'endpoints' / 'hpc'
    ep.mkdir(parents=True)
    (ep / 'config.toml').write_text(f'engine = "process"\nbroker_password = "{SECRET}"\n')
    (ep / 'token').write_text(SECRET)
    (ep / 'endpoint.log').write_text('started\nworker 3 lost: OOM\n')
    out = tmp_path / 'diag.txt.gz'
    env = {**os.environ, 'TETHER_FAAS_HOME': str(home)}
    done = subprocess.run(
        [
            sys.executable,
            '-c',
            'from tether.cli import main; main()',
            'faas',
            'diagnostic',
            '-o',
            str(out),
        ],
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    report = gzip.decompress(out.read_bytes()).decode()
    assert ' | worker 3 lost: OOM' in report
    assert 'broker_password = "REDACTED"' in report
    assert SECRET not in report
