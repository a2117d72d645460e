"""The hole-punched path: one UDP socket per peering, NAT discovery, punching, then QUIC.

The socket first asks the relay's two UDP ports which address they see (so the endpoint
learns its public mapping and whether its NAT maps per destination, i.e. is symmetric),
then both endpoints send punch datagrams to each other's mapping until each has heard
the other, and finally run QUIC (aioquic) over the same socket: TLS 1.3 with the peer's
pinned certificate, reliable streams, congestion control. Each stream of the QUIC
connection carries one :mod:`tether._wire` channel.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import json
import logging
import os
import socket
import ssl
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tether._serve import signalling as rp
from tether.exceptions import WireConnectionError

__all__ = ['QuicPeer', 'UdpSession', 'nat_type', 'quic_config']

logger = logging.getLogger(__name__)

PUNCH = b'TTHRPUNCH'
PUNCH_ACK = b'TTHRPUNCHACK'
_WINDOW = 4 << 20
_CHUNK = 256 << 10
_HIGH = 8 << 20  # pause the writer past this many bytes waiting in the transport
KEEPALIVE = 1.0
"""Seconds between keepalives by default; a connection silent for three is dead."""
SILENT_INTERVALS = 3
_SOCKBUF = 8 << 20

Addr = tuple[str, int]


def quic_config(
    *,
    client: bool,
    cert_file: Path | None = None,
    key_file: Path | None = None,
    peer_cert: str | None = None,
    server_name: str | None = None,
    keepalive: float = KEEPALIVE,
) -> Any:
    """A QUIC configuration for a peer channel (pinned certificate, large windows).

    The connection ends when nothing was heard from the peer for ``SILENT_INTERVALS``
    keepalive intervals (its idle timeout; :class:`QuicPeer` sends a keepalive each
    interval), so a peer that died without a word is found out within seconds.
    """
    from aioquic.quic.configuration import QuicConfiguration

    config = QuicConfiguration(
        is_client=client,
        alpn_protocols=['tether-peer'],
        max_data=128 << 20,
        max_stream_data=64 << 20,
        max_datagram_size=1452,
        idle_timeout=SILENT_INTERVALS * keepalive,
        congestion_control_algorithm='cubic',
        server_name=server_name,
    )
    if client:
        assert peer_cert is not None
        config.load_verify_locations(cadata=peer_cert.encode())
        config.verify_mode = ssl.CERT_REQUIRED
    else:
        assert cert_file is not None
        assert key_file is not None
        config.load_cert_chain(cert_file, key_file)
    return config


class _StreamTransport(asyncio.Transport):
    """One QUIC stream seen as an asyncio transport by a wire ``FrameProtocol``."""

    def __init__(self, peer: QuicPeer, stream_id: int, protocol: Any) -> None:
        super().__init__()
        self.peer = peer
        self.stream_id = stream_id
        self.protocol = protocol
        self._pending: collections.deque[memoryview] = collections.deque()
        self._pending_bytes = 0
        self._paused = False
        self._closing = False
        self._fin_sent = False
        self._lost = False

    # Transport API used by tether._wire ---------------------------------------------

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        if name == 'peername':
            return self.peer.peer_addr
        return default

    def is_closing(self) -> bool:
        return self._closing or self._lost

    def get_write_buffer_size(self) -> int:
        # Bytes written and not yet handed to QUIC: what a writer that passes another
        # connection's bytes on (a piped object) watches, to pause that connection.
        return self._pending_bytes

    def write(self, data: Any) -> None:
        if self.is_closing():
            return
        view = memoryview(data).cast('B')
        if not view.nbytes:
            return
        self._pending.append(view)
        self._pending_bytes += view.nbytes
        self.top_up()
        if self._pending_bytes > _HIGH and not self._paused:
            self._paused = True
            self.protocol.pause_writing()
        self.peer.transmit_soon()

    def close(self) -> None:
        if self._closing:
            return
        self._closing = True
        self.top_up()
        self.peer.transmit_soon()

    def abort(self) -> None:
        self._closing = True
        if not self._lost:
            with contextlib.suppress(Exception):
                self.peer.quic.reset_stream(self.stream_id, 0)
            self.peer.transmit_soon()
            self.lost(None)

    def pause_reading(self) -> None:
        pass

    def resume_reading(self) -> None:
        pass

    # Driven by the QUIC connection ------------------------------------------------------

    def _in_flight(self) -> int:
        stream = self.peer.quic._streams.get(self.stream_id)
        if stream is None:
            return 0
        sender = stream.sender
        return int(sender._buffer_stop - sender._buffer_start)

    def top_up(self) -> None:
        """Hand pending bytes to QUIC while its unacknowledged window has room."""
        if self._lost:
            return
        quic = self.peer.quic
        while self._pending and self._in_flight() < _WINDOW:
            view = self._pending[0]
            take = view[:_CHUNK]
            quic.send_stream_data(self.stream_id, bytes(take))
            self._pending_bytes -= take.nbytes
            if take.nbytes == view.nbytes:
                self._pending.popleft()
            else:
                self._pending[0] = view[_CHUNK:]
        if self._paused and self._pending_bytes < _HIGH // 2:
            self._paused = False
            self.protocol.resume_writing()
        if self._closing and not self._pending and not self._fin_sent:
            self._fin_sent = True
            quic.send_stream_data(self.stream_id, b'', end_stream=True)

    def feed(self, data: bytes, end: bool) -> None:
        """Deliver received stream data to the protocol's buffers."""
        view = memoryview(data)
        while view.nbytes and not self._lost:
            buf = self.protocol.get_buffer(view.nbytes)
            n = min(len(buf), view.nbytes)
            buf[:n] = view[:n]
            self.protocol.buffer_updated(n)
            view = view[n:]
        if end:
            self.lost(None)

    def lost(self, exc: Exception | None) -> None:
        if self._lost:
            return
        self._lost = True
        self._pending.clear()
        self.peer.channels.pop(self.stream_id, None)
        self.protocol.connection_lost(exc)


