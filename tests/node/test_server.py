"""The node object server as a real process: spill, refusals, CLI, many clients."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import textwrap
import uuid
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.node.conftest import SECRET, RunningNode, wait_for_state, wait_gone
from tether._serve import codes as proto
from tether._wire import PROTOCOL_VERSION, SyncConnection, encode_head
from tether.exceptions import (
    AuthenticationError,
    FrameTooLargeError,
    ProtocolVersionError,
    RemoteError,
)

StartNode = Callable[..., RunningNode]


def test_memory_budget_spills_to_disk_and_still_serves(
    start_node: StartNode,
    tmp_path: Path,
) -> None:
    spill = tmp_path / 'spill'
    node = start_node('--memory', '1MB', '--spill-dir', str(spill))
    c = node.connector()
    datas = [os.urandom(300_000) for _ in range(10)]
    keys = [c.put(d) for d in datas]
    huge = os.urandom(3_000_000)  # larger than the whole budget: straight to disk
    huge_key = c.put(huge)
    status = c.status()
    assert status.memory_used <= 1_000_000
    # 3 objects fit in the budget, the 7 least recently used and the huge one spilled.
    assert status.memory_used == 900_000
    assert status.spilled_objects == 8
    assert status.disk_used == 7 * 300_000 + 3_000_000
    # Spilled files live in the server's private subdirectory of the spill directory.
    (private,) = spill.iterdir()
    assert Path(status.spill_dir) == private
    assert len(list(private.iterdir())) == status.spilled_objects
    # Every object is still served, spilled or not, in any order.
    for key, data in reversed(list(zip(keys, datas, strict=True))):
        assert bytes(c.get(key)) == data
    assert bytes(c.get(huge_key)) == huge
    assert [bytes(b) for b in c.get_batch(keys)] == datas  # type: ignore[arg-type]
    # Evicting a spilled object deletes its file.
    c.evict(huge_key)
    assert not c.exists(huge_key)
    assert c.get(huge_key) is None
    assert len(list(private.iterdir())) == c.status().spilled_objects
    c.close()


def test_least_recently_used_spills_first(start_node: StartNode) -> None:
    node = start_node('--memory', '1MB')
    c = node.connector()
    a = c.put(b'a' * 400_000)
    b = c.put(b'b' * 400_000)
    c.get(a)  # a is now more recently used than b
    c.put(b'c' * 400_000)  # one must go: b
    status = c.status()
    assert status.spilled_objects == 1
    assert status.memory_used == 800_000
    assert bytes(c.get(b)) == b'b' * 400_000
    c.close()


def test_refusals_leave_the_server_serving(start_node: StartNode) -> None:
    node = start_node('--max-frame', '1MB')
    c = node.connector()
    key = c.put(b'precious')

    with pytest.raises(AuthenticationError):
        SyncConnection('127.0.0.1', node.port, secret='wrong secret')
    with pytest.raises(ProtocolVersionError):
        SyncConnection('127.0.0.1', node.port, secret=SECRET, version=PROTOCOL_VERSION + 1)
    conn = SyncConnection('127.0.0.1', node.port, secret=SECRET)
    with pytest.raises(FrameTooLargeError):
        conn.request(proto.PUT, {'ids': ['a' * 32]}, [bytes(2_000_000)])
    conn.close()
    conn = SyncConnection('127.0.0.1', node.port, secret=SECRET)
    conn.sock.sendall(encode_head(proto.PUT, {'ids': ['x']}, [1 << 60], request_id=1))
    with pytest.raises(FrameTooLargeError):
        conn.request(proto.GET, {'ids': ['x']})
    conn.close()
    for _ in range(3):
        with socket.create_connection(('127.0.0.1', node.port), timeout=10) as sock:
            sock.sendall(os.urandom(10_000))
            while sock.recv(65536):
                pass

    assert bytes(c.get(key)) == b'precious'
    status = c.status()
    assert status.refused >= 7
    assert node.proc.poll() is None
    c.close()


def test_bad_requests_get_clear_errors(start_node: StartNode) -> None:
    node = start_node()
    conn = SyncConnection('127.0.0.1', node.port, secret=SECRET)
    with pytest.raises(RemoteError, match='ids') as info:
        conn.request(proto.GET, {'ids': ['../../etc/passwd']})
    assert info.value.code == 'bad-request'
    with pytest.raises(RemoteError, match='unknown message type'):
        conn.request(200, {'ids': []})
    with pytest.raises(RemoteError, match='2 ids for 1 objects'):
        conn.request(proto.PUT, {'ids': ['a', 'b']}, [b'x'])
    assert conn.request(proto.EXISTS, {'ids': ['a']}).header == {'ids': ['a'], 'exists': [False]}
    conn.close()


_CLIENT = textwrap.dedent(
    """
    import hashlib, os, sys
    from tether.connectors.node import NodeConnector
    c = NodeConnector(sys.argv[1], address='127.0.0.1', run_dir=sys.argv[2], secret=sys.argv[3])
    for i in range(30):
        data = os.urandom(50_000 + i)
        key = c.put(data)
        assert bytes(c.get(key)) == data
        assert c.get_batch([key, key]) == [data, data]
        c.evict(key)
    print(c.status().pid)
    c.close()
    """,
)


def test_many_client_processes_at_once(start_node: StartNode) -> None:
    node = start_node()
    procs = [
        subprocess.Popen(
            [sys.executable, '-c', _CLIENT, node.name, str(node.run_dir), SECRET],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(4)
    ]
    outs = [p.communicate(timeout=60) for p in procs]
    assert [p.returncode for p in procs] == [0] * 4, [err for _, err in outs]
    assert {int(out) for out, _ in outs} == {node.state.pid}
    c = node.connector()
    status = c.status()
    assert status.objects == 0
    assert status.requests >= 4 * 30 * 4
    c.close()


def _tether(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, '-c', 'from tether.cli import main; main()', *args],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
        check=False,
    )


def test_cli_start_status_stop(tmp_path: Path) -> None:
    name = f'cli-{uuid.uuid4().hex[:8]}'
    run_dir = tmp_path / 'run'
    env = {**os.environ, 'TETHER_NODE_SECRET': 'cli-secret'}
    help_text = _tether('node', '--help', env=env).stdout
    assert 'start' in help_text
    assert 'TETHER_NODE_SECRET' in help_text
    assert '--memory' in _tether('node', 'start', '--help', env=env).stdout

    proc = subprocess.Popen(
        [
            *(sys.executable, '-c', 'from tether.cli import main; main()'),
            *('node', 'start', '--name', name, '--run-dir', str(run_dir)),
            *('--bind', '127.0.0.1', '--memory', '64MB'),
        ],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        state = wait_for_state(run_dir, name, proc)
        out = _tether(
            'node', 'status', '--name', name, '--run-dir', str(run_dir), '--json', env=env
        )
        assert out.returncode == 0, out.stderr
        info = json.loads(out.stdout)
        assert info['pid'] == state.pid
        assert info['memory_limit'] == 64_000_000
        human = _tether('node', 'status', '--name', name, '--run-dir', str(run_dir), env=env)
        assert 'objects' in human.stdout
        again = _tether('node', 'start', '--name', name, '--run-dir', str(run_dir), env=env)
        assert again.returncode != 0
        assert 'already runs' in again.stderr
        out = _tether('node', 'stop', '--name', name, '--run-dir', str(run_dir), env=env)
        assert out.returncode == 0, out.stderr
        assert proc.wait(30) == 0
        assert wait_gone(state.pid)
        missing = _tether('node', 'status', '--name', name, '--run-dir', str(run_dir), env=env)
        assert missing.returncode != 0
        assert 'no node server' in missing.stderr
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        assert proc.stderr is not None
        proc.stderr.close()


def test_cli_rejects_bad_sizes(tmp_path: Path) -> None:
    out = _tether('node', 'start', '--run-dir', str(tmp_path), '--memory', 'lots')
    assert out.returncode != 0
    assert 'cannot read' in out.stderr


def test_tls_node_server(start_node: StartNode, tmp_path: Path) -> None:
    import ssl

    cert, key = tmp_path / 'cert.pem', tmp_path / 'key.pem'
    subprocess.run(
        [
            *('openssl', 'req', '-x509', '-newkey', 'rsa:2048', '-nodes'),
            *('-keyout', str(key), '-out', str(cert), '-days', '1'),
            *('-subj', '/CN=localhost', '-addext', 'subjectAltName=IP:127.0.0.1'),
        ],
        check=True,
        capture_output=True,
    )
    node = start_node('--tls-cert', str(cert), '--tls-key', str(key))
    context = ssl.create_default_context(cafile=str(cert))
    conn = SyncConnection('127.0.0.1', node.port, secret=SECRET, ssl=context)
    data = os.urandom(3_000_000)
    conn.request(proto.PUT, {'ids': ['tls1']}, [data])
    reply = conn.request(proto.GET, {'ids': ['tls1']})
    assert bytes(reply.payloads[0]) == data
    conn.close()
    from tether.exceptions import WireConnectionError

    with pytest.raises(WireConnectionError):
        SyncConnection('127.0.0.1', node.port, secret=SECRET, timeout=5)


def test_frame_too_large_for_memory_is_refused(start_node: StartNode) -> None:
    node = start_node('--max-frame', '1000TB')
    conn = SyncConnection('127.0.0.1', node.port, secret=SECRET)
    # Within --max-frame but far beyond any machine's memory.
    conn.sock.sendall(encode_head(proto.PUT, {'ids': ['x']}, [500 << 40], request_id=1))
    with pytest.raises(FrameTooLargeError, match='fits neither the memory budget'):
        conn.request(proto.GET, {'ids': ['x']})
    conn.close()
    c = node.connector()
    assert bytes(c.get(c.put(b'fine'))) == b'fine'
    c.close()


def test_a_refusal_is_reported_even_when_it_cuts_the_send_short(start_node: StartNode) -> None:
    # 64 MB against a 1 MB limit: the server answers and closes long before the client has
    # sent it all, so the client's send fails (connection reset). The client still reads
    # the server's answer and raises it, not a bare connection error.
    node = start_node('--max-frame', '1MB')
    for _ in range(3):
        conn = SyncConnection('127.0.0.1', node.port, secret=SECRET)
        with pytest.raises(FrameTooLargeError):
            conn.request(proto.PUT, {'ids': ['a' * 32]}, [bytes(64 << 20)])
        conn.close()
