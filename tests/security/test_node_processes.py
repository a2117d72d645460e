"""Node server process management: discovery files are checked, never trusted.

A discovery file names a pid and a port. Before the pid is signalled or the server used,
the process must answer an authenticated status request as that server: a file naming
a dead or unrelated process leads to a new server, and ``tether node stop`` never kills
an unrelated process. Also: node names, TLS, every-interface binds and spill files.
"""

from __future__ import annotations

import json
import logging
import os
import signal
import socket
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from tests.node.conftest import wait_gone
from tests.security._node import SECRET, RunningNode, StartNode, start_node
from tether._serve import codes as proto
from tether._serve import spawn as _spawn
from tether._serve.state import pid_alive
from tether._wire import SyncConnection
from tether.cli import cli
from tether.connectors.node import NodeConnector
from tether.exceptions import ConfigError, ConnectorError

__all__ = ['start_node']


@pytest.fixture
def bystander() -> Iterator[subprocess.Popen[bytes]]:
    """An unrelated process of this user, whose pid a forged or stale file names."""
    proc = subprocess.Popen([sys.executable, '-c', 'import signal; signal.pause()'])
    yield proc
    proc.kill()
    proc.wait()


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(('127.0.0.1', 0))
        port: int = s.getsockname()[1]
    return port


def _write_file(run_dir: Path, name: str, pid: int, port: int, secret: str = SECRET) -> None:
    run_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
    path = run_dir / f'{name}.json'
    data = {
        'name': name,
        'pid': pid,
        'host': '127.0.0.1',
        'port': port,
        'address': '127.0.0.1',
        'secret': secret,
    }
    path.write_text(json.dumps(data))
    path.chmod(0o600)


def _name() -> str:
    return f'sec-{uuid.uuid4().hex[:10]}'


def _connector(name: str, run_dir: Path, **kwargs: Any) -> NodeConnector:
    return NodeConnector(
        name,
        address='127.0.0.1',
        bind='127.0.0.1',
        run_dir=str(run_dir),
        secret=SECRET,
        idle_timeout=120,
        **kwargs,
    )


# Stop never signals a process that is not our server ---------------------------------


@pytest.mark.parametrize('port_of', ['closed', 'real server'])
def test_stop_never_kills_an_unrelated_process(
    bystander: subprocess.Popen[bytes], start_node: StartNode, tmp_path: Path, port_of: str
) -> None:
    run_dir = tmp_path / 'run'
    name = _name()
    # The file leads to a closed port, or to a real node server (which is not that pid).
    port = _closed_port() if port_of == 'closed' else start_node().port
    _write_file(run_dir, name, bystander.pid, port)
    result = CliRunner().invoke(cli, ['node', 'stop', '--name', name, '--run-dir', str(run_dir)])
    assert result.exit_code != 0
    assert 'not signalling' in result.output
    assert bystander.poll() is None
    assert pid_alive(bystander.pid)


def test_stop_of_a_dead_pid_removes_the_file(tmp_path: Path) -> None:
    proc = subprocess.Popen([sys.executable, '-c', 'pass'])
    proc.wait()
    run_dir = tmp_path / 'run'
    name = _name()
    _write_file(run_dir, name, proc.pid, _closed_port())
    result = CliRunner().invoke(cli, ['node', 'stop', '--name', name, '--run-dir', str(run_dir)])
    assert result.exit_code == 0, result.output
    assert not (run_dir / f'{name}.json').exists()


def test_stop_stops_our_server(start_node: StartNode) -> None:
    node: RunningNode = start_node()
    args = ['node', 'stop', '--name', node.name, '--run-dir', str(node.run_dir)]
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 0, result.output
    assert wait_gone(node.state.pid)


# A stale discovery file leads to a new server -----------------------------------------


@pytest.mark.parametrize('pid_of', ['foreign', 'dead'])
def test_stale_discovery_file_leads_to_a_new_server(
    bystander: subprocess.Popen[bytes], tmp_path: Path, pid_of: str
) -> None:
    run_dir = tmp_path / 'run'
    name = _name()
    if pid_of == 'foreign':
        pid = bystander.pid
    else:
        proc = subprocess.Popen([sys.executable, '-c', 'pass'])
        proc.wait()
        pid = proc.pid
    _write_file(run_dir, name, pid, _closed_port())
    connector = _connector(name, run_dir)
    try:
        key = connector.put(b'works')
        assert bytes(connector.get(key)) == b'works'  # type: ignore[arg-type]
        status = connector.status()
        assert status.pid != pid
        assert bystander.poll() is None
    finally:
        assert connector.stop_server()
        connector.close()


# Node names ---------------------------------------------------------------------------


@pytest.mark.parametrize('name', ['../x', 'a/b', '/abs', '', '.hidden', 'x' * 101, 'a\x00b'])
def test_invalid_node_names_are_refused(name: str, tmp_path: Path) -> None:
    run_dir = tmp_path / 'run'
    with pytest.raises(ConfigError, match='invalid node server name'):
        _connector(name, run_dir)
    result = CliRunner().invoke(cli, ['node', 'status', '--name', name, '--run-dir', str(run_dir)])
    assert result.exit_code != 0
    assert 'invalid node server name' in result.output
    assert not (tmp_path / 'x.lock').exists()
    assert not (tmp_path / 'x.log').exists()