def _quic_protocol_class() -> type:
    from aioquic.asyncio.protocol import QuicConnectionProtocol
    from aioquic.quic import events

    class _Peer(QuicConnectionProtocol):
        def __init__(self, quic: Any, owner: QuicPeer) -> None:
            super().__init__(quic)
            self.owner = owner

        def quic_event_received(self, event: Any) -> None:
            owner = self.owner
            if isinstance(event, events.StreamDataReceived):
                channel = owner.channels.get(event.stream_id)
                if channel is None:
                    channel = owner.accept_stream(event.stream_id)
                if channel is not None:
                    channel.feed(event.data, event.end_stream)
            elif isinstance(event, events.StreamReset):
                channel = owner.channels.get(event.stream_id)
                if channel is not None:
                    channel.lost(WireConnectionError('the peer reset the QUIC stream'))
            elif isinstance(event, events.ConnectionTerminated):
                owner.terminated(event.reason_phrase or str(event.error_code))

        def transmit(self) -> None:
            for channel in list(self.owner.channels.values()):
                channel.top_up()
            super().transmit()

    return _Peer


class QuicPeer:
    """A QUIC connection to one peer over a :class:`UdpSession`'s socket.

    Args:
        session: The UDP socket it runs on.
        quic: The aioquic ``QuicConnection``.
        peer_addr: The peer's public address.
        on_stream: Called with the transport of each stream the peer opens (server side).
        keepalive: Seconds between keepalives (the ``quic_config`` of ``quic`` must have
            the same, for its idle timeout).
    """

    def __init__(
        self,
        session: UdpSession,
        quic: Any,
        peer_addr: Addr,
        on_stream: Callable[[_StreamTransport], None] | None = None,
        keepalive: float = KEEPALIVE,
    ) -> None:
        self.session = session
        self.keepalive = keepalive
        self.quic = quic
        self.peer_addr = peer_addr
        self.on_stream = on_stream
        self.channels: dict[int, _StreamTransport] = {}
        self.closed = asyncio.Event()
        self.reason = ''
        self.protocol = _quic_protocol_class()(quic, self)
        assert session.transport is not None
        self.protocol.connection_made(session.transport)
        self._keepalive = asyncio.ensure_future(self._ping())

    async def _ping(self) -> None:
        while not self.closed.is_set():
            await asyncio.sleep(self.keepalive)
            with contextlib.suppress(Exception):
                self.quic.send_ping(0)
                self.protocol.transmit()

    def transmit_soon(self) -> None:
        self.protocol._transmit_soon()

    def datagram_received(self, data: bytes, addr: Addr) -> None:
        self.protocol.datagram_received(data, addr)

    async def connect(self, timeout: float) -> None:
        """Client side: run the QUIC handshake.

        Raises:
            WireConnectionError: if it does not complete within ``timeout``.
        """
        self.protocol.connect(self.peer_addr)
        try:
            async with asyncio.timeout(timeout):
                await self.protocol.wait_connected()
        except (TimeoutError, ConnectionError) as e:
            self.close()
            raise WireConnectionError(
                f'QUIC handshake with {self.peer_addr[0]}:{self.peer_addr[1]} failed: {e!r}'
            ) from e

    def open_stream(self, protocol: Any) -> _StreamTransport:
        """Open a new stream whose data goes to ``protocol``."""
        if self.closed.is_set():
            raise WireConnectionError(f'QUIC connection to the peer is closed: {self.reason}')
        sid = self.quic.get_next_available_stream_id()
        transport = _StreamTransport(self, sid, protocol)
        self.channels[sid] = transport
        protocol.connection_made(transport)
        return transport

    def accept_stream(self, stream_id: int) -> _StreamTransport | None:
        if self.on_stream is None:
            return None
        transport = _StreamTransport(self, stream_id, None)
        self.channels[stream_id] = transport
        self.on_stream(transport)
        return transport

    def terminated(self, reason: str) -> None:
        if reason == 'Idle timeout':  # aioquic's phrase
            silent = SILENT_INTERVALS * self.keepalive
            reason = f'the peer was silent for {silent:g} s (dead, or cut off)'
        self.reason = reason
        self.closed.set()
        self._keepalive.cancel()
        for channel in list(self.channels.values()):
            channel.lost(WireConnectionError(f'QUIC connection closed: {reason}'))

    def close(self) -> None:
        if not self.closed.is_set():
            with contextlib.suppress(Exception):
                self.protocol.close()
            self.terminated('closed')

    @property
    def alive(self) -> bool:
        return not self.closed.is_set()


