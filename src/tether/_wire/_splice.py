"""Two transports spliced together: what one reads, the other writes, with flow control.

Used where bytes are carried without being parsed: the relay's relayed channels
(:class:`SpliceEnd`), and an endpoint's client connections with a peer channel of their
own (:class:`Splice`, two authenticated connections whose frames stop being parsed).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from tether._wire._conn import Connection

__all__ = ['Splice', 'SpliceEnd']


class SpliceEnd(asyncio.Protocol):
    """The protocol of one spliced transport: it writes what it reads to ``dest``.

    ``dest`` (the other transport) is set when the two are paired; until then nothing is
    forwarded and flow control has nothing to act on. While this end's own transport is
    full (``pause_writing``) the other transport stops reading, so a fast sender cannot
    make either side buffer without bound.
    """

    dest: asyncio.Transport | None = None

    def data_received(self, data: bytes) -> None:
        self.forward(data)

    def forward(self, data: bytes) -> None:
        """Write ``data`` to the other transport (subclasses may count or refuse it)."""
        assert self.dest is not None
        self.dest.write(data)

    def pause_writing(self) -> None:
        if self.dest is not None:
            self.dest.pause_reading()

    def resume_writing(self) -> None:
        if self.dest is not None and not self.dest.is_closing():
            self.dest.resume_reading()


class Splice:
    """Two connections that, from :meth:`start`, carry each other's bytes unparsed.

    Either side closing, or failing, closes both, once; their frame protocols are then
    told, so a server serving either connection ends it as it ends any closed one.

    Args:
        a: One connection (its transport must support ``set_protocol``).
        b: The other.
        on_close: Called once, with this splice, when both are closed.
    """

    def __init__(self, a: Connection, b: Connection, on_close: Callable[[Splice], None]) -> None:
        self.a = a
        self.b = b
        self._on_close = on_close
        self._closed = False

    @staticmethod
    def quiet(conn: Connection) -> bool:
        """Whether nothing ``conn`` received is waiting (no held frame, nothing parsed).

        Only then may its transport be spliced: bytes already read would be lost.
        """
        return not conn._held and conn.protocol.idle

    def start(self) -> None:
        """Splice the two transports.

        Raises:
            ValueError: a connection is not :meth:`quiet`.
        """
        if not (self.quiet(self.a) and self.quiet(self.b)):
            raise ValueError('a connection with received bytes waiting cannot be spliced')
        ta, tb = self.a.transport, self.b.transport
        ta.set_protocol(_End(self, tb))
        tb.set_protocol(_End(self, ta))

    def close(self, exc: BaseException | None = None) -> None:
        """Close both connections (once); a failure aborts them instead."""
        if self._closed:
            return
        self._closed = True
        for conn in (self.a, self.b):
            if exc is None:
                conn.transport.close()
            else:
                conn.transport.abort()
        # Whoever waits on the frame protocols (a server's reader) learns the end now.
        error = exc if isinstance(exc, Exception) else None
        for conn in (self.a, self.b):
            conn.protocol.connection_lost(error)
        self._on_close(self)


class _End(SpliceEnd):
    """One of a :class:`Splice`'s transports; its closing closes the pair."""

    def __init__(self, splice: Splice, dest: Any) -> None:
        self._splice = splice
        self.dest = dest

    def eof_received(self) -> bool | None:
        return None  # the transport closes; connection_lost closes the other side

    def connection_lost(self, exc: Exception | None) -> None:
        self._splice.close(exc)
