"""The relay: signalling for peering, NAT discovery, and the relayed data path."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import itertools
import logging
import os
import time
from typing import Any

from tether._serve import signalling as proto
from tether._serve.lifecycle import Lifecycle
from tether._serve.tls import server_context
from tether._wire import (
    Connection,
    Frame,
    Limits,
    MemoryBudget,
    Reply,
    Server,
    error_reply,
)
from tether.exceptions import ProtocolError
from tether.relay._config import RelayConfig, load_owners, save_owners
from tether.relay._metrics import OPS, relay_metrics
from tether.relay._tunnel import Probe, Ticket, TunnelSide

__all__ = ['RelayCounts', 'RelayServer']

logger = logging.getLogger(__name__)

_ANSWER_TIMEOUT = 20.0

# Every refused REGISTER gets this same reply, whatever the reason (an unknown token, or
# a UUID another user registered first): it says nothing about any endpoint.
_REFUSED = error_reply(
    'auth',
    'the relay refused this token for this endpoint (an unknown token, or an endpoint UUID '
    'first registered by another user)',
)


@dataclasses.dataclass
class _Registered:
    user: str
    uuid: str
    name: str
    conn: Connection
    observed: str


@dataclasses.dataclass
class _Usage:
    tunnels: int = 0
    forwarded: int = 0


@dataclasses.dataclass(frozen=True)
class RelayCounts:
    """A snapshot of what a relay holds (:meth:`RelayServer.counts`)."""

    endpoints: int
    users: int
    waiting_tunnels: int
    open_sides: int
    forwarded_bytes: int


class RelayServer(Lifecycle):
    """The relay: endpoints register with a token, find each other and peer through it.

    Each user sees and reaches only their own endpoints. The relay forwards signalling
    messages (a few KB per peering), answers NAT discovery probes, and splices relayed
    channels whose content is end-to-end encrypted between the two endpoints.

    Args:
        config: What ``relay.toml`` says.
    """

    def __init__(self, config: RelayConfig) -> None:
        self.config = config
        ssl = None
        if not config.insecure:
            assert config.tls_cert
            assert config.tls_key
            ssl = server_context(config.tls_cert, config.tls_key)
        # Endpoints authenticate with a token in REGISTER, after the wire handshake: until
        # then a connection may send only small frames, and must register in time. The
        # claims of registered endpoints' messages count against one memory budget.
        self.memory = MemoryBudget(config.memory_budget, name='tether relay')
        self.metrics = relay_metrics(self)
        self.server = Server(
            self.metrics.observed(self._handle, OPS),
            host=config.host,
            port=config.port,
            ssl=ssl,
            limits=Limits(
                max_header=config.max_message,
                max_payloads=16,
                max_frame=config.max_message,
                handshake_timeout=config.handshake_timeout,
            ),
            name='tether relay',
            memory=self.memory,
            handler_auth=True,
        )
        self._endpoints: dict[str, _Registered] = {}
        # Who first registered each endpoint UUID: it stays theirs (kept in owners_file).
        self._owners = load_owners(config.owners_file)
        self._by_conn: dict[Connection, _Registered] = {}
        self._usage: dict[str, _Usage] = {}
        self._tickets: dict[str, Ticket] = {}
        self._pending: dict[int, tuple[Connection, asyncio.Future[proto.Answer]]] = {}
        self._ids = itertools.count(1 << 32)
        self._tasks: set[asyncio.Task[None]] = set()
        self._sides: set[TunnelSide] = set()
        self.early_bytes = 0
        self.early_peak = 0
        self.early_refused = 0
        self._udp: list[asyncio.DatagramTransport] = []
        self._data: asyncio.Server | None = None
        self._stop: asyncio.Event | None = None
        self.started = time.time()

    # Addresses -------------------------------------------------------------------------

    @property
    def address(self) -> tuple[str, int]:
        """``(host, port)`` of the control channel."""
        return self.server.address

    @property
    def data_port(self) -> int:
        """The bound data port."""
        assert self._data is not None
        return int(self._data.sockets[0].getsockname()[1])

    @property
    def udp_ports(self) -> list[int]:
        """The two bound UDP ports."""
        return [int(t.get_extra_info('sockname')[1]) for t in self._udp]

    # Lifecycle -------------------------------------------------------------------------

    async def start(self) -> None:
        """Bind every port."""
        loop = asyncio.get_running_loop()
        await self.server.start()
        self.metrics.open()
        self._data = await loop.create_server(
            lambda: TunnelSide(self), self.config.host, self.config.data_port
        )
        first = self.config.udp_port
        for port in (first, first + 1 if first else 0):
            transport, _ = await loop.create_datagram_endpoint(
                Probe, local_addr=(self.config.host, port)
            )
            self._udp.append(transport)
        logger.info(
            'relay listening on %s:%d (data %d, udp %s)',
            *self.address,
            self.data_port,
            self.udp_ports,
        )

    async def close(self) -> None:
        """Close every port and connection."""
        for task in list(self._tasks):
            task.cancel()
        await self.server.close()
        self.metrics.close()
        for side in list(self._sides):
            side.close()
        if self._data is not None:
            self._data.close()
        for transport in self._udp:
            transport.close()

    def counts(self) -> RelayCounts:
        """What the relay holds now, counted from copies of its tables (safe to call from
        another thread, as a metrics scrape does)."""
        registered = list(self._endpoints.values())
        return RelayCounts(
            endpoints=len(registered),
            users=len({r.user for r in registered}),
            waiting_tunnels=len(self._tickets),
            open_sides=len(self._sides),
            forwarded_bytes=sum(u.forwarded for u in list(self._usage.values())),
        )

    def status(self) -> dict[str, Any]:
        """Registered endpoints per user and usage counters."""
        self._sweep()
        users: dict[str, Any] = {}
        for reg in self._endpoints.values():
            users.setdefault(reg.user, {'endpoints': []})['endpoints'].append(reg.uuid)
        for user, usage in self._usage.items():
            users.setdefault(user, {'endpoints': []}).update(dataclasses.asdict(usage))
        return {
            'pid': os.getpid(),
            'users': users,
            'refused': self.server.refused,
            'login_timeouts': self.server.login_timeouts,
            'tunnels': {
                'tickets': len(self._tickets),
                'sides': len(self._sides),
                'early_bytes': self.early_bytes,
                'early_peak': self.early_peak,
                'early_refused': self.early_refused,
            },
            'metrics': self.metrics.address(),
            'memory': {
                'budget': self.memory.limit,
                'reserved': self.memory.reserved,
                'peak': self.memory.peak,
                'refused': self.memory.refused,
            },
        }

    # Bookkeeping -----------------------------------------------------------------------

    def _sweep(self) -> None:
        for uuid, reg in list(self._endpoints.items()):
            if reg.conn.transport.is_closing():
                del self._endpoints[uuid]
                self._by_conn.pop(reg.conn, None)
        now = time.monotonic()
        for ticket, info in list(self._tickets.items()):
            if info.expires < now:
                # Never paired (a paired ticket is removed at once): free its slot.
                del self._tickets[ticket]
                self._tunnel_closed(info.user)

    def _find(self, user: str, target: object) -> _Registered | None:
        """The online endpoint of ``user`` with this UUID or name (others do not exist)."""
        self._sweep()
        if not isinstance(target, str):
            return None
        reg = self._endpoints.get(target)
        if reg is not None and reg.user == user:
            return reg
        for reg in self._endpoints.values():
            if reg.user == user and reg.name == target:
                return reg
        return None

    def _count(self, user: str, nbytes: int) -> bool:
        usage = self._usage.setdefault(user, _Usage())
        usage.forwarded += nbytes
        if usage.forwarded > self.config.max_forwarded_bytes_per_user:
            logger.warning('relay: user %r exceeded the forwarded-bytes limit', user)
            return False
        return True

    def _early_held(self, nbytes: int) -> None:
        self.early_bytes += nbytes
        self.early_peak = max(self.early_peak, self.early_bytes)

    def _tunnel_closed(self, user: str) -> None:
        usage = self._usage.setdefault(user, _Usage())
        usage.tunnels = max(0, usage.tunnels - 1)

    def _pair(self, side: TunnelSide, ticket: str) -> None:
        info = self._tickets.get(ticket)
        if info is None or info.expires < time.monotonic():
            logger.info('relay: unknown or expired tunnel ticket')
            assert side.transport is not None
            side.transport.abort()
            return
        side.ticket = info
        side.ticket_id = ticket
        if info.waiting is None:
            info.waiting = side
            return
        other = info.waiting
        info.waiting = None
        del self._tickets[ticket]
        other.link(side)
        side.link(other)
        other.flush()
        side.flush()

    def _spawn(self, coro: Any) -> None:
        task = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    # Requests --------------------------------------------------------------------------

    async def _handle(self, conn: Connection, frame: Frame) -> Reply | None:
        try:
            message = proto.decode(frame.type, frame.header)
        except ProtocolError as e:
            if frame.type == proto.REGISTER or self._registered(conn) is not None:
                return error_reply('bad-request', str(e))
            return error_reply('auth', 'register with a relay token first')
        if type(message) is proto.Register:
            return self._register(conn, message)
        reg = self._registered(conn)
        if reg is None:
            return error_reply('auth', 'register with a relay token first')
        if type(message) is proto.ListEndpoints:
            self._sweep()
            mine = [
                {'uuid': r.uuid, 'name': r.name}
                for r in self._endpoints.values()
                if r.user == reg.user
            ]
            return proto.OK, {'endpoints': sorted(mine, key=lambda e: e['name'])}, ()
        if type(message) is proto.Answer:
            pending = self._pending.get(frame.request_id)
            if pending is not None and pending[0] is conn and not pending[1].done():
                pending[1].set_result(message)
            return None
        if type(message) is proto.Connect:
            self._spawn(self._connect(conn, reg, frame.request_id, message))
            return None
        if type(message) is proto.Tunnel:
            return await self._tunnel(reg, message)
        return error_reply('bad-request', f'unknown message type {frame.type}')

    def _registered(self, conn: Connection) -> _Registered | None:
        reg = self._by_conn.get(conn)
        return reg if reg is not None and self._endpoints.get(reg.uuid) is reg else None

    def _register(self, conn: Connection, message: proto.Register) -> Reply:
        user = self.config.user_of(message.token)
        if user is None:
            logger.info('relay: refused a token from %s', conn.peer)
            return _REFUSED
        uuid, name = message.uuid, message.name
        owner = self._owners.get(uuid)
        if owner is not None and owner != user:
            # The same reply as a wrong token: nothing says that this UUID exists.
            logger.warning(
                'relay: refused %s registering endpoint %s of another user, from %s',
                user,
                uuid,
                conn.peer,
            )
            return _REFUSED
        self._sweep()
        count = sum(1 for r in self._endpoints.values() if r.user == user and r.uuid != uuid)
        if count >= self.config.max_endpoints_per_user:
            return error_reply(
                'limit', f'user {user!r} already has {count} endpoints registered (the limit)'
            )
        if owner is None:
            refused = self._claim(user, uuid)
            if refused is not None:
                return refused
        old = self._endpoints.get(uuid)
        if old is not None and old.conn is not conn:
            old.conn.abort()
            self._by_conn.pop(old.conn, None)
        host = conn.peer.rpartition(':')[0]
        reg = _Registered(user, uuid, name, conn, host)
        self._endpoints[uuid] = reg
        self._by_conn[conn] = reg
        self.server.authenticate(conn)
        logger.info('relay: %s registered endpoint %s (%s) from %s', user, name, uuid, conn.peer)
        return (*proto.encode(proto.Registered(user, host, self.udp_ports, self.data_port)), ())

    def _claim(self, user: str, uuid: str) -> Reply | None:
        """Make ``uuid`` ``user``'s for good (kept in ``owners_file``); an error to reply."""
        owned = sum(1 for u in self._owners.values() if u == user)
        if owned >= self.config.max_uuids_per_user:
            return error_reply(
                'limit',
                f'user {user!r} owns {owned} endpoint UUIDs at this relay (the limit): '
                'reuse an endpoint rather than configure new ones, or ask the relay '
                'operator to raise max_uuids_per_user',
            )
        self._owners[uuid] = user
        path = self.config.owners_file
        if path is not None:
            try:
                save_owners(path, self._owners)
            except OSError as e:
                del self._owners[uuid]
                logger.error('relay: cannot record endpoint owners in %s: %s', path, e)
                return error_reply(
                    'unavailable', 'the relay cannot record this endpoint now: retry later'
                )
        logger.info("relay: endpoint %s is now %s's", uuid, user)
        return None

    async def _connect(
        self, conn: Connection, reg: _Registered, rid: int, message: proto.Connect
    ) -> None:
        target = self._find(reg.user, message.target)
        reply: Reply
        if target is None:
            reply = error_reply(
                'not-found', f'no endpoint {message.target!r} of yours is online at the relay'
            )
        elif target.uuid == reg.uuid:
            reply = error_reply('bad-request', 'an endpoint cannot peer with itself')
        else:
            push_id = next(self._ids)
            fut: asyncio.Future[proto.Answer] = asyncio.get_running_loop().create_future()
            self._pending[push_id] = (target.conn, fut)
            try:
                offer = proto.Offer(reg.uuid, reg.name, message.offer)
                await target.conn.send(*proto.encode(offer), request_id=push_id)
                answer = await asyncio.wait_for(fut, _ANSWER_TIMEOUT)
            except Exception as e:  # any failure means the target did not answer
                reply = error_reply('unreachable', f'endpoint {target.name} did not answer: {e!r}')
            else:
                reply = (*proto.encode(proto.Connected(target.uuid, target.name, answer)), ())
            finally:
                self._pending.pop(push_id, None)
        with contextlib.suppress(Exception):
            await conn.send(reply[0], reply[1], reply[2], request_id=rid)

    async def _tunnel(self, reg: _Registered, message: proto.Tunnel) -> Reply:
        target = self._find(reg.user, message.target)
        if target is None:
            return error_reply('not-found', f'no endpoint {message.target!r} of yours is online')
        usage = self._usage.setdefault(reg.user, _Usage())
        if usage.tunnels >= self.config.max_tunnels_per_user:
            return error_reply('limit', f'user {reg.user!r} has too many relayed channels open')
        if usage.forwarded > self.config.max_forwarded_bytes_per_user:
            return error_reply('limit', f'user {reg.user!r} used up the relayed-bytes limit')
        ticket = os.urandom(proto.TICKET_BYTES).hex()
        self._tickets[ticket] = Ticket(reg.user, time.monotonic() + self.config.tunnel_timeout)
        usage.tunnels += 1
        try:
            await target.conn.send(
                *proto.encode(proto.TunnelOpen(reg.uuid, message.session, ticket))
            )
        except Exception as e:
            return error_reply('unreachable', f'endpoint {target.name} is unreachable: {e!r}')
        return (*proto.encode(proto.Ticket(ticket)), ())
