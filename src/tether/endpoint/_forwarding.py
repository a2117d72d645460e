"""Small requests forwarded over an idle peer channel, from the data callbacks alone.

A client's small request for an object another endpoint owns is written to an idle peer
channel from the client connection's data callback, and the owner's reply is written to
the client from the channel's data callback: no task, no future, no coroutine step.

When the client's frame already says everything the owner needs (its header is exactly
``ids`` and the owner's UUID), its bytes go to the peer as they came, with only the
request id changed; a small ``OK`` reply comes back the same way. Anything else (an
``ERROR`` reply, a large reply, a reply out of step, a dead channel) takes the general
path in :meth:`Forwarder._on_reply`.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from tether._serve import codes as proto
from tether._wire import (
    Connection,
    FastFrame,
    Frame,
    RawReply,
    Reply,
    check_reply,
    encode_head,
    error_reply,
    with_request_id,
)
from tether.endpoint._pipe import Pipe
from tether.exceptions import ProtocolError, RemoteError, WireError

if TYPE_CHECKING:
    from tether.endpoint._peers import PeerLink
    from tether.endpoint._server import Endpoint

__all__ = [
    'PEER_TIMEOUT',
    'PIPE_REPLY_MIN',
    'Done',
    'Forwarder',
    'chain_reply',
    'expire',
    'pipe_reply',
]

logger = logging.getLogger(__name__)

PEER_TIMEOUT = 300.0
"""Seconds a peer has to answer a forwarded request before its channel is dropped."""
PIPE_REPLY_MIN = 64 << 10
"""Smallest reply to a forwarded ``GET`` passed on to the client as it arrives."""

Done = Callable[[Reply | RawReply | None], None]
"""Takes the reply to give the client (``None``: nothing more to send)."""


def pipe_reply(  # noqa: PLR0917
    endpoint: Endpoint,
    client: Connection,
    client_rid: int,
    channel: Connection,
    header: dict[str, Any],
    sizes: tuple[int, ...],
) -> Pipe | None:
    """Start passing a large ``OK`` reply from ``channel`` on to ``client`` as it arrives.

    Writes the reply's head to the client now; the returned pipe's sinks take the
    payloads (``None``: the client is gone, receive the reply as usual).
    """
    if client.transport.is_closing():
        return None
    client.transport.write(encode_head(proto.OK, header, sizes, client_rid, 0))
    endpoint.piped['get'] += 1
    return Pipe(client, channel)


class Forwarder:
    """The request in flight on one peer channel (made once per channel, reused).

    A request begins with :meth:`send_raw` or :meth:`send`, on a channel taken with
    ``PeerLink.take_idle``; its reply ends it, from the channel's data callback: the
    channel goes back to the link and the client gets its reply (through the client
    server's ``finish``, or the ``done`` given to :meth:`send`). If the channel fails
    first, the request is retried once over a fresh peering (every request is
    idempotent: the object ids are the client's).
    """

    __slots__ = (
        '_client',
        '_client_rid',
        '_done',
        '_frame',
        '_ids',
        '_mtype',
        '_pipes',
        '_raw',
        '_rid',
        '_server',
        '_sizes',
        '_target',
        'channel',
        'endpoint',
        'link',
        'since',
    )

    def __init__(self, endpoint: Endpoint, link: PeerLink, channel: Connection) -> None:
        self.endpoint = endpoint
        self.link = link
        self.channel = channel
        self.since = 0.0
        """When the request in flight was sent (``time.monotonic()``)."""
        self._server = endpoint.clients
        self._done: Done | None = None
        self._client: Connection | None = None
        self._client_rid = 0
        self._rid = 0
        self._target = ''
        self._ids: list[str] = []
        self._raw: bytearray | None = None
        self._mtype = 0
        self._sizes: tuple[int, ...] = ()
        self._frame: Frame | None = None
        self._pipes: list[Pipe] = []
        channel.protocol.fast = self._reply_fast
        channel.state = self

    @classmethod
    def of(cls, endpoint: Endpoint, link: PeerLink, channel: Connection) -> Forwarder:
        """The forwarder of ``channel`` (made on first use)."""
        forwarder = channel.state
        if not isinstance(forwarder, Forwarder):
            forwarder = cls(endpoint, link, channel)
        return forwarder

    # Sending ---------------------------------------------------------------------------

    def send_raw(  # noqa: PLR0917
        self,
        client: Connection,
        client_rid: int,
        target: str,
        mtype: int,
        ids: list[str],
        raw: memoryview,
        sizes: tuple[int, ...],
    ) -> None:
        """Pass the client's frame ``raw`` on as it is, under the channel's next request id.

        ``raw``'s header must be exactly what the owner expects (``ids`` and its UUID).
        The caller has made ``client`` wait (``Server.claim``); the reply is given with
        ``Server.finish``.
        """
        channel = self.channel
        rid = channel.last_request_id + 1
        data = with_request_id(raw, rid)
        self._begin(client, client_rid, target, ids, None)
        self._raw = data
        self._mtype = mtype
        self._sizes = sizes
        try:
            channel.write_raw(data, rid)
        except WireError as e:
            self._failed(e)
            return
        self._sent(rid, mtype)

    def send(
        self, client: Connection, target: str, frame: Frame, ids: list[str], done: Done
    ) -> None:
        """Forward the client's ``frame`` (re-encoded for the owner)."""
        self._begin(client, frame.request_id, target, ids, done)
        self._frame = frame
        try:
            rid = self.channel.write_request(
                frame.type, {'ids': ids, 'endpoint': self.link.uuid}, frame.payloads
            )
        except WireError as e:
            self._failed(e)
            return
        self._sent(rid, frame.type)

    def _begin(
        self, client: Connection, client_rid: int, target: str, ids: list[str], done: Done | None
    ) -> None:
        self._client = client
        self._client_rid = client_rid
        self._target = target
        self._ids = ids
        self._done = done

    def _sent(self, rid: int, mtype: int) -> None:
        self._rid = rid
        protocol = self.channel.protocol
        if mtype == proto.GET:
            # A large reply goes on to the client as it arrives (see _route).
            protocol.route_min = PIPE_REPLY_MIN
            protocol.router = self._route
        # No timer per request: expire() drops channels whose request is too old.
        self.since = time.monotonic()
        self.endpoint.in_flight.add(self)
        try:
            protocol.on_next(self._on_reply)
        except RuntimeError:
            # A frame the peer sent unasked is waiting: the channel is out of step.
            self._failed(ProtocolError(f'{self.channel.peer} sent a frame nobody asked for'))

    # Replies ---------------------------------------------------------------------------

    def _reply_fast(self, frame: FastFrame) -> bool:
        """A small ``OK`` answering the request in flight: passed to the client as it is."""
        mtype, _, request_id, _, raw, head = frame
        if self._client is None or mtype != proto.OK or request_id != self._rid:
            return False
        channel = self.channel
        channel.protocol.cancel_next()
        data = with_request_id(raw, self._client_rid)
        self.link.give_back(channel, raw.nbytes - head)
        endpoint = self.endpoint
        endpoint.forwarded += 1
        if self._raw is not None:
            endpoint.passed += 1  # the request went through unchanged too
        self._finish(data)
        return True

    def _route(
        self, mtype: int, header: dict[str, Any], request_id: int, sizes: tuple[int, ...]
    ) -> list[Any] | None:
        # Only the answer to the request in flight (a reply out of step is received whole,
        # refused by _on_reply's check, and drops the channel).
        client = self._client
        if client is None or mtype != proto.OK or request_id != self._rid:
            return None
        pipe = pipe_reply(self.endpoint, client, self._client_rid, self.channel, header, sizes)
        if pipe is None:
            return None
        self._pipes.append(pipe)
        return pipe.sinks(sizes)

    def _on_reply(self, reply: Frame | BaseException) -> None:
        """Every reply :meth:`_reply_fast` left, and the channel's failure."""
        if isinstance(reply, BaseException):
            self._failed(reply)
            return
        try:
            check_reply(reply, self._rid, self.channel.peer)
        except RemoteError as e:
            self.link.give_back(self.channel, 0)
            self._finish(error_reply(e.code, f'peer endpoint {self._target}: {e}'))
            return
        except WireError as e:  # out of step, or the peer refused the channel
            self._failed(e)
            return
        self.link.give_back(self.channel, sum(len(p) for p in reply.payloads))
        self.endpoint.forwarded += 1
        pipes = self._pipes
        if pipes:
            if pipes[0].failed is not None and self._client is not None:
                self._client.abort()
            self._finish(None)  # the reply went to the client as it arrived
            return
        self._finish((reply.type, reply.header, reply.payloads))

    def _failed(self, failure: BaseException) -> None:
        """The channel failed: drop it; retry the request over a fresh peering, once."""
        channel, link = self.channel, self.link
        channel.abort()
        link.dropped()
        link.broken = link.broken or str(failure)
        client, target, ids = self._client, self._target, self._ids
        assert client is not None
        if self._pipes:
            # The client has the head of a reply that will not complete.
            client.abort()
            self._finish(None)
            return
        frame = self._request()
        done = self._done or functools.partial(self._server.finish, client, self._client_rid)
        self._clear()
        logger.info('channel to %s failed (%s): re-peering once', target, failure)
        self.endpoint.retry(client, target, frame, ids, done)

    def _request(self) -> Frame:
        """The request in flight, as a frame (for a retry)."""
        if self._frame is not None:
            return self._frame
        raw = self._raw
        assert raw is not None
        start = len(raw) - sum(self._sizes)  # the payloads end the frame
        payloads: list[Any] = []
        for size in self._sizes:
            payloads.append(memoryview(raw)[start : start + size])
            start += size
        return Frame(self._mtype, {}, payloads, self._client_rid)

    def _finish(self, reply: Reply | RawReply | None) -> None:
        client, client_rid, done = self._client, self._client_rid, self._done
        assert client is not None
        self._clear()
        if done is None:
            self._server.finish(client, client_rid, reply)
        else:
            done(reply)

    def _clear(self) -> None:
        self.endpoint.in_flight.discard(self)
        self.channel.protocol.router = None
        self._done = None
        self._client = None
        self._raw = None
        self._frame = None
        if self._pipes:
            self._pipes = []


def expire(in_flight: set[Forwarder]) -> float:
    """Drop every channel whose request has waited longer than :data:`PEER_TIMEOUT`.

    Its request then fails over (see :meth:`Forwarder._failed`). Returns the seconds
    until the next check is due.
    """
    now = time.monotonic()
    for forwarder in list(in_flight):
        if now - forwarder.since > PEER_TIMEOUT:
            in_flight.discard(forwarder)
            forwarder.channel.abort()
    return min(5.0, PEER_TIMEOUT / 4)


def chain_reply(task: asyncio.Task[Reply | None], done: Done) -> None:
    """Give ``done`` the reply of ``task``."""
    if task.cancelled():
        done(error_reply('internal', 'the request was cancelled'))
    elif (error := task.exception()) is not None:
        logger.error('forwarding a request failed', exc_info=error)
        done(error_reply('internal', f'forwarding failed: {error!r}'))
    else:
        done(task.result())
