"""The endpoint: an object server for the clients of one site, plus a peer manager."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import ssl as _ssl
import tempfile
import time
from collections.abc import Awaitable
from pathlib import Path
from typing import Any

from tether._serve import codes as proto
from tether._serve import messages
from tether._serve import signalling as rp
from tether._serve.lifecycle import Lifecycle
from tether._serve.messages import ChannelRequest, ObjectRequest, PeersRequest
from tether._serve.objects import BufferPool, ObjectTable
from tether._serve.persistent import PersistentTable
from tether._serve.requests import object_reply_now
from tether._serve.site import SiteConfig, write_state
from tether._serve.sizes import parse_size
from tether._serve.tls import fingerprint, server_context
from tether._wire import (
    Connection,
    Frame,
    FrameRouter,
    Later,
    Limits,
    RawReply,
    Reply,
    Server,
    Splice,
    encode_head,
    error_reply,
)
from tether.endpoint._fast import client_fast, peer_fast
from tether.endpoint._forwarding import (
    PEER_TIMEOUT,
    PIPE_REPLY_MIN,
    Done,
    Forwarder,
    chain_reply,
    expire,
    pipe_reply,
)
from tether.endpoint._link import LinkPipe
from tether.endpoint._memory import EndpointMemory, in_memory
from tether.endpoint._metrics import EndpointMetrics
from tether.endpoint._peers import PeerManager, zeros
from tether.endpoint._pipe import Pipe, pipe_of
from tether.endpoint._relay_link import RelayLink
from tether.exceptions import EndpointError, PeeringError, ProtocolError, RemoteError, WireError

__all__ = ['Endpoint']

logger = logging.getLogger(__name__)

_FAST_MAX = 1 << 20  # largest request forwarded from the data callback (larger: chunked)


class Endpoint(Lifecycle):
    """One site's endpoint: serves its clients' objects, forwards the rest to peers.

    Args:
        config: The endpoint's configuration.
        home: ``$TETHER_HOME`` (default: the environment's).
    """

    def __init__(self, config: SiteConfig, home: Path | None = None) -> None:
        self.config = config
        self.home = home
        self.uuid = config.uuid
        self.folder = config.folder(home)
        self.cert_file = self.folder / 'peer.pem'
        self.key_file = self.folder / 'peer.key'
        try:
            self.cert_pem = self.cert_file.read_text()
            memory = parse_size(config.storage.memory)
            max_object = parse_size(config.storage.max_object)
            self.warm_up = parse_size(config.peering.warm_up)
        except (OSError, ValueError) as e:
            raise EndpointError(f'endpoint {config.name}: {e}') from e
        self.server_ssl: _ssl.SSLContext = server_context(self.cert_file, self.key_file)
        self.pool = BufferPool(min(memory // 4, 1 << 30))
        self._spill_tmp: str | None = None
        if config.storage.persist:
            self.table: ObjectTable = PersistentTable(memory, self.folder / 'data', self.pool)
        else:
            self._spill_tmp = tempfile.mkdtemp(prefix=f'tether-endpoint-{config.name}-')
            self.table = ObjectTable(memory, Path(self._spill_tmp), self.pool)
        limits = Limits(max_frame=max_object)
        # One budget for both servers: what a frame's head claims counts against it before
        # any byte arrives (a client's, a peer's, or a client's spliced onto a peer channel).
        self.memory = EndpointMemory(self.table, self.pool)
        self.metrics = EndpointMetrics(self)
        self.clients = Server(
            self.metrics.observed_sync(self._handle_client),
            host=config.host,
            port=config.port,
            secret=config.client_token(home),
            unix_path=self.folder / 'endpoint.sock',
            limits=limits,
            name=f'endpoint {config.name!r}',
            memory=self.memory,
            router=self._client_router,
            inline=True,
            fast=lambda conn: client_fast(self, conn),
        )
        self.peers = PeerManager(self)
        self.peer_server = Server(
            self._handle_peer,
            host=config.peering.bind,
            port=config.peering.port,
            secret=self.peers.secret_of,
            ssl=self.server_ssl,
            limits=limits,
            name=f'endpoint {config.name!r} (peers)',
            memory=self.memory,
            inline=True,
            fast=lambda conn: peer_fast(self, conn),
        )
        self.relay: RelayLink | None = None
        if config.relay.address is not None:
            token = config.relay_token(home)
            if token is None:
                raise EndpointError(
                    f'endpoint {config.name} has a relay but no relay token: put it in '
                    f'{self.folder / "relay.token"} or $TETHER_RELAY_TOKEN',
                )
            self.relay = RelayLink(
                config.relay.host_port(),
                rp.Register(token, config.uuid, config.name, fingerprint(self.cert_pem)),
                ca_file=config.relay.ca_file,
                server_hostname=config.relay.server_hostname,
                insecure=config.relay.insecure,
                on_offer=self.peers.on_offer,
                on_tunnel=self.peers.on_tunnel,
                on_change=self._relay_changed,
                retry_max=config.relay.retry_max,
            )
        self.started = time.time()
        self.requests = 0
        self.forwarded = 0
        self.passed = 0
        self.piped = {'put': 0, 'get': 0}
        self.own: set[Splice] = set()
        """Client connections spliced onto a peer channel of their own (``CHANNEL``)."""
        self.own_opened = 0
        self._stop: asyncio.Event | None = None
        self._retries: set[asyncio.Task[Reply | None]] = set()
        self.in_flight: set[Forwarder] = set()
        """Requests in flight on peer channels, from the data callbacks (see ``expire``)."""
        self._expiry: asyncio.TimerHandle | None = None
        self._serving = False
        """Between :meth:`start` publishing ``state.json`` and :meth:`close` removing it."""

    # Status ----------------------------------------------------------------------------

    def relay_state(self) -> dict[str, Any] | None:
        """The relay link's state (``None``: no relay configured)."""
        return None if self.relay is None else self.relay.state()

    def health(self) -> str:
        """``ok``, or what is wrong (``relay unreachable``: no peer can be reached)."""
        relay = self.relay
        return 'relay unreachable' if relay is not None and not relay.connected else 'ok'

    def status(self) -> dict[str, Any]:
        """What ``tether endpoint list --json`` reports about this endpoint."""
        t = self.table
        return {
            'name': self.config.name,
            'uuid': self.uuid,
            'pid': os.getpid(),
            'address': f'{self.clients.address[0]}:{self.clients.address[1]}',
            'peer_port': self.peer_server.address[1],
            'objects': len(t),
            'memory_used': t.memory_used,
            'memory_limit': t.memory_limit,
            'disk_used': t.disk_used,
            'inflight': self.memory.inflight,
            'disk_inflight': self.memory.disk_inflight,
            'persist': self.config.storage.persist,
            'requests': self.requests,
            'forwarded': self.forwarded,
            'passed': self.passed,
            'piped': dict(self.piped),
            'own_channels': {'open': len(self.own), 'opened': self.own_opened},
            'health': self.health(),
            'relay': self.relay_state(),
            'nat': self.peers.nat,
            'peers': self.peers.info(),
            'metrics': self.metrics.address(),
            'uptime': time.time() - self.started,
        }

    # Requests --------------------------------------------------------------------------

    def _local(self, frame: Frame, ids: list[str]) -> Reply | RawReply:
        return object_reply_now(self.table, frame.type, ids, frame.payloads, frame.request_id)

    def _handle_client(
        self, conn: Connection, frame: Frame
    ) -> Reply | RawReply | Later | Awaitable[Reply | None] | None:
        """A client's frame, from its connection's data callback (see ``Server(inline=)``).

        Local objects are answered at once; a small request for another endpoint is
        written to an idle peer channel at once and answered from that channel's data
        callback (:meth:`_forward_now`). Anything else runs as a coroutine.
        """
        self.requests += 1
        try:
            if frame.type in proto.OBJECT_TYPES:
                request: messages.Message = messages.decode_object(frame.header)
            else:
                request = messages.decode(frame.type, frame.header)
        except ProtocolError as e:
            return error_reply('bad-request', str(e))
        if type(request) is ObjectRequest:
            ids = request.ids
            target = request.endpoint or self.uuid
            pipe = pipe_of(frame.payloads)
            if pipe is not None:
                return self._finish_piped_put(target, pipe)
            if target in (self.uuid, self.config.name):
                return self._local(frame, ids)
            frame = in_memory(frame)  # passed on: payloads in spill files are mapped
            now = self._forward_now(conn, target, frame, ids)
            return now if now is not None else self._forward(conn, target, frame, ids)
        return self._handle_other(conn, frame, request)

    async def _handle_other(
        self, conn: Connection, frame: Frame, request: messages.Message
    ) -> Reply | None:
        t = frame.type
        if t == proto.STATUS:
            return proto.OK, self.status(), ()
        if type(request) is PeersRequest:
            if request.relay:
                if self.relay is None:
                    return error_reply('bad-request', 'this endpoint has no relay')
                try:
                    reply = await self.relay.call(rp.ListEndpoints(), rp.Endpoints)
                except (EndpointError, WireError) as e:
                    return error_reply('relay', str(e))
                return proto.OK, {'endpoints': reply.endpoints}, ()
            if request.check_nat:
                return await self._check_nat()
            return proto.OK, {'peers': self.peers.info()}, ()
        if type(request) is ChannelRequest:
            return await self._own_channel(conn, frame, request.endpoint)
        if t == proto.SHUTDOWN:
            logger.info('endpoint %s: shutdown requested by %s', self.config.name, conn.peer)
            self.stop()
            return proto.OK, None, ()
        return error_reply('bad-request', f'unknown message type {t}')

    async def _check_nat(self) -> Reply:
        """The NAT type the relay sees, or why it cannot be seen."""
        if self.relay is None:
            return error_reply(
                'no-relay',
                f'endpoint {self.config.name} has no relay configured, so it has no NAT type '
                f'to check and no peers (set relay.address in {self.folder / "endpoint.toml"})',
            )
        return await self.relay.check_nat(self.config.name, self.peers.detect_nat)

    async def _own_channel(self, conn: Connection, frame: Frame, target: str) -> Reply | None:
        """Give the client's connection a peer channel of its own.

        The endpoint takes an idle channel out of the peer's pool, answers ``OK`` and
        splices the two connections: the client's bytes go to the owner as they arrive
        and the owner's come back, with no frame decoded on the way (the way an ``ssh
        -L`` tunnel carries a connection). The owner checks every frame as it checks any
        peer's (a peer may only ask for objects it owns, and warm-ups), so the client
        reaches nothing it could not reach through the forwarding path; what it saves is
        this endpoint's parsing and bookkeeping on each request and reply. Either side
        closing closes both (the client asks again over a fresh connection).
        """
        if target in (self.uuid, self.config.name):
            return error_reply('bad-request', 'CHANNEL names another endpoint')
        if self.config.peering.own_channels == 0:
            return error_reply('unsupported', 'this endpoint gives no channel of its own')
        try:
            link = await self.peers.link(target)
        except PeeringError as e:
            return error_reply('peering', str(e))
        if target != link.uuid:
            # The owner takes only its UUID in a request's header, and nothing rewrites it.
            return error_reply('unsupported', 'a channel of its own takes a UUID, not a name')
        if link.path not in ('direct', 'relayed') or link.transport != 'tcp':
            return error_reply(
                'unsupported', f'no channel of its own over the {link.path} path to {target}'
            )
        if not Splice.quiet(conn):
            return error_reply('bad-request', 'a frame followed CHANNEL before its reply')
        if link.own >= self.config.peering.own_channels:
            return error_reply('busy', f'{link.own} connections have a channel of their own')
        channel = link.take_own()
        if channel is None:
            return error_reply('busy', f'no idle channel to {target} now')
        if not Splice.quiet(channel) or conn.transport.is_closing():
            channel.abort()
            link.own_closed()
            return error_reply('busy', f'no idle channel to {target} now')
        conn.transport.write(encode_head(proto.OK, {'path': link.path}, (), frame.request_id, 0))

        def closed(own: Splice) -> None:
            link.own_closed()
            self.own.discard(own)

        own = Splice(conn, channel, closed)
        own.start()
        self.own.add(own)
        self.own_opened += 1
        return None

    # Cut-through forwarding of large objects -------------------------------------------

    def _client_router(self, conn: Connection) -> FrameRouter:
        """Route a client's large ``PUT`` for another endpoint straight to its owner."""

        def route(
            mtype: int, header: dict[str, Any], request_id: int, sizes: tuple[int, ...]
        ) -> list[Any] | None:
            if mtype != proto.PUT:
                return None
            try:
                request = messages.decode_object(header)
            except ProtocolError:
                return None  # refused the usual way
            target, ids = request.endpoint, request.ids
            if target is None or target in (self.uuid, self.config.name) or len(ids) != len(sizes):
                return None
            # Only over a channel that is open and idle now: otherwise (first use, all
            # channels busy) the object is received whole and forwarded as usual.
            link = self.peers.ready_link(target)
            channel = link.take_idle() if link is not None else None
            if link is None or channel is None:
                return None
            pipe = LinkPipe(channel, conn, link)
            try:
                pipe.request_id = channel.start_request(
                    proto.PUT, {'ids': ids, 'endpoint': link.uuid}, sizes
                )
            except WireError:
                channel.abort()
                link.dropped()
                return None
            self.piped['put'] += 1
            return pipe.sinks(sizes)

        return route

    async def _finish_piped_put(self, target: str, pipe: Pipe) -> Reply:
        assert isinstance(pipe, LinkPipe)
        link, channel = pipe.link, pipe.out
        if pipe.failed is not None:
            channel.abort()
            pipe.drop()
            return error_reply(
                'peer-failed',
                f'the channel to peer endpoint {self.peers.describe(target)} failed: '
                f'{pipe.failed}',
            )
        pipe.handled = True
        try:
            reply = await link.finish(channel, pipe.request_id, timeout=PEER_TIMEOUT)
        except RemoteError as e:
            return error_reply(e.code, f'peer endpoint {target}: {e}')
        except (WireError, OSError) as e:
            return error_reply(
                'peer-failed',
                f'the channel to peer endpoint {self.peers.describe(target)} failed: {e}',
            )
        self.forwarded += 1
        return reply.type, reply.header, reply.payloads

    def _reply_router(self, client: Connection, client_rid: int) -> Any:
        """For a forwarded ``GET``: stream a large reply to the client as it arrives."""
        pipes: list[Pipe] = []

        def for_channel(channel: Connection) -> FrameRouter:
            # Replies from 64 KiB up go on as they arrive: the client's copy then ends
            # with the last chunk instead of starting after it.
            channel.protocol.route_min = PIPE_REPLY_MIN

            def route(
                mtype: int, header: dict[str, Any], request_id: int, sizes: tuple[int, ...]
            ) -> list[Any] | None:
                # Only the answer to the request in flight (a reply out of step is
                # received whole, refused by the request's check, and drops the channel).
                if mtype != proto.OK or request_id != channel.last_request_id:
                    return None
                pipe = pipe_reply(self, client, client_rid, channel, header, sizes)
                if pipe is None:
                    return None
                pipes.append(pipe)
                return pipe.sinks(sizes)

            return route

        return for_channel, pipes

    def _forward_now(
        self, client: Connection, target: str, frame: Frame, ids: list[str]
    ) -> Later | None:
        """Forward a small request over an idle channel, without a task (``None``: cannot).

        The reply is taken from the channel's data callback and given to the client from
        there (see :class:`~tether.endpoint._forwarding.Forwarder`).
        """
        link = self.peers.ready_link(target)
        if link is None or sum(len(p) for p in frame.payloads) > _FAST_MAX:
            return None
        channel = link.take_idle()
        if channel is None:
            return None
        done = Later()
        Forwarder.of(self, link, channel).send(client, target, frame, ids, done.set)
        return done

    def retry(
        self, client: Connection, target: str, frame: Frame, ids: list[str], done: Done
    ) -> None:
        """Forward ``frame`` the slow way (a fresh peering, once); ``done`` gets its reply."""
        retry = asyncio.get_running_loop().create_task(self._forward(client, target, frame, ids))
        self._retries.add(retry)
        retry.add_done_callback(self._retries.discard)
        retry.add_done_callback(lambda t: chain_reply(t, done))

    async def _forward(
        self, client: Connection, target: str, frame: Frame, ids: list[str]
    ) -> Reply | None:
        error: Exception | None = None
        for _ in range(2):
            # Every request is idempotent (the ids are the client's), so a request whose
            # channel failed is retried once over a fresh peering (the peer restarted).
            try:
                link = await self.peers.link(target)
            except PeeringError as e:
                return self._unreachable(target, error, e)
            router, pipes = (
                self._reply_router(client, frame.request_id)
                if frame.type == proto.GET
                else (None, [])
            )
            try:
                reply = await link.request(
                    frame.type,
                    {'ids': ids, 'endpoint': link.uuid},
                    frame.payloads,
                    timeout=PEER_TIMEOUT,
                    reply_router=router,
                )
            except RemoteError as e:
                return error_reply(e.code, f'peer endpoint {target}: {e}')
            except (WireError, OSError) as e:
                link.broken = link.broken or str(e)
                if pipes:
                    # The client has the head of a reply that will not complete: its
                    # connection is cut, and its retry learns why (see _unreachable).
                    client.abort()
                    return None
                error = e
                logger.info('channel to %s failed (%s): re-peering once', target, e)
                continue
            self.forwarded += 1
            if pipes:
                if pipes[0].failed is not None:
                    client.abort()
                return None  # the reply went to the client as it arrived
            return reply.type, reply.header, reply.payloads
        return error_reply(
            'peer-failed',
            f'the channel to peer endpoint {self.peers.describe(target)} failed during '
            f'the request: {error}',
        )

    def _unreachable(self, target: str, error: Exception | None, why: PeeringError) -> Reply:
        """The reply to a request for ``target`` when it cannot be peered with.

        ``peer-failed`` if a channel to it failed during this request, or its last link
        failed a moment ago (the request is a client's retry after its connection was
        cut mid-reply, or its own channel died): the peer died, or its link broke, and
        that is what the client needs to hear, not only that it is offline now.
        ``peering`` otherwise.
        """
        lost = str(error) if error is not None else self.peers.lost_recently(target)
        if lost is None:
            return error_reply('peering', str(why))
        return error_reply(
            'peer-failed',
            f'the channel to peer endpoint {self.peers.describe(target)} failed ({lost}), '
            f'and it cannot be reached again: {why}',
        )

    def _handle_peer(self, conn: Connection, frame: Frame) -> Reply | RawReply | None:
        if frame.type == proto.WARM_UP:
            # As many bytes back as came in (never more: no amplification), bounded.
            size = sum(len(p) for p in frame.payloads)
            if size > proto.WARM_UP_MAX:
                return error_reply('bad-request', f'a warm-up carries at most {proto.WARM_UP_MAX}')
            return proto.OK, {'size': size}, (zeros(size),)
        if frame.type not in proto.OBJECT_TYPES:
            return error_reply('bad-request', f'peers may not send message type {frame.type}')
        try:
            request = messages.decode_object(frame.header)
        except ProtocolError as e:
            return error_reply('bad-request', str(e))
        if request.endpoint != self.uuid:
            return error_reply('bad-request', f'this is endpoint {self.uuid}, no forwarding')
        self.requests += 1
        return self._local(frame, request.ids)

    # Lifecycle -------------------------------------------------------------------------

    async def start(self) -> None:
        """Listen for clients and peers, register with the relay, detect the NAT.

        Raises:
            EndpointError: the relay refused this endpoint.
        """
        await self.clients.start()
        await self.peer_server.start()
        self._expire()
        self.metrics.open()
        if self.relay is not None:
            await self.relay.start()
            if self.relay.info is not None:
                with contextlib.suppress(Exception):
                    await self.peers.detect_nat()
        host, port = self.clients.address
        self._serving = True
        self._write_state()
        (self.folder / 'endpoint.pid').write_text(f'{os.getpid()}\n')
        logger.info(
            'endpoint %s (%s) serving clients on %s:%d, peers on port %d, NAT %s',
            self.config.name,
            self.uuid,
            host,
            port,
            self.peer_server.address[1],
            self.peers.nat.get('nat'),
        )

    def _write_state(self) -> None:
        """Publish ``state.json``: where clients reach this endpoint, and its relay's state."""
        host, port = self.clients.address
        write_state(
            self.folder,
            {
                'pid': os.getpid(),
                'host': '127.0.0.1' if host in ('0.0.0.0', '::', '') else host,
                'port': port,
                'socket': self.clients.unix_address,
                'peer_port': self.peer_server.address[1],
                'uuid': self.uuid,
                'name': self.config.name,
                'health': self.health(),
                'relay': self.relay_state(),
            },
        )

    def _relay_changed(self) -> None:
        """The relay link registered, or lost or failed its registration: say so."""
        if not self._serving:
            return  # start() writes the state once it serves
        try:
            self._write_state()
        except OSError as e:
            logger.warning('endpoint %s: cannot write its state: %s', self.config.name, e)

    def _expire(self) -> None:
        """Fail over the requests whose peer has not answered in time; again later."""
        delay = expire(self.in_flight)
        self._expiry = asyncio.get_running_loop().call_later(delay, self._expire)

    async def close(self) -> None:
        """Stop serving and drop every connection."""
        self._serving = False
        if self._expiry is not None:
            self._expiry.cancel()
        self.peers.close()
        for own in list(self.own):
            own.close()
        if self.relay is not None:
            await self.relay.close()
        await self.peer_server.close()
        await self.clients.close()
        self.metrics.close()
        for name in ('state.json', 'endpoint.pid'):
            with contextlib.suppress(FileNotFoundError):
                (self.folder / name).unlink()
        if self._spill_tmp is not None:
            self.table.clear()
