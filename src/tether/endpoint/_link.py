"""A peer link: the channels to one other endpoint of the user, kept warm and reused.

A :class:`PeerLink` holds up to a few channels (wire connections) to one peer: requests
take an idle channel or wait for one; a channel that drops fails its request in flight.
The :class:`~tether.endpoint._peers.PeerManager` opens links.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
import time
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from tether._serve.codes import WARM_UP
from tether._wire import (
    Connection,
    Frame,
    FrameRouter,
    Payload,
)
from tether.endpoint._pipe import Pipe
from tether.exceptions import (
    EndpointError,
    RemoteError,
    WireConnectionError,
    WireError,
)

if TYPE_CHECKING:
    pass


__all__ = ['LOST_WINDOW', 'LinkPipe', 'PeerLink', 'tcp_keepalive', 'zeros']

logger = logging.getLogger(__name__)

logger = logging.getLogger(__name__)

_MAX_CHANNELS = 4
_DIAL_TIMEOUT = 3.0
_PUNCH_TIMEOUT = 4.0
_QUIC_TIMEOUT = 8.0
_TCP_PUNCH_TIMEOUT = 5.0
_WARM_UP_TIMEOUT = 30.0
LOST_WINDOW = 60.0
"""Seconds a link's failure is remembered, to explain why its peer cannot be reached."""
_SILENT_INTERVALS = 3
_zeros: list[memoryview] = [memoryview(b'')]


def zeros(size: int) -> memoryview:
    """``size`` zero bytes, from one buffer kept for every warm-up of this process."""
    if len(_zeros[0]) < size:
        _zeros[0] = memoryview(bytes(size))
    return _zeros[0][:size]


def tcp_keepalive(sock: Any, interval: float) -> None:
    """Make the kernel find out within about ``3 * interval`` s that a peer is gone.

    Keepalive probes on an idle connection, and a bound on how long sent data (or a
    probe) may go unacknowledged (``TCP_USER_TIMEOUT``): a peer host that vanished, or a
    path that was cut, then fails the connection as a closed one would, instead of after
    the kernel's default of many minutes. A live peer acknowledges at kernel level, even
    while its process is busy, so a slow peer is not taken for a dead one.
    """
    if sock is None:
        return
    whole = max(1, round(interval))
    options = [
        (socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1),
        (socket.IPPROTO_TCP, getattr(socket, 'TCP_KEEPIDLE', None), whole),
        (socket.IPPROTO_TCP, getattr(socket, 'TCP_KEEPINTVL', None), whole),
        (socket.IPPROTO_TCP, getattr(socket, 'TCP_KEEPCNT', None), _SILENT_INTERVALS),
        (
            socket.IPPROTO_TCP,
            getattr(socket, 'TCP_USER_TIMEOUT', None),
            int(_SILENT_INTERVALS * interval * 1000),
        ),
    ]
    for level, option, value in options:
        if option is not None:
            with contextlib.suppress(OSError):
                sock.setsockopt(level, option, value)


