"""``tether faas`` command lines: each error is one ``Error: ...`` line with its remedy and
a non-zero exit, never a traceback; a user token is read from a file or the environment,
not from the command line (where ``ps`` shows it to every user)."""

from __future__ import annotations

import os
import pathlib
import socket
import subprocess
import sys
import uuid
from collections.abc import Iterator

import pytest

from tests.faas.conftest import new_user
from tether.faas._server import ServiceThread

TETHER = str(pathlib.Path(sys.executable).parent / 'tether')


def tether(
    *args: str, home: pathlib.Path, stdin: str | None = None, **env: str
) -> subprocess.CompletedProcess[str]:
    environ = {k: v for k, v in os.environ.items() if not k.startswith('TETHER_FAAS_')}
    environ.update(TETHER_FAAS_HOME=str(home), **env)
    return subprocess.run(
        [TETHER, 'faas', *args],
        capture_output=True,
        text=True,
        timeout=90,
        env=environ,
        input=stdin,
        check=False,
    )


def one_clear_line(out: subprocess.CompletedProcess[str], *words: str) -> str:
    assert out.returncode != 0, out
    assert 'Traceback' not in out.stderr, out.stderr
    errors = [line for line in out.stderr.splitlines() if line.startswith('Error:')]
    assert len(errors) == 1, out.stderr
    assert len(out.stderr.strip().splitlines()) <= 2, out.stderr
    for word in words:
        assert word in errors[0], errors[0]
    return errors[0]


@pytest.fixture
def home(tmp_path: pathlib.Path) -> pathlib.Path:
    folder = tmp_path / 'faas-home'
    folder.mkdir(mode=0o700)
    return folder


@pytest.fixture
def busy_port() -> Iterator[int]:
    with socket.socket() as s:
        s.bind(('127.0.0.1', 0))
        s.listen()
        yield s.getsockname()[1]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(('127.0.0.1', 0))
        return int(s.getsockname()[1])


def service_toml(path: pathlib.Path, database: str, port: int = 0) -> pathlib.Path:
    path.write_text(f'[service]\nport = {port}\ndatabase = "{database}"\nbroker = "memory://"\n')
    return path


def test_serve_on_a_busy_port(home: pathlib.Path, tmp_path: pathlib.Path, busy_port: int) -> None:
    config = service_toml(tmp_path / 'service.toml', 'sqlite://', busy_port)
    out = tether('serve', '--config', str(config), home=home)
    one_clear_line(out, 'cannot listen', f'127.0.0.1:{busy_port}', 'port')


def test_serve_without_its_configuration(home: pathlib.Path, tmp_path: pathlib.Path) -> None:
    out = tether('serve', '--config', str(tmp_path / 'missing.toml'), home=home)
    one_clear_line(out, 'missing.toml', 'does not exist')


def test_serve_and_add_user_with_the_database_down(
    home: pathlib.Path, tmp_path: pathlib.Path
) -> None:
    down = f'postgresql://faas:secret@127.0.0.1:{free_port()}/faas'
    config = service_toml(tmp_path / 'service.toml', down)
    line = one_clear_line(tether('serve', '--config', str(config), home=home), 'database')
    assert 'secret' not in line  # the password is not printed
    one_clear_line(tether('add-user', '--config', str(config), 'alice', home=home), 'database')


def test_add_user_who_exists_points_to_rotate(
    home: pathlib.Path, tmp_path: pathlib.Path, pg_url: str
) -> None:
    config = service_toml(tmp_path / 'service.toml', pg_url)
    name = f'cli-{uuid.uuid4().hex[:8]}'
    first = tether('add-user', '--config', str(config), name, home=home)
    assert first.returncode == 0, first.stderr
    assert first.stdout.startswith('tfu_')
    one_clear_line(tether('add-user', '--config', str(config), name, home=home), '--rotate')
    rotated = tether('add-user', '--config', str(config), '--rotate', name, home=home)
    assert rotated.returncode == 0, rotated.stderr
    assert rotated.stdout.startswith('tfu_')
    assert rotated.stdout != first.stdout
    missing = tether('add-user', '--config', str(config), '--rotate', name + 'x', home=home)
    one_clear_line(missing, 'no user named')


@pytest.mark.parametrize('command', ['start', 'stop', 'status'])
def test_unknown_endpoint_name(home: pathlib.Path, command: str) -> None:
    one_clear_line(tether('endpoint', command, 'nosuch', home=home), "'nosuch'", 'configure')


def test_configure_with_a_wrong_token(
    home: pathlib.Path, tmp_path: pathlib.Path, prod_service: ServiceThread
) -> None:
    token_file = tmp_path / 'token'
    token_file.write_text('tfu_wrong\n')
    token_file.chmod(0o600)
    out = tether(
        'endpoint',
        'configure',
        'ep',
        '--service',
        prod_service.url,
        '--token-file',
        str(token_file),
        home=home,
    )
    one_clear_line(out, 'unknown or revoked token', 'add-user --rotate')
    assert not (home / 'endpoints' / 'ep' / 'config.toml').exists()


def test_token_from_a_file_stdin_or_the_environment_not_argv(
    home: pathlib.Path, tmp_path: pathlib.Path, prod_service: ServiceThread
) -> None:
    _user, token = new_user(prod_service)
    url = prod_service.url
    token_file = tmp_path / 'token'
    token_file.write_text(token + '\n')

    token_file.chmod(0o644)  # others could read it: refused
    loose = tether(
        'endpoint', 'configure', 'a', '--service', url, '--token-file', str(token_file), home=home
    )
    one_clear_line(loose, 'chmod 600')

    token_file.chmod(0o600)
    by_file = tether(
        'endpoint', 'configure', 'a', '--service', url, '--token-file', str(token_file), home=home
    )
    assert by_file.returncode == 0, by_file.stderr
    assert by_file.stderr == ''
    by_stdin = tether(
        'endpoint', 'configure', 'b', '--service', url, '--token-file', '-', home=home, stdin=token
    )
    assert by_stdin.returncode == 0, by_stdin.stderr
    by_env = tether(
        'endpoint', 'configure', 'c', '--service', url, home=home, TETHER_FAAS_TOKEN=token
    )
    assert by_env.returncode == 0, by_env.stderr
    by_argv = tether('endpoint', 'configure', 'd', '--service', url, '--token', token, home=home)
    assert by_argv.returncode == 0, by_argv.stderr
    assert 'visible to other users' in by_argv.stderr
    assert '--token-file' in by_argv.stderr
    for name in 'abcd':
        assert (home / 'endpoints' / name / 'config.toml').exists()