class UdpSession(asyncio.DatagramProtocol):
    """One UDP socket: NAT discovery, hole punching, then one QUIC connection."""

    def __init__(self, token: bytes = b'') -> None:
        self.token = token
        self.transport: asyncio.DatagramTransport | None = None
        self._probes: dict[bytes, asyncio.Future[Addr]] = {}
        self._heard: asyncio.Event = asyncio.Event()
        self.heard_from: Addr | None = None
        self.quic: QuicPeer | None = None
        self.accept: Callable[[bytes, Addr], QuicPeer | None] | None = None

    @classmethod
    async def open(cls, token: bytes = b'', bind: str = '0.0.0.0') -> UdpSession:
        loop = asyncio.get_running_loop()
        _, session = await loop.create_datagram_endpoint(lambda: cls(token), local_addr=(bind, 0))
        return session

    @property
    def local_port(self) -> int:
        assert self.transport is not None
        return int(self.transport.get_extra_info('sockname')[1])

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]
        sock = transport.get_extra_info('socket')
        if sock is not None:
            # Bursts of a fast sender must not overflow the kernel's default 208 KiB.
            for opt in (socket.SO_RCVBUF, socket.SO_SNDBUF):
                with contextlib.suppress(OSError):
                    sock.setsockopt(socket.SOL_SOCKET, opt, _SOCKBUF)

    def error_received(self, exc: Exception) -> None:
        logger.debug('udp session: %r', exc)

    def datagram_received(self, data: bytes, addr: Addr) -> None:
        if data.startswith(rp.SEEN):
            nonce = data[len(rp.SEEN) : len(rp.SEEN) + 16]
            fut = self._probes.pop(nonce, None)
            if fut is not None and not fut.done():
                with contextlib.suppress(ValueError, TypeError):
                    ip, port = json.loads(data[len(rp.SEEN) + 16 :])
                    fut.set_result((str(ip), int(port)))
            return
        if data.startswith((PUNCH_ACK, PUNCH)):
            ack = data.startswith(PUNCH_ACK)
            token = data[len(PUNCH_ACK if ack else PUNCH) :]
            if self.token and token == self.token:
                self.heard_from = (addr[0], addr[1])
                self._heard.set()
                if not ack and self.transport is not None:
                    self.transport.sendto(PUNCH_ACK + self.token, addr)
            return
        if self.quic is not None:
            self.quic.datagram_received(data, addr)
        elif self.accept is not None:
            self.quic = self.accept(data, (addr[0], addr[1]))
            if self.quic is not None:
                self.quic.datagram_received(data, addr)

    async def probe(self, addr: Addr, timeout: float = 1.5, tries: int = 3) -> Addr | None:
        """Ask the relay at ``addr`` which address it sees; ``None`` if it never answers."""
        assert self.transport is not None
        for _ in range(tries):
            nonce = os.urandom(16)
            fut: asyncio.Future[Addr] = asyncio.get_running_loop().create_future()
            self._probes[nonce] = fut
            self.transport.sendto(rp.PROBE + nonce, addr)
            try:
                return await asyncio.wait_for(fut, timeout / tries)
            except TimeoutError:
                self._probes.pop(nonce, None)
        return None

    async def punch(self, peer: Addr, timeout: float) -> Addr | None:
        """Send punch datagrams to ``peer`` until it is heard from (its address) or not."""
        assert self.transport is not None
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        heard_at: float | None = None
        while loop.time() < deadline:
            self.transport.sendto(PUNCH + self.token, peer)
            if self._heard.is_set():
                # Keep punching a little after hearing, so the peer hears us too.
                heard_at = heard_at or loop.time()
                if loop.time() - heard_at > 0.3:
                    return self.heard_from
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(asyncio.shield(self._heard.wait()), 0.05)
        return self.heard_from if self._heard.is_set() else None

    def close(self) -> None:
        if self.quic is not None:
            self.quic.close()
        if self.transport is not None:
            self.transport.close()


async def nat_type(
    relay_host: str, udp_ports: list[int], local_ip: str | None = None
) -> dict[str, Any]:
    """Classify this host's NAT by probing the relay's two UDP ports from one socket.

    ``open`` (no NAT), ``cone`` (one public mapping for every destination: hole punching
    works), ``symmetric`` (a mapping per destination: use the relayed path) or
    ``blocked`` (no UDP answer).
    """
    session = await UdpSession.open()
    try:
        seen = [await session.probe((relay_host, port)) for port in udp_ports[:2]]
    finally:
        session.close()
    result: dict[str, Any] = {'mappings': [list(s) if s else None for s in seen]}
    if not seen or any(s is None for s in seen):
        result['nat'] = 'blocked'
    elif len(set(seen)) > 1:
        result['nat'] = 'symmetric'
    elif local_ip is not None and seen[0] is not None and seen[0][0] == local_ip:
        result['nat'] = 'open'
    else:
        result['nat'] = 'cone'
    return result
