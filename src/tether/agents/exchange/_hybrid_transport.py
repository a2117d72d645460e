"""The hybrid exchange's transport: one direct server per process, pipelined links to
peers, Redis for discovery and as the fallback (see :mod:`tether.agents.exchange.hybrid`).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import dataclasses
import logging
import os
import re
import ssl
import threading
import time
import uuid
from typing import TYPE_CHECKING, Any

from tether._serve.loop import new_event_loop
from tether._wire import Connection as WireConnection
from tether._wire import Frame, Limits, Server, encode_head, error_reply
from tether.agents.exchange._base import Deliver, Listener
from tether.agents.exchange._link import Link, open_link
from tether.agents.exchange._shm import Arena, MappedReader, Slot, identity
from tether.agents.exchange.redis import _WAKE, _RedisTransport
from tether.agents.message import ACK, AGENT_MESSAGE, Envelope, Message, decode, encode
from tether.exceptions import (
    AgentError,
    AuthenticationError,
    ConnectorError,
    MailboxClosedError,
    MessageRejectedError,
    TetherError,
    UnknownMailboxError,
    WireError,
)

if TYPE_CHECKING:
    from tether.agents.exchange.hybrid import HybridExchange

__all__ = ['HybridTransport']

logger = logging.getLogger(__name__)

_UNPUBLISH = """
if redis.call('GET', KEYS[1]) == ARGV[1] then redis.call('DEL', KEYS[1]) end
return 1
"""
# Keys that a live process keeps alive, and that expire once it is gone: the addresses of
# the mailboxes it serves, refreshed every _REFRESH seconds, and the shared secret when
# it is kept in Redis (KEYS[1], '' otherwise), as long as any process uses it. An address
# is refreshed only while it is this process's (or missing: it expired or Redis lost it).
_ADDR_TTL = 30
_REFRESH = 10.0
_SECRET_TTL = 86400
_KEEP_ALIVE = """
if KEYS[1] ~= '' then
  if not redis.call('SET', KEYS[1], ARGV[3], 'NX', 'EX', ARGV[4]) then
    redis.call('EXPIRE', KEYS[1], ARGV[4])
  end
end
for i = 2, #KEYS do
  local v = redis.call('GET', KEYS[i])
  if not v or v == ARGV[1] then redis.call('SET', KEYS[i], ARGV[1], 'EX', ARGV[2]) end
end
return 1
"""
# How long "no address" is believed: short, because an agent answers what waited in Redis
# (a first ping ...) just before it publishes its address, and senders should switch to
# the direct link soon after; one Redis GET per 50 ms per unreachable mailbox at most.
_NEGATIVE_TTL = 0.05
_SHM_ID = re.compile(r' shm=(\S+)$')
# Acknowledgements of direct messages: at most this long after a message, or after this
# many messages (see HybridTransport._handle).
_ACK_DELAY = 0.01
_ACK_EVERY = 64
# Free shared-memory slots unused this long are closed (checked as often).
_SLOT_IDLE = 10.0


class _Gate:
    """Holds direct deliveries to a mailbox until its Redis listener reached a barrier.

    Messages pushed to Redis before the mailbox was served directly are handed over
    first; those that came directly meanwhile follow, in order.
    """

    def __init__(self, deliver: Deliver) -> None:
        self.deliver = deliver
        self.open = False
        self.held: list[Any] = []
        self.lock = threading.Lock()

    def __call__(self, item: Any) -> None:
        if not self.open:
            with self.lock:
                if not self.open:
                    self.held.append(item)
                    return
        self.deliver(item)

    def release(self) -> None:
        while True:
            with self.lock:
                if not self.held:
                    self.open = True
                    return
                held, self.held = self.held, []
            for item in held:
                self.deliver(item)


def _redis_listeners(name: str) -> Any:
    """A property that is the attribute ``name`` of the listener's Redis listener."""
    return property(
        lambda self: getattr(self.redis_listener, name),
        lambda self, value: setattr(self.redis_listener, name, value),
    )


