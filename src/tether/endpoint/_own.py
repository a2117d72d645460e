"""A client connection spliced onto a peer channel of its own (``CHANNEL``).

A client asks its endpoint for a channel of its own to one peer; the endpoint takes an
idle channel out of that peer's pool, answers ``OK`` and from then on copies bytes:
what the client writes goes to the peer as it arrives, what the peer writes comes back,
with no frame decoded on the way (the way an ``ssh -L`` tunnel carries a connection).
The owner checks every frame as it checks any peer's (a peer may only ask for objects it
owns, and warm-ups), so a client reaches nothing it could not reach through the
forwarding path; what it saves is the forwarding endpoint's parsing and bookkeeping on
every request and reply.

Reading stops on one side while the other side's transport is full (write flow control,
see :class:`~tether._wire.SpliceEnd`), so a large object streams through with bounded
memory. Either side closing, or failing, closes both: the client sees its connection
drop (its requests are idempotent, so it asks again over a fresh one), and the channel
is not reused.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from tether._wire import Connection, SpliceEnd

if TYPE_CHECKING:
    from tether.endpoint._peers import PeerLink

__all__ = ['OwnChannel']

logger = logging.getLogger(__name__)


class _Half(SpliceEnd):
    """One of the two spliced transports; its closing closes the pair."""

    def __init__(self, own: OwnChannel, dest: Any) -> None:
        self._own = own
        self.dest = dest

    def eof_received(self) -> bool | None:
        return None  # the transport closes; connection_lost closes the other side

    def connection_lost(self, exc: Exception | None) -> None:
        self._own.close(exc)


class OwnChannel:
    """A client connection and a peer channel, spliced until either closes.

    Args:
        link: The peer's link; the channel came from its :meth:`PeerLink.take_own`.
        client: The client's connection (its frame parser idle).
        channel: The peer channel (its frame parser idle).
        on_close: Called once, when both are closed.
    """

    def __init__(
        self,
        link: PeerLink,
        client: Connection,
        channel: Connection,
        on_close: Callable[[OwnChannel], None],
    ) -> None:
        self.link = link
        self.client = client
        self.channel = channel
        self._on_close = on_close
        self._closed = False

    def start(self) -> None:
        """Splice: from now on the two transports' bytes go to each other."""
        ct, pt = self.client.transport, self.channel.transport
        ct.set_protocol(_Half(self, pt))
        pt.set_protocol(_Half(self, ct))

    def close(self, exc: BaseException | None = None) -> None:
        """Close both sides (once); their former frame parsers learn it too."""
        if self._closed:
            return
        self._closed = True
        self.link.own_closed()
        for conn in (self.client, self.channel):
            if exc is None:
                conn.transport.close()
            else:
                conn.transport.abort()
        # The server serving the client connection waits on its parser: tell it.
        error = exc if isinstance(exc, Exception) else None
        for conn in (self.client, self.channel):
            conn.protocol.connection_lost(error)
        logger.debug('own channel of %s to %s closed', self.client.peer, self.link.name)
        self._on_close(self)
