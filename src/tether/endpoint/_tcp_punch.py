"""TCP hole punching: a simultaneous open through two cone NATs, coordinated by the relay.

Each side binds a TCP socket to a port, learns the public mapping of that port from the
relay's data port (``TCP_PROBE``), and, once the two mappings are exchanged through the
relay, both connect to each other from the same port at about the same time. The first
SYN out of each NAT opens that NAT for the other side's SYN, and the kernel completes
the simultaneous open; the result is an ordinary TCP connection (kernel congestion
control, full speed), used with TLS pinned to the peer's certificate.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import socket

from tether._serve import signalling as rp
from tether.exceptions import PeeringError

__all__ = ['simultaneous_open', 'tcp_mapping']

_PROBE_TIMEOUT = 3.0
_ATTEMPT = 1.5


def _socket(port: int = 0) -> socket.socket:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
    sock.bind(('0.0.0.0', port))
    sock.setblocking(False)
    return sock


async def tcp_mapping(relay_host: str, data_port: int) -> tuple[int, list[object]] | None:
    """``(local port, [public ip, public port])`` of a fresh port, or ``None``."""
    loop = asyncio.get_running_loop()
    sock = _socket()
    port = int(sock.getsockname()[1])
    try:
        async with asyncio.timeout(_PROBE_TIMEOUT):
            await loop.sock_connect(sock, (relay_host, data_port))
            await loop.sock_sendall(sock, rp.TCP_PROBE)
            data = b''
            while chunk := await loop.sock_recv(sock, 256):
                data += chunk
        seen = json.loads(data)
        return port, [str(seen[0]), int(seen[1])]
    except (OSError, TimeoutError, ValueError, TypeError, IndexError):
        return None
    finally:
        sock.close()


async def simultaneous_open(
    local_port: int, peer: tuple[str, int], timeout: float
) -> socket.socket:
    """Connect from ``local_port`` to ``peer`` until the peer's own attempt meets ours.

    The port also listens meanwhile (for the peer's address only): where the two SYNs
    cannot meet in flight, as on one host or a LAN, where a refused SYN comes back in
    microseconds, the peer's connect is accepted instead. Either way there is one TCP
    connection between the two ports, which both sides get.

    Raises:
        PeeringError: no connection within ``timeout``.
    """
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    last: BaseException | None = None
    listener = _socket(local_port)
    listener.listen(4)
    accepted = asyncio.ensure_future(_accept_from(listener, peer))
    try:
        while loop.time() < deadline:
            if accepted.done():
                return _nodelay(accepted.result())
            sock = _socket(local_port)
            try:
                async with asyncio.timeout(min(_ATTEMPT, max(0.05, deadline - loop.time()))):
                    await loop.sock_connect(sock, peer)
            except (OSError, TimeoutError) as e:
                last = e
                sock.close()
                await asyncio.wait({accepted}, timeout=0.05)
                continue
            return _nodelay(sock)
    finally:
        if not accepted.done():
            accepted.cancel()
        listener.close()
    raise PeeringError(
        f'TCP hole punching to {peer[0]}:{peer[1]} from port {local_port} failed: {last!r}'
    )


async def _accept_from(listener: socket.socket, peer: tuple[str, int]) -> socket.socket:
    """The first connection ``listener`` accepts from ``peer`` (others are closed)."""
    loop = asyncio.get_running_loop()
    while True:
        sock, address = await loop.sock_accept(listener)
        if (address[0], address[1]) == peer:
            sock.setblocking(False)
            return sock
        sock.close()


def _nodelay(sock: socket.socket) -> socket.socket:
    with contextlib.suppress(OSError):
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return sock
