"""The service's HTTP connections: timeouts for idle and slow clients, a cap on their number.

uvicorn's HTTP protocol closes a kept-alive connection that stays idle after a response,
but nothing else: a connection that never sends a byte, or sends its request head one
byte at a time (slowloris), stays open for ever. :func:`protocols` returns uvicorn
protocol classes that add, per connection:

* ``keep_alive_timeout``: a connection with no request under way (a new one before its
  first byte, or one between requests) is closed after this long;
* ``header_timeout``: a request head (request line and headers) must be complete this
  long after its first byte arrived, however slowly the bytes come;
* ``idle_timeout``: while a request body is being received, a pause this long without a
  byte closes the connection (not while the service itself holds reading back);
* ``max_connections``: a connection accepted while this many are open (HTTP and
  WebSocket together) is closed at once, before it costs anything more.

The checks are timers armed and cancelled on events already handled (a connection made,
data received, a response complete); no per-byte work is added.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging

import h11
from uvicorn.protocols.http.h11_impl import H11Protocol
from uvicorn.protocols.websockets.websockets_sansio_impl import WebSocketsSansIOProtocol

__all__ = ['ConnectionGate', 'protocols']

logger = logging.getLogger(__name__)


@dataclasses.dataclass(eq=False)
class ConnectionGate:
    """Open connections, and the limits every connection of one server follows."""

    max_connections: int
    header_timeout: float
    idle_timeout: float
    keep_alive_timeout: float
    open: int = dataclasses.field(default=0, init=False)
    refused: int = dataclasses.field(default=0, init=False)
    timed_out: int = dataclasses.field(default=0, init=False)


class HttpProtocol(H11Protocol):
    """uvicorn's HTTP protocol, bound by ``gate`` (set by :func:`protocols`)."""

    gate: ConnectionGate
    _head_timer: asyncio.TimerHandle | None = None
    _body_timer: asyncio.TimerHandle | None = None
    _counted = False
    _upgraded = False

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        if self.gate.open >= self.gate.max_connections:
            self.gate.refused += 1
            transport.abort()  # before anything is allocated for it
            return
        self.gate.open += 1
        self._counted = True
        super().connection_made(transport)
        # A new connection waits for its first request as a kept-alive one does.
        self.timeout_keep_alive_task = self.loop.call_later(
            self.gate.keep_alive_timeout, self.timeout_keep_alive_handler
        )

    def connection_lost(self, exc: Exception | None) -> None:
        if not self._counted:
            return
        self._cancel_timers()
        if not self._upgraded:
            self.gate.open -= 1
        super().connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        waiting_head = self.conn.their_state is h11.IDLE
        if waiting_head and self._head_timer is None:
            self._head_timer = self.loop.call_later(self.gate.header_timeout, self._expire)
        super().data_received(data)
        if self._upgraded:
            return
        state = self.conn.their_state
        if state is not h11.IDLE and self._head_timer is not None:
            self._head_timer.cancel()  # the head is complete
            self._head_timer = None
        if self._body_timer is not None:
            self._body_timer.cancel()
            self._body_timer = None
        if state is h11.SEND_BODY:
            self._body_timer = self.loop.call_later(self.gate.idle_timeout, self._body_idle)

    def on_response_complete(self) -> None:
        self._cancel_timers()
        super().on_response_complete()

    def handle_websocket_upgrade(self, event: h11.Request) -> None:
        self._cancel_timers()
        self._upgraded = True  # the WebSocket protocol counts it from now on
        super().handle_websocket_upgrade(event)

    def _cancel_timers(self) -> None:
        for timer in (self._head_timer, self._body_timer):
            if timer is not None:
                timer.cancel()
        self._head_timer = self._body_timer = None

    def _expire(self) -> None:
        self._head_timer = None
        if self.conn.their_state is h11.IDLE and not self.transport.is_closing():
            self.gate.timed_out += 1
            logger.debug('closing %s: no complete request head in time', self.client)
            self.transport.close()

    def _body_idle(self) -> None:
        self._body_timer = None
        if self.conn.their_state is not h11.SEND_BODY or self.transport.is_closing():
            return
        if self.flow.read_paused:  # the service holds reading back, not the client
            self._body_timer = self.loop.call_later(self.gate.idle_timeout, self._body_idle)
            return
        self.gate.timed_out += 1
        logger.debug('closing %s: its request body stalled', self.client)
        self.transport.close()


class WsProtocol(WebSocketsSansIOProtocol):
    """uvicorn's WebSocket protocol, counted by ``gate``."""

    gate: ConnectionGate

    def connection_lost(self, exc: Exception | None) -> None:
        self.gate.open -= 1
        super().connection_lost(exc)


def protocols(gate: ConnectionGate) -> tuple[type[asyncio.Protocol], type[asyncio.Protocol]]:
    """uvicorn's ``http`` and ``ws`` protocol classes, bound by ``gate``."""
    http = type('HttpProtocol', (HttpProtocol,), {'gate': gate})
    ws = type('WsProtocol', (WsProtocol,), {'gate': gate})
    return http, ws
