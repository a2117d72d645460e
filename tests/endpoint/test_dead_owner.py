"""An owner killed mid-transfer is reported at once, on every path, as its channel's failure.

The client reads a large object that another endpoint owns; once the first megabyte is
in, the test kills the owner (SIGKILL: nothing is said on the way out) and lets the client
read on. The client must get a :class:`PeerChannelError` naming the owner, soon: on the
TCP paths the kernel reports the dead connection; on the punched QUIC path nothing does,
and the link's keepalive (short here) must. (A punched TCP path needs NATs: see
``test_netns.py``.)
"""

from __future__ import annotations

import os
import signal
import socket
import threading
from typing import Any

import pytest

from tests.endpoint.conftest import Relay, Site, wait_for
from tether._serve.state import pid_alive
from tether._wire import SyncConnection
from tether.exceptions import PeerChannelError

SIZE = 64 << 20
KEEPALIVE = 0.3
"""Seconds between keepalives on the test's peer links (a link silent for 3 is dead)."""

PATHS: dict[str, tuple[dict[str, Any], bool, str, int]] = {
    # name: (the reader's peering settings, whether its connector asks for own channels,
    # the path and transport of its link, the own channels it then has)
    'direct, own channel': ({}, True, 'direct tcp', 1),
    'direct, shared channels': ({}, False, 'direct tcp', 0),
    'relayed': ({'paths': ['relayed']}, True, 'relayed tcp', 1),
    'punched QUIC': ({'paths': ['punched'], 'punch': ['udp']}, True, 'punched quic', 0),
}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(('127.0.0.1', 0))
        return int(s.getsockname()[1])


def _cut(buffers: list[memoryview], at: int) -> tuple[list[memoryview], list[memoryview]]:
    """``buffers`` split into the first ``at`` bytes and the rest."""
    first: list[memoryview] = []
    rest: list[memoryview] = []
    for buf in buffers:
        if at >= buf.nbytes:
            first.append(buf)
        elif at > 0:
            first.append(buf[:at])
            rest.append(buf[at:])
        else:
            rest.append(buf)
        at -= buf.nbytes
    return first, rest


def _pause_after_first_megabyte(
    monkeypatch: pytest.MonkeyPatch,
) -> tuple[threading.Event, threading.Event]:
    """Make a transfer of the object stop after its first megabyte until ``killed`` is set."""
    mid, killed = threading.Event(), threading.Event()
    recv_into, sendmsg = SyncConnection._recv_into, SyncConnection._sendmsg

    def pause() -> None:
        mid.set()
        assert killed.wait(60)

    def paused_recv(self: SyncConnection, view: memoryview) -> None:
        if view.nbytes == SIZE and not mid.is_set():
            recv_into(self, view[: 1 << 20])
            pause()
            view = view[1 << 20 :]
        recv_into(self, view)

    def paused_send(self: SyncConnection, buffers: list[memoryview]) -> None:
        total = sum(b.nbytes for b in buffers)
        if total > SIZE and not mid.is_set():
            first, buffers = _cut(buffers, total - SIZE + (1 << 20))
            sendmsg(self, first)
            pause()
        sendmsg(self, buffers)

    monkeypatch.setattr(SyncConnection, '_recv_into', paused_recv)
    monkeypatch.setattr(SyncConnection, '_sendmsg', paused_send)
    return mid, killed


def _start_transfer(
    reader: Any, op: str, key: Any, data: bytes
) -> tuple[threading.Event, dict[str, BaseException | None]]:
    """Get or set ``key`` in a thread; the event is set when it has an outcome."""
    outcome: dict[str, BaseException | None] = {}
    done = threading.Event()

    def transfer() -> None:
        try:
            if op == 'get':
                reader.get(key)
            else:
                reader.set(key, data)
            outcome['error'] = None
        except BaseException as e:  # the test inspects it
            outcome['error'] = e
        done.set()

    threading.Thread(target=transfer, daemon=True).start()
    return done, outcome


@pytest.mark.parametrize('op', ['get', 'set'])
@pytest.mark.parametrize('path', list(PATHS))
def test_owner_killed_mid_transfer(
    site: Site, loop_relay: Relay, monkeypatch: pytest.MonkeyPatch, path: str, op: str
) -> None:
    """The owner dies while the client reads (``get``) or writes (``set``) a large object."""
    reader_settings, own_channels, link, own = PATHS[path]
    direct = path.startswith('direct')
    port = free_port()
    owner_peering: dict[str, Any] = {'keepalive': KEEPALIVE}
    if direct:
        owner_peering |= {'port': port, 'advertise': [f'127.0.0.1:{port}']}
    site.configure(
        'reader', loop_relay.address, peering={'keepalive': KEEPALIVE, **reader_settings}
    )
    owner = site.configure('owner', loop_relay.address, peering=owner_peering)
    site.start('reader')
    site.start('owner')
    at_owner = site.connector('owner')
    data = os.urandom(SIZE)
    key = at_owner.put(data)
    at_owner.close()

    # The client stops after the first megabyte of the object, until the owner is dead.
    mid, killed = _pause_after_first_megabyte(monkeypatch)
    reader = site.connector('reader', own_channels=own_channels)
    # Peered first, so that the object goes through as it does once a link is up (a
    # forwarded set is then piped to the owner as it arrives).
    assert reader.exists(key)
    done, outcome = _start_transfer(reader, op, key, data)
    assert mid.wait(60), 'the transfer did not start'
    status = site.status('reader')
    (peer,) = status['peers']
    assert f'{peer["path"]} {peer["transport"]}' == link
    assert status['own_channels']['open'] == own
    pid = site.pid('owner')
    os.kill(pid, signal.SIGKILL)
    wait_for(lambda: not pid_alive(pid), what='the owner to die')
    killed.set()
    # Generous: the failure is seen within seconds (a QUIC link's default idle timeout
    # used to hold the client for a minute).
    assert done.wait(30), 'the client was not told within 30 s'
    error = outcome['error']
    assert isinstance(error, PeerChannelError), repr(error)
    assert error.peer == owner
    assert 'owner' in str(error)
    assert 'channel' in str(error)
    reader.close()
