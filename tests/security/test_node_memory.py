"""Node server memory under killed producers, oversized declarations and stalled frames.

In-flight bytes count against the memory budget and are released when a connection
dies; a declared size that memory cannot take goes to a spill file (never allocated in
memory) or is refused; a partial frame that stops making progress times out.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from tests.security._node import SECRET, RunningNode, StartNode, start_node
from tether._serve import codes as proto
from tether._wire import SyncConnection, encode_head
from tether.exceptions import FrameTooLargeError, WireConnectionError
from tether.testing import wait_until

__all__ = ['start_node']

MB = 1 << 20

# A producer that declares a PUT of `size` bytes, sends `sent` of them, says so, and
# then waits to be killed.
_PRODUCER = textwrap.dedent(
    """
    import os, signal, sys
    from tether._wire import SyncConnection, encode_head
    from tether._serve import codes as proto
    port, size, sent = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
    conn = SyncConnection('127.0.0.1', port, secret=sys.argv[4])
    head = encode_head(proto.PUT, {'ids': [os.urandom(16).hex()]}, [size], 1)
    conn.sock.sendall(head)
    chunk = os.urandom(1 << 20)
    left = sent
    while left:
        n = min(left, len(chunk))
        conn.sock.sendall(chunk[:n])
        left -= n
    print('sent', flush=True)
    signal.pause()
    """
)


def _rss(pid: int) -> int:
    for line in Path(f'/proc/{pid}/status').read_text().splitlines():
        if line.startswith('VmRSS:'):
            return int(line.split()[1]) * 1024
    raise AssertionError('no VmRSS')


def _status(node: RunningNode) -> dict[str, Any]:
    conn = SyncConnection('127.0.0.1', node.port, secret=SECRET)
    try:
        info: dict[str, Any] = conn.request(proto.STATUS).header
        return info
    finally:
        conn.close()


def _wait_status(node: RunningNode, ok: Any) -> dict[str, Any]:
    """Poll the server's status (bounded) until ``ok(status)`` holds."""

    def status_if_ok() -> dict[str, Any] | None:
        status = _status(node)
        return status if ok(status) else None

    return wait_until(status_if_ok, timeout=30, interval=0.02, message='the server status')


def _producer(node: RunningNode, size: int, sent: int) -> subprocess.Popen[str]:
    proc = subprocess.Popen(
        [sys.executable, '-c', _PRODUCER, str(node.port), str(size), str(sent), SECRET],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    assert proc.stdout.readline().strip() == 'sent'
    return proc


def test_producers_killed_mid_put_leave_no_memory_behind(start_node: StartNode) -> None:
    node = start_node('--memory', '96MB')
    pid = node.state.pid
    connector = node.connector()
    key = connector.put(b'kept')
    clients = _status(node)['clients']  # the connector's and the status request's
    baseline = _rss(pid)
    for _ in range(3):
        proc = _producer(node, 80 * MB, 60 * MB)
        # While the put is in flight, its bytes count against the budget.
        status = _status(node)
        assert status['inflight'] >= 60 * MB
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        assert proc.stdout is not None
        proc.stdout.close()
        status = _wait_status(node, lambda s: s['clients'] <= clients and s['inflight'] == 0)
        assert status['inflight'] == 0
    assert status['memory_used'] == len(b'kept')
    # The process gives the memory back (within a margin for allocator slack).
    assert _rss(pid) < baseline + 40 * MB
    assert bytes(connector.get(key)) == b'kept'
    connector.close()


def test_declaration_memory_cannot_take_is_not_allocated(start_node: StartNode) -> None:
    node = start_node('--memory', '16MB')
    pid = node.state.pid
    baseline = _rss(pid)
    # Declares 400 MB and sends 40 MB: they go to a spill file, not to memory.
    proc = _producer(node, 400 * MB, 40 * MB)
    try:
        status = _status(node)
        assert _rss(pid) < baseline + 24 * MB
        assert status['inflight'] <= 16 * MB
        assert status['disk_inflight'] == 400 * MB
    finally:
        proc.kill()
        proc.wait()
        assert proc.stdout is not None
        proc.stdout.close()
    status = _wait_status(node, lambda s: s['clients'] == 1 and s['disk_inflight'] == 0)
    assert status['inflight'] == 0
    assert status['spilled_objects'] == 0
    # The partial spill file went with its connection.
    assert list(Path(status['spill_dir']).iterdir()) == []


def test_declaration_nothing_can_take_is_refused(start_node: StartNode, tmp_path: Path) -> None:
    spill = tmp_path / 'spill'
    spill.mkdir()
    free = os.statvfs(spill).f_bavail * os.statvfs(spill).f_frsize
    node = start_node('--memory', '16MB', '--spill-dir', str(spill), '--max-frame', '1000TB')
    conn = SyncConnection('127.0.0.1', node.port, secret=SECRET)
    conn.sock.sendall(encode_head(proto.PUT, {'ids': ['a' * 32]}, [free + (1 << 30)], 5))
    frame = conn.recv()
    assert frame.header['code'] == 'too-large'
    assert 'spill' in frame.header['message']
    conn.close()
    assert _status(node)['inflight'] == 0


def test_partial_frame_times_out_after_login(start_node: StartNode) -> None:
    node = start_node('--frame-timeout', '1')
    conn = SyncConnection('127.0.0.1', node.port, secret=SECRET, timeout=60)
    # A frame that never completes: the server drops the connection.
    conn.sock.sendall(encode_head(proto.PUT, {'ids': ['a' * 32]}, [1000], 3) + b'x' * 10)
    with pytest.raises((WireConnectionError, FrameTooLargeError, OSError)):
        conn.recv()
    conn.close()
    # An idle connection between frames is not a partial frame: it stays open.
    idle = SyncConnection('127.0.0.1', node.port, secret=SECRET)
    _wait_status(node, lambda s: s['frame_timeouts'] >= 1)
    assert idle.request(proto.EXISTS, {'ids': ['b' * 32]}).header['exists'] == [False]
    idle.close()
    assert _status(node)['frame_timeouts'] == 1
