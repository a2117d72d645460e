"""Server command lines: a port in use or a bad address is one clear line, not a traceback.

Also ``tether shm clean``: an invalid namespace is refused (non-zero exit), and
``--list``/``--dry-run`` show segments without removing any.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner

from tests.endpoint.conftest import write_relay_config
from tests.security._node import SECRET
from tether.cli import cli
from tether.connectors.shared_memory import SharedMemoryConnector


@pytest.fixture
def busy_port() -> Iterator[int]:
    """A loopback port some other program listens on."""
    with socket.socket() as s:
        s.bind(('127.0.0.1', 0))
        s.listen()
        yield s.getsockname()[1]


def _run(*args: str, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(Path(sys.executable).parent / 'tether'), *args],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, 'TETHER_NODE_SECRET': SECRET, 'TETHER_HOME': str(tmp_path)},
        check=False,
    )


def _one_clear_line(out: subprocess.CompletedProcess[str], *words: str) -> None:
    assert out.returncode != 0
    assert 'Traceback' not in out.stderr, out.stderr
    errors = [line for line in out.stderr.splitlines() if line.startswith('Error:')]
    assert len(errors) == 1, out.stderr
    for word in words:
        assert word in errors[0], errors[0]


def _node_start(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    name = f'cli-{uuid.uuid4().hex[:8]}'
    run_dir = str(tmp_path / 'run')
    return _run('node', 'start', '--name', name, '--run-dir', run_dir, *args, tmp_path=tmp_path)


def test_node_start_on_a_port_in_use(busy_port: int, tmp_path: Path) -> None:
    out = _node_start(tmp_path, '--bind', '127.0.0.1', '--port', str(busy_port))
    _one_clear_line(out, 'cannot listen', f'127.0.0.1:{busy_port}')


@pytest.mark.parametrize('bind', ['203.0.113.77', 'no-such-host.invalid'])
def test_node_start_with_a_bad_bind(bind: str, tmp_path: Path) -> None:
    out = _node_start(tmp_path, '--bind', bind)
    _one_clear_line(out, 'cannot listen', bind)


def test_relay_on_a_port_in_use(busy_port: int, tmp_path: Path) -> None:
    config = write_relay_config(tmp_path / 'relay', '127.0.0.1', busy_port)
    out = _run('relay', '--config', str(config), tmp_path=tmp_path)
    _one_clear_line(out, 'relay cannot listen', str(busy_port))


def test_endpoint_on_a_port_in_use(busy_port: int, tmp_path: Path) -> None:
    from tether.endpoint import EndpointConfig

    EndpointConfig.create('busy', tmp_path, port=busy_port)
    out = _run(
        'endpoint', 'start', 'busy', '--foreground', '--home', str(tmp_path), tmp_path=tmp_path
    )
    _one_clear_line(out, 'cannot listen', str(busy_port))


# tether shm clean ------------------------------------------------------------------------


@pytest.mark.parametrize('namespace', ['a/b', '*', 'x-y', ''])
def test_shm_clean_refuses_an_invalid_namespace(namespace: str) -> None:
    result = CliRunner().invoke(cli, ['shm', 'clean', '--namespace', namespace])
    assert result.exit_code != 0
    assert 'invalid shared-memory namespace' in result.output


def test_shm_clean_list_and_dry_run_remove_nothing() -> None:
    namespace = f'clitest{uuid.uuid4().hex[:8]}'
    connector = SharedMemoryConnector(namespace)
    keys = [connector.put(b'x' * 100), connector.put(b'y' * 50)]
    try:
        for flag in ('--list', '--dry-run'):
            result = CliRunner().invoke(cli, ['shm', 'clean', '--namespace', namespace, flag])
            assert result.exit_code == 0, result.output
            assert result.output.count(f'tether-{namespace}-') == 2
            assert '2 shared-memory segment(s), 150 bytes' in result.output
            assert all(connector.exists(k) for k in keys)
        assert 'would remove' in result.output
        result = CliRunner().invoke(cli, ['shm', 'clean', '--namespace', namespace])
        assert result.exit_code == 0
        assert 'removed 2' in result.output
        assert not any(connector.exists(k) for k in keys)
    finally:
        connector.close(clear=True)
