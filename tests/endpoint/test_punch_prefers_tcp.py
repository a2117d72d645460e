"""Where both punched transports work, the endpoints take TCP (kernel speed), not QUIC.

On one host (and on a LAN) the two SYNs of a simultaneous open cannot meet in flight: a
refused SYN comes back in microseconds. Each side's port then also listens for the
other's connect (see ``tether.endpoint._tcp_punch``), so that the punched path is TCP
there too, instead of QUIC after the TCP attempt timed out.
"""

from __future__ import annotations

import asyncio
import socket

from tests.endpoint.conftest import Relay, Site
from tether.endpoint._tcp_punch import simultaneous_open


def _free_ports(n: int) -> list[int]:
    socks = [socket.socket() for _ in range(n)]
    for s in socks:
        s.bind(('127.0.0.1', 0))
    ports = [int(s.getsockname()[1]) for s in socks]
    for s in socks:
        s.close()
    return ports


def test_a_simultaneous_open_on_one_host_is_one_connection() -> None:
    pa, pb = _free_ports(2)

    async def both() -> tuple[socket.socket, socket.socket]:
        a, b = await asyncio.gather(
            simultaneous_open(pa, ('127.0.0.1', pb), 10.0),
            simultaneous_open(pb, ('127.0.0.1', pa), 10.0),
        )
        return a, b

    a, b = asyncio.run(both())
    try:
        assert a.getsockname()[1] == b.getpeername()[1] == pa
        assert b.getsockname()[1] == a.getpeername()[1] == pb
        a.setblocking(True)
        b.setblocking(True)
        a.sendall(b'ping')
        assert b.recv(4) == b'ping'
    finally:
        a.close()
        b.close()


def test_punched_path_is_tcp_when_both_transports_work(site: Site, loop_relay: Relay) -> None:
    relay = loop_relay.address
    for name in ('tcp-a', 'tcp-b'):  # neither reachable: the punched path, TCP and UDP
        site.configure(name, relay, peering={'paths': ['punched']})
        site.start(name)
    key = site.connector('tcp-a').put(b'held at A')
    assert bytes(site.connector('tcp-b').get(key)) == b'held at A'
    (peer,) = site.status('tcp-b')['peers']
    assert (peer['name'], peer['path'], peer['transport']) == ('tcp-a', 'punched', 'tcp')
