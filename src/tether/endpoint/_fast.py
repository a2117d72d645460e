"""The endpoint's fast paths: whole small frames taken straight from the parser's buffer.

A client's small request for a peer is passed on as it came; a peer's small ``GET`` or
``PUT`` of one object is answered before it becomes a frame (see
:class:`tether._wire.FastPath`). Everything else goes to the endpoint's handlers.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from tether._serve import codes as proto
from tether._serve import messages
from tether._serve.requests import object_reply_now
from tether._wire import Connection, FastFrame, FastPath
from tether.endpoint._forwarding import Forwarder
from tether.exceptions import ProtocolError

if TYPE_CHECKING:
    from tether.endpoint._server import Endpoint

__all__ = ['client_fast', 'peer_fast']


def client_fast(self: Endpoint, conn: Connection) -> FastPath:
    """A client's small request for a peer, passed on before it becomes a frame.

    Takes a request whose header is exactly ``ids`` and the UUID of a peer that has
    an idle channel now, and passes its bytes on as they came (see
    :meth:`Forwarder.send_raw`). The rest goes to :meth:`_handle_client`.
    """
    server = self.clients
    links = self.peers.links
    object_types = proto.OBJECT_TYPES
    decode = messages.decode_object

    def fast(frame: FastFrame) -> bool:
        mtype, header, request_id, sizes, raw, _ = frame
        if mtype not in object_types or len(header) != 2:
            return False
        try:
            ids, target = decode(header)
        except ProtocolError:
            return False  # refused the usual way
        if target is None:
            return False
        link = links.get(target)  # keyed by UUID: a name goes the usual way
        if link is None or not link.alive:
            return False
        channel = link.take_idle()
        if channel is None:
            return False
        if not server.claim(conn):
            link.untake(channel)
            return False
        self.requests += 1
        forwarder = channel.state
        if forwarder is None:
            forwarder = Forwarder(self, link, channel)
        forwarder.send_raw(conn, request_id, target, mtype, ids, raw, sizes)
        return True

    return fast


def peer_fast(self: Endpoint, conn: Connection) -> FastPath:
    """A peer's small ``GET`` or ``PUT`` of one object, answered before it is a frame.

    Answered as :meth:`_handle_peer` answers it, without the frame, its dispatch or
    (for a ``GET``) any payload buffer. Anything else goes to :meth:`_handle_peer`.
    """
    server, table, pool, uuid = self.peer_server, self.table, self.pool, self.uuid
    decode = messages.decode_object

    def fast(frame: FastFrame) -> bool:
        mtype, header, request_id, sizes, raw, head = frame
        if mtype == proto.GET:
            if sizes:
                return False
        elif mtype != proto.PUT or len(sizes) != 1:
            return False
        if len(header) != 2:
            return False
        try:
            ids, target = decode(header)
        except ProtocolError:
            return False  # refused the usual way
        if target != uuid or len(ids) != 1:
            return False
        if not server.claim(conn):
            return False
        self.requests += 1
        payloads: tuple[bytearray, ...] = ()
        if mtype == proto.PUT:
            data = pool.take(sizes[0])
            data[:] = raw[head:]
            payloads = (data,)
        # A failure here is answered by the server (see Server(fast=)).
        reply = object_reply_now(table, mtype, ids, payloads, request_id)
        server.finish(conn, request_id, reply)
        return True

    return fast
