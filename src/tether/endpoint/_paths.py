"""The paths of a peer channel: which one two endpoints take, and the relayed one's transport.

Both sides derive the same path from an offer and its answer (:func:`choose_path`):
**direct**, **punched** or **relayed** (see :mod:`tether.endpoint._peers`).
"""

from __future__ import annotations

import asyncio
import contextlib
import socket

from tether.endpoint._link import _DIAL_TIMEOUT, tcp_keepalive
from tether.endpoint._offers import PathAnswer, PathOffer
from tether.exceptions import PeeringError

__all__ = ['choose_path', 'local_ip_towards', 'tunnel_transport']


def choose_path(paths: list[str], offer: PathOffer, answer: PathAnswer) -> str:
    """The path both sides derive from an offer and its answer."""
    if 'direct' in paths and answer.direct:
        return 'direct'
    nats = {offer.nat, answer.nat}
    if 'punched' in paths and offer.udp and answer.udp and nats <= {'cone', 'open'}:
        return 'punched'
    if 'relayed' in paths:
        return 'relayed'
    raise PeeringError(f'no allowed path ({", ".join(paths)}) fits this pair of endpoints')


def local_ip_towards(host: str) -> str | None:
    """The local address the kernel would use to reach ``host`` (nothing is sent)."""
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            s.connect((host, 9))
            return str(s.getsockname()[0])
    except OSError:
        return None


async def tunnel_transport(
    host: str, port: int, ticket: bytes, keepalive: float
) -> asyncio.Transport:
    """A TCP connection to the relay's data port that has presented its ticket.

    With kernel keepalives (see :func:`tcp_keepalive`): a relay that vanished fails the
    channel within seconds (a peer that died is reported by the relay, which closes the
    spliced connection).
    """
    loop = asyncio.get_running_loop()
    try:
        async with asyncio.timeout(_DIAL_TIMEOUT * 2):
            transport, _ = await loop.create_connection(asyncio.Protocol, host, port)
    except (OSError, TimeoutError) as e:
        raise PeeringError(f'cannot reach the relay data port {host}:{port}: {e!r}') from e
    with contextlib.suppress(Exception):
        transport.get_extra_info('socket').setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    tcp_keepalive(transport.get_extra_info('socket'), keepalive)
    transport.write(ticket)
    return transport