class PeerLink:
    """Channels to one peer endpoint over one path (a small pool, opened on demand).

    Attributes:
        uuid: The peer's UUID.
        name: The peer's name.
        path: ``direct``, ``punched`` or ``relayed``.
    """

    def __init__(  # noqa: PLR0917
        self,
        uuid: str,
        name: str,
        path: str,
        opener: Callable[[], Awaitable[Connection]],
        closer: Callable[[], None] = lambda: None,
        alive: Callable[[], bool] = lambda: True,
        why: Callable[[], str] = lambda: 'its connection closed',
        *,
        first: Connection | None = None,
        max_channels: int = _MAX_CHANNELS,
        transport: str = 'tcp',
        warm_up: int = 0,
    ) -> None:
        self.uuid = uuid
        self.warm_up = warm_up
        self.warm_rate: float | None = None
        self.max_channels = max_channels
        self.transport = transport
        self.name = name
        self.path = path
        self._opener = opener
        self._closer = closer
        self._alive = alive
        self._why = why
        self._idle: list[Connection] = [first] if first is not None else []
        self._open = len(self._idle)
        self._cond = asyncio.Condition()
        self._waiting = 0
        self.broken: str | None = None
        self.since = time.time()
        self.requests = 0
        self.bytes = 0
        self.own = 0
        """Channels given to one client connection each (see :meth:`take_own`)."""

    @property
    def alive(self) -> bool:
        """Whether new requests may use this link."""
        return self.broken is None and self._alive()

    @property
    def failure(self) -> str:
        """Why this link is not alive (once it is not)."""
        return self.broken or self._why()

    def describe(self) -> str:
        """The peer's name and UUID, for messages."""
        return f'{self.name} ({self.uuid})' if self.name != self.uuid else self.uuid

    def info(self) -> dict[str, Any]:
        """What ``tether endpoint list --json`` shows about this peer."""
        return {
            'uuid': self.uuid,
            'name': self.name,
            'path': self.path,
            'transport': self.transport,
            'alive': self.alive,
            'channels': self._open,
            'own_channels': self.own,
            'since': self.since,
            'requests': self.requests,
            'bytes': self.bytes,
            'broken': self.broken,
            'warm_up_mbps': self.warm_rate,
        }

    async def warm(self, conn: Connection) -> None:
        """Carry ``warm_up`` bytes each way over a new channel before its first request.

        A short request and its reply never fill the path, so a congestion control that
        paces by its measure of the path (BBR) measures only them, and keeps pacing each
        later reply at that rate: a 100 KB reply then takes half a round trip longer
        than the path needs. One transfer that does fill the path gives it the real
        measure, which it keeps. The rate seen (both ways, round trips included) is
        shown as ``warm_up_mbps``. A peer that does not know the request is let be.

        Raises:
            WireError: the channel failed.
        """
        if self.warm_up <= 0:
            return
        t0 = time.perf_counter()
        try:
            reply = await conn.request(
                WARM_UP,
                {'size': self.warm_up},
                [zeros(self.warm_up)],
                timeout=_WARM_UP_TIMEOUT,
            )
        except RemoteError as e:
            logger.info('peer %s does not warm channels up (%s)', self.name, e)
            return
        seconds = time.perf_counter() - t0
        moved = self.warm_up + sum(len(p) for p in reply.payloads)
        self.warm_rate = round(moved * 8 / seconds / 1e6, 1)

    async def warm_idle(self) -> None:
        """Warm up the channel the link was opened with (see :meth:`warm`).

        Raises:
            WireError: the channel failed (the link is then marked broken).
        """
        if self.warm_up <= 0 or not self._idle:
            return
        conn = self._idle.pop()
        try:
            await self.warm(conn)
        except BaseException as e:
            conn.abort()
            self._open -= 1
            self.broken = self.broken or f'warming the channel up failed: {e!r}'
            raise
        self._idle.append(conn)

    async def _take(self) -> Connection:
        async with self._cond:
            while True:
                while self._idle:
                    conn = self._idle.pop()
                    if not conn.transport.is_closing():
                        return conn
                    self._open -= 1
                if self._open < self.max_channels:
                    self._open += 1
                    break
                self._waiting += 1
                try:
                    await self._cond.wait()
                finally:
                    self._waiting -= 1
        try:
            conn = await self._opener()
        except BaseException as e:
            self.broken = self.broken or f'cannot open a channel: {e}'
            async with self._cond:
                self._open -= 1
                self._cond.notify()
            if isinstance(e, EndpointError | RemoteError):
                # Not the peer's answer to a request: the channel could not be opened
                # (a refusal by the relay, a punched path that cannot reopen).
                raise WireConnectionError(
                    f'cannot open a channel to {self.describe()}: {e}'
                ) from e
            raise
        try:
            await self.warm(conn)
        except BaseException as e:
            conn.abort()
            self.broken = self.broken or f'warming a channel up failed: {e!r}'
            async with self._cond:
                self._open -= 1
                self._cond.notify()
            raise
        return conn

    def take_idle(self) -> Connection | None:
        """An idle open channel, taken at once without waiting (``None``: there is none).

        The caller ends with :meth:`finish` (which gives it back) or :meth:`dropped`.
        """
        while self._idle:
            conn = self._idle.pop()
            if not conn.transport.is_closing():
                return conn
            self._open -= 1
        return None

    def take_own(self) -> Connection | None:
        """An idle channel, taken out of the pool for one client connection for good.

        ``None``: no channel is idle (nothing is opened for it: the pool opens another
        when a request needs one). The caller ends with :meth:`own_closed`.
        """
        conn = self.take_idle()
        if conn is None:
            return None
        self._open -= 1  # no longer the pool's: the pool may open another
        self.own += 1
        if self._waiting:
            asyncio.get_running_loop().create_task(self._notify())
        return conn

    def own_closed(self) -> None:
        """A channel from :meth:`take_own` was closed."""
        self.own -= 1

    def dropped(self) -> None:
        """A channel from :meth:`take_idle` was dropped."""
        self._open -= 1
        if self._waiting:
            asyncio.get_running_loop().create_task(self._notify())

    def untake(self, conn: Connection) -> None:
        """A channel from :meth:`take_idle` was not used after all: it is idle again."""
        self._idle.append(conn)

    def give_back(self, conn: Connection, nbytes: int) -> None:
        """A channel from :meth:`take_idle` answered, with ``nbytes`` of payload: it is idle."""
        if conn.transport.is_closing():
            self._open -= 1
        else:
            self._idle.append(conn)
        self.requests += 1
        self.bytes += nbytes
        if self._waiting:
            asyncio.get_running_loop().create_task(self._notify())

    async def _notify(self) -> None:
        async with self._cond:
            self._cond.notify()

    async def finish(self, conn: Connection, request_id: int, *, timeout: float) -> Frame:
        """The reply to a request begun on ``conn`` (from :meth:`take_idle`), giving it back.

        Raises:
            WireError: the channel failed (the link is then marked broken).
            RemoteError: the peer refused the request.
        """
        return await self._settle(conn, conn.reply(request_id, timeout=timeout))

    async def _settle(self, conn: Connection, reply: Awaitable[Frame]) -> Frame:
        """Await ``reply`` on ``conn`` and give the channel back (dropped if it failed)."""
        try:
            frame = await reply
        except RemoteError:
            await self._give(conn)
            raise
        except (WireError, OSError) as e:
            conn.abort()
            await self._give(None)
            self.broken = str(e)
            raise
        except BaseException:
            conn.abort()
            await self._give(None)
            raise
        await self._give(conn)
        self.requests += 1
        self.bytes += sum(len(p) for p in frame.payloads)
        return frame

    async def _give(self, conn: Connection | None) -> None:
        async with self._cond:
            if conn is None or conn.transport.is_closing():
                self._open -= 1
            else:
                self._idle.append(conn)
            self._cond.notify()

    async def request(
        self,
        mtype: int,
        header: dict[str, Any],
        payloads: list[Payload] | tuple[Payload, ...] = (),
        *,
        timeout: float,
        reply_router: Callable[[Connection], FrameRouter] | None = None,
    ) -> Frame:
        """Send one request on a channel of this link and return the reply.

        ``reply_router`` (given the channel) routes the reply's payloads as they arrive
        (see :class:`~tether._wire._proto.FrameRouter`).

        Raises:
            WireError: the channel failed (the link is then marked broken).
            RemoteError: the peer refused the request.
        """
        conn = await self._take()

        async def routed() -> Frame:
            # The router is the channel's only while this request holds it.
            if reply_router is not None:
                conn.protocol.router = reply_router(conn)
            try:
                return await conn.request(mtype, header, payloads, timeout=timeout)
            finally:
                conn.protocol.router = None

        return await self._settle(conn, routed())

    def close(self) -> None:
        """Close every channel and the path under them."""
        self.broken = self.broken or 'closed'
        for conn in self._idle:
            conn.abort()
        self._idle.clear()
        self._closer()


class LinkPipe(Pipe):
    """A pipe into a peer channel taken from ``link``: the channel goes back exactly once."""

    def __init__(self, channel: Connection, src: Connection, link: PeerLink) -> None:
        super().__init__(channel, src, on_abort=self._abandoned)
        self.link = link
        self.handled = False
        self._dropped = False

    def _abandoned(self) -> None:
        # The client's frame was abandoned (or never handled): the channel is mid-frame.
        if not self.handled:
            self.drop()

    def drop(self) -> None:
        """The channel was dropped: count it out of the link, once."""
        if not self._dropped:
            self._dropped = True
            self.link.dropped()
