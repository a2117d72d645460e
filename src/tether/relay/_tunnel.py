"""The relay's data path: NAT discovery probes, and the two sides of a relayed channel.

A relayed channel is two TCP connections to the relay's data port that present the
same ticket; their bytes are then spliced, the endpoints' own end-to-end TLS inside.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import logging
from typing import TYPE_CHECKING, Any

from tether._serve import signalling as proto
from tether._wire import SpliceEnd

if TYPE_CHECKING:
    from tether.relay._server import RelayServer

__all__ = ['Probe', 'Ticket', 'TunnelSide']

logger = logging.getLogger(__name__)


@dataclasses.dataclass
class Ticket:
    user: str
    expires: float
    waiting: TunnelSide | None = None


class Probe(asyncio.DatagramProtocol):
    """Answers NAT discovery probes with the address the datagram came from."""

    def __init__(self) -> None:
        self.transport: asyncio.DatagramTransport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def datagram_received(self, data: bytes, addr: tuple[str | Any, int]) -> None:
        if len(data) != len(proto.PROBE) + 16 or not data.startswith(proto.PROBE):
            return
        nonce = data[len(proto.PROBE) :]
        seen = json.dumps([addr[0], addr[1]]).encode()
        assert self.transport is not None
        self.transport.sendto(proto.SEEN + nonce + seen, addr)


class TunnelSide(SpliceEnd):
    """One side of a relayed channel: a ticket first, then bytes spliced to the other side.

    What arrives behind the ticket before the other side joins is held, and counted
    against the user's forwarded bytes as it arrives, up to ``max_early_bytes``: a side
    that sends more before the other joins is dropped. (Endpoints send at most a TLS
    ClientHello before the other side answers.) Held bytes are freed when the side
    closes, and a side that closes unpaired takes its ticket, and its slot, with it.
    """

    def __init__(self, relay: RelayServer) -> None:
        self.relay = relay
        self.transport: asyncio.Transport | None = None
        self.other: TunnelSide | None = None
        self.ticket: Ticket | None = None
        self.ticket_id = ''
        self._head = bytearray()
        self._early: list[bytes] = []
        self._early_bytes = 0
        self._timer: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]
        self.relay._sides.add(self)
        loop = asyncio.get_running_loop()
        self._timer = loop.call_later(self.relay.config.tunnel_timeout, self._expire)

    def _expire(self) -> None:
        self._timer = None
        if self.other is None and self.transport is not None:
            self.transport.abort()

    def data_received(self, data: bytes) -> None:
        if self.other is not None:
            self.forward(data)
            return
        if self.ticket is not None:  # paired soon: hold what arrives early
            self._hold(data)
            return
        self._head += data
        if len(self._head) < proto.TICKET_BYTES:
            return
        raw, rest = (
            bytes(self._head[: proto.TICKET_BYTES]),
            bytes(self._head[proto.TICKET_BYTES :]),
        )
        self._head.clear()
        if raw == proto.TCP_PROBE:
            assert self.transport is not None
            peer = self.transport.get_extra_info('peername')
            self.transport.write(json.dumps([peer[0], peer[1]]).encode())
            self.transport.close()
            return
        self.relay._pair(self, raw.hex())
        if rest:
            if self.other is not None:
                self.forward(rest)
            elif self.ticket is not None:
                self._hold(rest)

    def _hold(self, data: bytes) -> None:
        assert self.ticket is not None
        assert self.transport is not None
        if self._early_bytes + len(data) > self.relay.config.max_early_bytes:
            self.relay.early_refused += 1
            logger.warning(
                'relay: dropped a relayed channel of %r that sent over %d bytes before its '
                'other side joined',
                self.ticket.user,
                self.relay.config.max_early_bytes,
            )
            self.transport.abort()
            return
        if not self.relay._count(self.ticket.user, len(data)):
            self.close()
            return
        self._early.append(data)
        self._early_bytes += len(data)
        self.relay._early_held(len(data))

    def _free_early(self) -> None:
        self.relay._early_held(-self._early_bytes)
        self._early_bytes = 0
        self._early = []

    def forward(self, data: bytes) -> None:
        assert self.ticket is not None
        if not self.relay._count(self.ticket.user, len(data)):
            self.close()
            return
        super().forward(data)

    def link(self, other: TunnelSide) -> None:
        """Pair with ``other`` (both sides are linked before either sends what it held)."""
        self.other = other
        self.dest = other.transport
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def flush(self) -> None:
        """Pass on what arrived early (counted already)."""
        early = self._early
        self._free_early()
        for data in early:
            SpliceEnd.forward(self, data)

    def close(self) -> None:
        for side in (self, self.other):
            if side is not None and side.transport is not None:
                side.transport.close()

    def connection_lost(self, exc: Exception | None) -> None:
        self.relay._sides.discard(self)
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        self._free_early()
        if self.other is not None and self.other.transport is not None:
            self.other.transport.close()
        ticket = self.ticket
        if ticket is None:
            return
        if self.other is None:
            # Never paired: the ticket goes with this side, and its slot is free again.
            if ticket.waiting is self and self.relay._tickets.get(self.ticket_id) is ticket:
                del self.relay._tickets[self.ticket_id]
                self.relay._tunnel_closed(ticket.user)
        elif ticket.waiting is None:
            self.relay._tunnel_closed(ticket.user)
            ticket.waiting = self  # count the close once per pair