@dataclasses.dataclass(eq=False, repr=False)
class _HybridListener(Listener):
    transport: HybridTransport
    mailbox_id: str
    redis_listener: Any
    gate: _Gate

    on_lost = _redis_listeners('on_lost')
    on_check = _redis_listeners('on_check')

    def close(self) -> None:
        self.transport.unserve(self.mailbox_id)
        self.redis_listener.close()
        self.gate.release()  # nothing held is dropped (a stopping agent answers it)


class HybridTransport(_RedisTransport):
    exchange: HybridExchange

    def __init__(self, exchange: HybridExchange) -> None:
        # TLS files are checked before any connection is opened.
        self._server_tls = exchange._server_tls()
        self._client_tls = exchange._client_tls()
        super().__init__(exchange)
        try:
            self.secret = exchange._secret(self.redis)
            self._secret_key = exchange._secret_key()
        except BaseException:
            self.redis.close()
            raise
        self._served: dict[str, Deliver] = {}
        self._addresses: dict[str, tuple[str, int] | float] = {}
        self._links: dict[tuple[str, int], Link] = {}
        self._acks: dict[WireConnection, list[Any]] = {}
        self._lock = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._server: Server | None = None
        self._thread: threading.Thread | None = None
        self._advertised = ''
        self._unpublish = self.redis.script(_UNPUBLISH)
        self._keep_alive = self.redis.script(_KEEP_ALIVE)
        self._refresh_lock = threading.Lock()
        self.direct_sends = 0
        self.fallback_sends = 0
        # Large values to processes of this host go through shared-memory slots.
        self._shm = getattr(exchange, 'shm', True) and bool(identity())
        self._arena = Arena() if self._shm and exchange.threshold is not None else None
        self._reader = MappedReader(exchange.max_message)
        self._inline_codec = dataclasses.replace(self.codec, threshold=None)
        self.shm_sends = 0

    # The server ------------------------------------------------------------------------

    def _ensure_server(self) -> None:
        with self._lock:
            if self._server is not None:
                return
            loop = new_event_loop()  # uvloop's when installed
            # The name reaches senders in the handshake: it says who can read our slots.
            shm = f' shm={identity()}' if self._shm else ''
            server = Server(
                self._handle,
                host=self.exchange.host,
                port=0,
                secret=self.secret,
                ssl=self._server_tls,
                limits=Limits(max_frame=self.exchange.max_message),
                name=f'agent exchange {self.exchange.prefix} pid {os.getpid()}{shm}',
                inline=True,
            )
            ready = threading.Event()
            thread = threading.Thread(
                target=self._run_loop,
                args=(loop, server, ready),
                name='tether-agents-hybrid',
                daemon=True,
            )
            thread.start()
            ready.wait(30)
            if self._server_error is not None:
                raise AgentError(f'cannot start the exchange server: {self._server_error}')
            host, port = server.address
            self._advertised = f'{self.exchange.advertise_host or host}:{port}'
            self._loop, self._server, self._thread = loop, server, thread

    _server_error: BaseException | None = None

    def _run_loop(
        self, loop: asyncio.AbstractEventLoop, server: Server, ready: threading.Event
    ) -> None:
        asyncio.set_event_loop(loop)
        try:
            loop.run_until_complete(server.start())
        except BaseException as e:
            self._server_error = e
            ready.set()
            return
        ready.set()
        if self._arena is not None:
            loop.call_later(_SLOT_IDLE, self._trim_slots, loop)
        loop.run_forever()
        loop.run_until_complete(server.close())
        loop.close()

    def _handle(self, conn: WireConnection, frame: Frame) -> Any:
        if frame.type != AGENT_MESSAGE:
            return error_reply('bad-request', f'unknown message type {frame.type}')
        dest = frame.header.get('d')
        deliver = self._served.get(dest) if isinstance(dest, str) else None
        if deliver is None:
            return error_reply('not-here', f'mailbox {dest!r:.80} is not served here')
        payloads = frame.payloads
        refs = frame.header.pop('m', None)
        if refs is not None:
            # Large payloads in the sender's shared memory: decoding copies them out, and
            # the sender reuses the slots once this message is acknowledged (below).
            if not self._shm:
                return error_reply('shm', 'this process does not read shared-memory slots')
            try:
                payloads = self._reader.payloads(refs, payloads)
            except MessageRejectedError as e:
                return error_reply('shm', str(e))
        deliver(decode(Envelope(frame.header, payloads), self.codec))
        del payloads
        # Frames of a connection are handled in order, so one ACK of request id N
        # acknowledges every frame up to N. It is written _ACK_DELAY after the first frame
        # it covers, or once _ACK_EVERY frames wait, or at once for a message that held
        # shared-memory slots (the sender reuses them): one ACK write, and one wake-up of
        # the sender's reader, per many messages instead of per message. A request
        # delivered here and not yet acknowledged when this process dies is sent again
        # through Redis; a restarted agent drops it (its journal says it was accepted).
        pending = self._acks.get(conn)
        if pending is None:
            timer = asyncio.get_running_loop().call_later(_ACK_DELAY, self._send_ack, conn)
            self._acks[conn] = pending = [frame.request_id, 1, timer]
        else:
            pending[0] = frame.request_id
            pending[1] += 1
        if refs is not None or pending[1] >= _ACK_EVERY:
            self._send_ack(conn)
        return None

    def _send_ack(self, conn: WireConnection) -> None:
        pending = self._acks.pop(conn, None)
        if pending is None:
            return
        pending[2].cancel()
        if not conn.transport.is_closing():
            conn.transport.write(encode_head(ACK, None, (), pending[0]))

    def _flush_acks(self) -> None:
        for conn in list(self._acks):
            self._send_ack(conn)

    async def _flush_acks_soon(self) -> None:
        self._flush_acks()

    def _mailbox_restored(self, mailbox_id: str) -> None:
        # Redis lost its data: publish the address again (and the shared secret, if it
        # was kept there, so that processes started from now on can still connect).
        if mailbox_id not in self._served:
            return
        try:
            self._refresh_keys([mailbox_id])
        except AgentError as e:
            logger.warning('could not publish the address of %s again: %s', mailbox_id, e)

    def _refresh(self) -> None:
        # Called by whichever listener thread sees the time first; one pipeline for all.
        if not self._refresh_lock.acquire(blocking=False):
            return
        try:
            if time.monotonic() < self._next_refresh:
                return
            self._next_refresh = time.monotonic() + _REFRESH
            self._refresh_keys(list(self._served))
        except AgentError as e:
            logger.warning('could not refresh the exchange keys of this process: %s', e)
        finally:
            self._refresh_lock.release()

    def _refresh_keys(self, mailbox_ids: list[str]) -> None:
        """Publish these mailboxes' addresses for _ADDR_TTL more seconds (and the secret
        kept in Redis for _SECRET_TTL more): keys of a process that died expire."""
        self._keep_alive(
            keys=[self._secret_key or '', *[self.k('addr', m) for m in mailbox_ids]],
            args=[self._advertised, _ADDR_TTL, self.secret, _SECRET_TTL],
        )

    def unserve(self, mailbox_id: str) -> None:
        try:
            self._unpublish(keys=[self.k('addr', mailbox_id)], args=[self._advertised])
        except Exception:
            logger.debug('could not unpublish %s', mailbox_id, exc_info=True)
        self._served.pop(mailbox_id, None)

    def listen(self, mailbox_id: str, deliver: Deliver) -> Listener:
        redis_listener = self._listen_redis(mailbox_id, deliver)
        self._ensure_server()
        # What waited in the mailbox is handed over before direct messages are taken, so
        # that messages sent before and after the agent came back keep their order.
        redis_listener.drained.wait(self.exchange.timeout)
        # Direct deliveries wait behind a barrier at the tail of the Redis mailbox, so that
        # what was sent through Redis before is handed over first (order is kept).
        gate = _Gate(deliver)
        token = _WAKE + b'barrier:' + uuid.uuid4().hex.encode()
        redis_listener.barriers[token] = gate.release
        # Served first, published second: an address is never visible before it works.
        self._served[mailbox_id] = gate
        # The mailbox is served from here on: a Redis failure now (a restart ...) must
        # not fail the agent, which already took messages. Without the barrier, direct
        # deliveries go at once; a missing address is published by the next refresh.
        try:
            self.redis.execute('RPUSH', self.k('mb', mailbox_id), token)
        except AgentError as e:
            logger.warning('could not queue the barrier of %s: %s', mailbox_id, e)
            if redis_listener.barriers.pop(token, None) is not None:
                gate.release()
        try:
            self.redis.execute(
                'SET', self.k('addr', mailbox_id), self._advertised, 'EX', _ADDR_TTL
            )
            self._next_refresh = time.monotonic() + _REFRESH
        except AgentError as e:
            logger.warning('could not publish the address of %s yet: %s', mailbox_id, e)
            self._next_refresh = time.monotonic()
        return _HybridListener(self, mailbox_id, redis_listener, gate)

    # Sending ---------------------------------------------------------------------------

    def _address(self, dest: str) -> tuple[str, int] | None:
        cached = self._addresses.get(dest)
        if isinstance(cached, tuple):
            return cached
        if isinstance(cached, float) and time.monotonic() < cached:
            return None
        raw = self.redis.execute('GET', self.k('addr', dest))
        if raw is None:
            self._addresses[dest] = time.monotonic() + _NEGATIVE_TTL
            return None
        host, _, port = raw.decode().rpartition(':')
        address = (host, int(port))
        self._addresses[dest] = address
        return address

    def _link_for(self, address: tuple[str, int]) -> Link:
        link = self._links.get(address)
        if link is None or link.broken:
            with self._lock:
                link = self._links.get(address)
                if link is None or link.broken:
                    link = open_link(
                        address[0],
                        address[1],
                        AGENT_MESSAGE,
                        self._reroute,
                        self._link_broken,
                        secret=self.secret,
                        ssl=self._client_tls,
                        server_hostname=self.exchange.tls_server_name,
                        timeout=self.exchange.timeout,
                        client=f'agents pid {os.getpid()}',
                        on_acked=self._slots_done,
                    )
                    # Slots only for a receiver that said (authenticated) it can read them.
                    found = _SHM_ID.search(str(link.peer_info.get('server', '')))
                    link.shm = (
                        self._arena is not None
                        and found is not None
                        and found.group(1) == identity()
                    )
                    self._links[address] = link
        return link

    def _link_broken(self, link: Link) -> None:
        with self._lock:
            for address, known in list(self._links.items()):
                if known is link:
                    del self._links[address]
                    # Mailboxes served there may have moved (a restarted agent).
                    for dest, cached in list(self._addresses.items()):
                        if cached == address:
                            self._addresses.pop(dest, None)

    def _reroute(
        self, dest: str, header: dict[str, Any], payloads: list[Any], why: str, extra: Any
    ) -> None:
        """A direct message that was refused or not acknowledged goes through Redis."""
        logger.debug('direct message to %s rerouted through Redis: %s', dest, why)
        self._addresses.pop(dest, None)
        if extra is not None:
            # Its large values were in shared memory: through Redis they go by the store.
            try:
                header, payloads = encode(extra[0], self.codec)
            except TetherError as e:
                logger.warning('could not reroute a message to %s: %s', dest, e)
                self.answer_undeliverable(extra[0], e)
                return
            finally:
                self._slots_done(extra)
        self._push_envelope(dest, header, payloads)

    def _trim_slots(self, loop: asyncio.AbstractEventLoop) -> None:
        if self._arena is not None and not self._arena.closed:
            self._arena.trim(_SLOT_IDLE)
            loop.call_later(_SLOT_IDLE, self._trim_slots, loop)

    def _slots_done(self, extra: Any) -> None:
        if self._arena is not None:
            self._arena.release(extra[1])

    def _encode_direct(self, msg: Message, link: Link) -> tuple[dict[str, Any], list[Any], Any]:
        """Encode for a direct link: large values in shared-memory slots when it can."""
        arena = self._arena
        threshold = self.exchange.threshold
        if arena is None or not link.shm or threshold is None:
            header, payloads = encode(msg, self.codec)
            return header, payloads, None
        header, payloads = encode(msg, self._inline_codec)
        slots: list[Slot] = []
        refs = []
        for i, payload in enumerate(payloads):
            if memoryview(payload).nbytes > threshold:
                try:
                    slot = arena.write(payload)
                except ConnectorError:  # too much in flight: the store, as without slots
                    arena.release(slots)
                    header, payloads = encode(msg, self.codec)
                    return header, payloads, None
                slots.append(slot)
                refs.append(arena.ref(i, slot))
                payloads[i] = b''
        if not slots:
            return header, payloads, None
        header['m'] = refs
        self.shm_sends += 1
        return header, payloads, (msg, slots)

    def _push_envelope(self, dest: str, header: dict[str, Any], payloads: list[Any]) -> None:
        self.fallback_sends += 1
        data = Envelope(header, payloads).to_bytes()
        try:
            self.push(dest, data)
        except (MailboxClosedError, UnknownMailboxError):
            # The sender already returned: tell it here instead of raising.
            self.answer_dropped(dest, [decode(data, self.codec)])

    def send(self, msg: Message) -> None:
        dest = msg.dest
        deliver = self._served.get(dest)
        if deliver is not None:
            # Same process: no network, but the same copy semantics as a remote send.
            header, payloads = encode(msg, self.codec)
            deliver(decode(Envelope(header, [memoryview(p) for p in payloads]), self.codec))
            return
        address = self._address(dest)
        if address is not None:
            try:
                link = self._link_for(address)
                header, payloads, extra = self._encode_direct(msg, link)
                if link.send(dest, header, payloads, extra):
                    self.direct_sends += 1
                    return
                if extra is not None:
                    self._slots_done(extra)
            except AuthenticationError as e:
                logger.warning(
                    'direct send to %s at %s:%d refused authentication (%s): falling back '
                    'to Redis; check that both sides use the same secret',
                    dest,
                    *address,
                    e,
                )
                self._addresses.pop(dest, None)
            except WireError as e:
                level = logging.WARNING if isinstance(e.__cause__, ssl.SSLError) else logging.DEBUG
                logger.log(level, 'direct send to %s failed (%s): falling back to Redis', dest, e)
                self._addresses.pop(dest, None)
        self.fallback_sends += 1
        self.push(dest, encode(msg, self.codec).to_bytes())

    def close(self) -> None:
        for mailbox_id in list(self._served):
            self.unserve(mailbox_id)
        super().close()
        with self._lock:
            links = list(self._links.values())
            self._links.clear()
        for link in links:
            link.close()
        loop, thread = self._loop, self._thread
        if loop is not None and thread is not None:
            # What was delivered is acknowledged before the connections close, so that
            # senders do not send it again through Redis.
            with contextlib.suppress(RuntimeError, TimeoutError, concurrent.futures.TimeoutError):
                asyncio.run_coroutine_threadsafe(self._flush_acks_soon(), loop).result(5)
            loop.call_soon_threadsafe(loop.stop)
            thread.join(10)
        if self._arena is not None:
            self._arena.close()
        if thread is None or not thread.is_alive():
            self._reader.close()
