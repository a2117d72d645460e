"""Bytes sent behind a tunnel ticket before the other side joins are bounded and freed.

A relayed channel's first side connects to the data port, sends its ticket and may start
sending at once; the relay holds those bytes until the other side joins. They count
against the user's forwarded bytes as they arrive, at most ``max_early_bytes`` of them
are held (a side that sends more is dropped), and they are freed, with the ticket, when
the side closes.
"""

from __future__ import annotations

import contextlib
import socket
import threading
from collections.abc import Callable

from tests.relay.conftest import ThreadRelay, wait_closed
from tether._serve import signalling as rp
from tether._wire import SyncConnection
from tether.testing import wait_until

MiB = 1 << 20
KiB = 1 << 10


def open_ticket(relay: ThreadRelay) -> tuple[str, list[SyncConnection]]:
    """Register two endpoints of alice and ask the relay for a ticket between them."""
    a = relay.register('alice', 'ep-a')
    b = relay.register('alice', 'ep-b')
    reply = a.request(rp.TUNNEL, {'target': 'ep-b', 'session': 'test'})
    return str(reply.header['ticket']), [a, b]


def data_socket(relay: ThreadRelay, ticket: str) -> socket.socket:
    sock = socket.create_connection(('127.0.0.1', relay.data_port), timeout=10)
    sock.sendall(bytes.fromhex(ticket))
    return sock


def test_early_bytes_are_bounded_counted_and_freed(
    make_relay: Callable[..., ThreadRelay],
) -> None:
    relay = make_relay(max_early_bytes=256 * KiB)
    ticket, endpoints = open_ticket(relay)
    assert relay.status()['users']['alice']['tunnels'] == 1
    # Within the bound: held, and counted against alice's bytes as it arrives.
    sock = data_socket(relay, ticket)
    sock.sendall(bytes(100 * KiB))
    wait_until(lambda: relay.status()['tunnels']['early_bytes'] == 100 * KiB, message='bytes held')
    assert relay.status()['users']['alice']['forwarded'] == 100 * KiB
    # Closed before the other side joined: freed, and the ticket goes with it.
    sock.close()
    wait_until(lambda: relay.status()['tunnels']['sides'] == 0, message='the side closed')
    status = relay.status()
    assert status['tunnels']['early_bytes'] == 0
    assert status['tunnels']['early_peak'] == 100 * KiB
    assert status['tunnels']['tickets'] == 0
    assert status['users']['alice']['tunnels'] == 0
    late = data_socket(relay, ticket)
    assert wait_closed(late) == b''
    late.close()
    for conn in endpoints:
        conn.close()


def test_a_side_sending_past_the_bound_is_dropped(
    make_relay: Callable[..., ThreadRelay],
) -> None:
    relay = make_relay(max_early_bytes=256 * KiB)
    ticket, endpoints = open_ticket(relay)
    sock = data_socket(relay, ticket)
    sender = threading.Thread(target=_send_quietly, args=(sock, bytes(8 * MiB)), daemon=True)
    sender.start()
    wait_closed(sock)
    sender.join(30)
    sock.close()
    wait_until(lambda: relay.status()['tunnels']['sides'] == 0, message='the side dropped')
    status = relay.status()
    assert status['tunnels']['early_refused'] == 1
    assert status['tunnels']['early_bytes'] == 0
    assert status['tunnels']['early_peak'] <= 256 * KiB
    assert status['users']['alice']['forwarded'] <= 256 * KiB
    assert status['tunnels']['tickets'] == 0
    assert status['users']['alice']['tunnels'] == 0
    for conn in endpoints:
        conn.close()


def _send_quietly(sock: socket.socket, data: bytes) -> None:
    with contextlib.suppress(OSError):
        sock.sendall(data)


def test_early_bytes_reach_the_other_side_in_order(
    make_relay: Callable[..., ThreadRelay],
) -> None:
    relay = make_relay(max_early_bytes=256 * KiB)
    ticket, endpoints = open_ticket(relay)
    early = bytes(range(256)) * 800  # 200 KiB, within the bound
    later = bytes(range(255, -1, -1)) * 4096  # 1 MiB once both sides are there
    first = data_socket(relay, ticket)
    first.sendall(early)
    wait_until(
        lambda: relay.status()['tunnels']['early_bytes'] == len(early), message='bytes held'
    )
    second = data_socket(relay, ticket)
    wait_until(lambda: relay.status()['tunnels']['tickets'] == 0, message='the two sides paired')
    first.sendall(later)
    got = bytearray()
    while len(got) < len(early) + len(later):
        data = second.recv(MiB)
        assert data, 'the relay closed the channel early'
        got += data
    assert got == early + later
    status = relay.status()
    assert status['tunnels']['early_bytes'] == 0
    assert status['users']['alice']['forwarded'] == len(early) + len(later)
    first.close()
    second.close()
    wait_until(
        lambda: relay.status()['users']['alice']['tunnels'] == 0, message='the channel closed'
    )
    for conn in endpoints:
        conn.close()