def test_invalid_name_for_node_start_is_refused(tmp_path: Path) -> None:
    run_dir = tmp_path / 'run'
    out = subprocess.run(
        [
            sys.executable,
            '-m',
            'tether.node',
            'start',
            '--name',
            '../x',
            '--run-dir',
            str(run_dir),
        ],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, 'TETHER_NODE_SECRET': SECRET},
        check=False,
    )
    assert out.returncode != 0
    assert 'invalid node server name' in out.stderr
    assert 'Traceback' not in out.stderr
    assert list(tmp_path.iterdir()) == []


# Every interface is said out loud -----------------------------------------------------


def test_plain_connector_logs_that_it_listens_on_every_interface(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Stop right before the process would start: tests never listen on every interface.
    seen: list[str] = []

    def no_launch(what: str, argv: list[str], *args: Any, **kwargs: Any) -> Any:
        seen.extend(argv)
        raise ConnectorError('not started by this test')

    monkeypatch.setattr(_spawn, 'launch_detached', no_launch)
    connector = NodeConnector(_name(), run_dir=str(tmp_path / 'run'), secret=SECRET)
    with caplog.at_level(logging.WARNING, logger='tether.node'), pytest.raises(ConnectorError):
        connector.put(b'x')
    assert seen[seen.index('--bind') + 1] == '0.0.0.0'
    assert any('every interface' in r.getMessage() for r in caplog.records)


def test_status_shows_where_the_server_listens(start_node: StartNode) -> None:
    node: RunningNode = start_node()
    args = ['node', 'status', '--name', node.name, '--run-dir', str(node.run_dir)]
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 0, result.output
    assert f'listens  127.0.0.1:{node.port} (this interface only)' in result.output
    info = json.loads(CliRunner().invoke(cli, [*args, '--json']).output)
    assert info['bind'] == '127.0.0.1'
    assert info['all_interfaces'] is False


# TLS ------------------------------------------------------------------------------------


def test_node_connector_speaks_tls(tmp_path: Path) -> None:
    from tether._serve.tls import make_self_signed

    cert_pem, key_pem = make_self_signed('localhost', ['127.0.0.1'])
    cert = tmp_path / 'node.pem'
    key = tmp_path / 'node.key'
    cert.write_text(cert_pem)
    key.write_text(key_pem)
    key.chmod(0o600)
    run_dir = tmp_path / 'run'
    name = _name()
    connector = _connector(name, run_dir, tls_cert=str(cert), tls_key=str(key), tls_ca=str(cert))
    try:
        k = connector.put(b'over tls')
        assert bytes(connector.get(k)) == b'over tls'  # type: ignore[arg-type]
        assert connector.status().tls is True
        # Another connector rebuilt from the config speaks TLS too.
        clone = NodeConnector.from_config(connector.config())
        assert bytes(clone.get(k)) == b'over tls'  # type: ignore[arg-type]
        clone.close()
        # Without TLS the server is not reachable; with an untrusted CA neither.
        plain = _connector(name, run_dir)
        with pytest.raises(ConnectorError):
            plain.get(k)
        plain.close()
        other_pem, _ = make_self_signed('localhost', ['127.0.0.1'])
        other = tmp_path / 'other.pem'
        other.write_text(other_pem)
        untrusting = _connector(name, run_dir, tls=True, tls_ca=str(other))
        with pytest.raises(ConnectorError):
            untrusting.get(k)
        untrusting.close()
        # `tether node status` reaches it too.
        args = ['node', 'status', '--name', name, '--run-dir', str(run_dir)]
        result = CliRunner().invoke(cli, args)
        assert result.exit_code == 0, result.output
        assert 'TLS' in result.output
    finally:
        assert connector.stop_server()
        connector.close()


# Spill files ----------------------------------------------------------------------------


def test_spill_never_overwrites_a_users_file_and_is_removed_at_stop(
    start_node: StartNode, tmp_path: Path
) -> None:
    spill = tmp_path / 'spill'
    spill.mkdir()
    victim = spill / ('a' * 32)
    victim.write_bytes(b'precious')
    node: RunningNode = start_node('--memory', '1MB', '--spill-dir', str(spill))
    conn = SyncConnection('127.0.0.1', node.port, secret=SECRET)
    big = os.urandom(2_000_000)  # larger than the budget: spilled
    conn.request(proto.PUT, {'ids': ['a' * 32]}, [big])
    assert bytes(conn.request(proto.GET, {'ids': ['a' * 32]}).payloads[0]) == big
    assert victim.read_bytes() == b'precious'
    conn.close()
    node.proc.send_signal(signal.SIGTERM)
    node.proc.wait(30)
    # The server's spill files went with it; the user's file stayed.
    assert sorted(p.name for p in spill.iterdir()) == ['a' * 32]
    assert victim.read_bytes() == b'precious'
