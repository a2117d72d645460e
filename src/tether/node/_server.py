"""The node object server: an asyncio wire server around an :class:`ObjectTable`."""

from __future__ import annotations

import asyncio
import logging
import os
import ssl as _ssl
import tempfile
import time
from pathlib import Path

from tether._serve import codes as proto
from tether._serve import messages
from tether._serve.lifecycle import wait_for_stop
from tether._serve.memory import NodeMemory
from tether._serve.metrics import (
    MetricsEndpoint,
    MetricsOptions,
    ServerMetrics,
    payload_bytes,
    start_endpoint,
)
from tether._serve.objects import BufferPool, ObjectTable
from tether._serve.requests import object_reply
from tether._serve.state import ALL_INTERFACES, NodeState, check_name, remove_state, write_state
from tether._wire import Connection, Frame, Limits, Reply, Server, error_reply
from tether.exceptions import ProtocolError

__all__ = ['NodeServer']

logger = logging.getLogger(__name__)

_OBJECT_TYPES = proto.OBJECT_TYPES
_OP_NAMES = proto.OP_NAMES


class NodeServer:
    """Holds objects in memory for many clients; spills to disk past its budget.

    Args:
        name: Name of the server (one server per name per host).
        bind: Address to listen on.
        port: Port (0: a free one).
        address: Address clients on other hosts use to reach this server (written into
            keys); defaults to ``bind``.
        memory_limit: Bytes of objects kept in memory before spilling; bytes of requests
            still being received count against it too.
        spill_dir: Where spilled objects go: a private subdirectory is made in it (so an
            object id never names a file of yours) and removed when the server stops
            (default: a fresh temporary directory).
        secret: Shared secret clients must prove they know.
        idle_timeout: Stop after this many seconds without clients or requests
            (``None``: never).
        run_dir: If given, write the discovery file ``<run_dir>/<name>.json`` once
            listening and remove it on exit.
        ssl: Server-side TLS context.
        max_frame: Largest request, in bytes.
        frame_timeout: Seconds a partly received request may go without any new byte
            before its connection is dropped (``None``: no limit).
        metrics: Where to serve Prometheus metrics (default: nowhere, and none recorded).

    Raises:
        ValueError: if ``name`` is not a valid node name.
    """

    def __init__(
        self,
        name: str = 'default',
        *,
        bind: str = '127.0.0.1',
        port: int = 0,
        address: str | None = None,
        memory_limit: int = 1 << 30,
        spill_dir: Path | None = None,
        secret: str | bytes | None = None,
        idle_timeout: float | None = None,
        run_dir: Path | None = None,
        ssl: _ssl.SSLContext | None = None,
        max_frame: int = 1 << 36,
        frame_timeout: float | None = 60.0,
        metrics: MetricsOptions | None = None,
    ) -> None:
        check_name(name)
        self.name = name
        self.bind = bind
        self.address = address or bind
        self.idle_timeout = idle_timeout
        self.run_dir = run_dir
        self.tls = ssl is not None
        if spill_dir is not None:
            spill_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
        # Always a private directory, even inside a user-given one: object ids (chosen by
        # clients) then never name a file the server did not create.
        spill = Path(tempfile.mkdtemp(prefix=f'tether-node-{name}-spill-', dir=spill_dir))
        self.pool = BufferPool(min(memory_limit // 4, 1 << 30))
        self.table = ObjectTable(memory_limit, spill, self.pool)
        self.memory = NodeMemory(self.table, self.pool)
        self._secret = secret
        self.server = Server(
            self._handle,
            host=bind,
            port=port,
            secret=secret,
            ssl=ssl,
            limits=Limits(max_frame=max_frame, frame_timeout=frame_timeout),
            name=f'node server {name!r}',
            memory=self.memory,
        )
        self.started = time.time()
        self.requests = 0
        self.peers: set[str] = set()
        self._last = time.monotonic()
        self._stop: asyncio.Event | None = None
        self.metrics_options = metrics or MetricsOptions()
        self.metrics = self._make_metrics() if self.metrics_options.enabled else None
        self.metrics_endpoint: MetricsEndpoint | None = None

    def _make_metrics(self) -> ServerMetrics:
        m = ServerMetrics('node', self.name, _OP_NAMES.values())
        t = self.table
        m.gauge('tether_objects', 'Objects held (in memory and spilled)', lambda: len(t))
        m.gauge(
            'tether_objects_bytes',
            'Bytes of objects held, by place',
            lambda: {('memory',): t.memory_used, ('disk',): t.disk_used},
            ('place',),
        )
        m.gauge('tether_memory_limit_bytes', 'Memory budget for objects', lambda: t.memory_limit)
        m.gauge(
            'tether_inflight_bytes',
            'Bytes of requests being received',
            lambda: self.memory.inflight,
        )
        m.gauge('tether_clients', 'Connected clients', lambda: len(self.server.connections))
        m.gauge('tether_peers', 'Distinct client hosts seen', lambda: len(self.peers))
        m.gauge('tether_spills', 'Objects spilled to disk so far', lambda: t.spills)
        return m

    @property
    def port(self) -> int:
        """The bound port."""
        return self.server.address[1]

    def status(self) -> messages.NodeStatus:
        """Statistics reported by ``tether node status``."""
        t = self.table
        endpoint = self.metrics_endpoint
        return messages.NodeStatus(
            name=self.name,
            pid=os.getpid(),
            address=self.address,
            bind=self.bind,
            all_interfaces=self.bind in ALL_INTERFACES,
            tls=self.tls,
            port=self.port,
            objects=len(t),
            memory_used=t.memory_used,
            memory_limit=t.memory_limit,
            spilled_objects=t.spilled,
            disk_used=t.disk_used,
            spills=t.spills,
            spill_dir=str(t.spill_dir),
            inflight=self.memory.inflight,
            disk_inflight=self.memory.disk_inflight,
            frame_timeouts=self.server.frame_timeouts,
            pool_bytes=self.pool.size,
            pool_hits=self.pool.hits,
            clients=len(self.server.connections),
            refused=self.server.refused,
            requests=self.requests,
            peers=sorted(self.peers),
            metrics=None if endpoint is None else endpoint.address,
            uptime=time.time() - self.started,
        )

    async def _handle(self, conn: Connection, frame: Frame) -> Reply | None:
        if self.metrics is None:
            return await self._handle_request(conn, frame)
        start = time.perf_counter()
        reply = await self._handle_request(conn, frame)
        self.metrics.observe(
            _OP_NAMES.get(frame.type, 'other'),
            time.perf_counter() - start,
            payload_bytes(frame.payloads),
            0 if reply is None else payload_bytes(reply[2]),
            error=reply is not None and reply[0] != proto.OK,
        )
        return reply

    async def _handle_request(self, conn: Connection, frame: Frame) -> Reply | None:
        self.requests += 1
        self._last = time.monotonic()
        self.peers.add(conn.peer.rpartition(':')[0])
        t = frame.type
        try:
            if t in _OBJECT_TYPES:
                ids, _ = messages.decode_object(frame.header)
                return object_reply(self.table, t, ids, frame.payloads)
            messages.decode(t, frame.header)
        except ProtocolError as e:
            return error_reply('bad-request', str(e))
        if t == proto.STATUS:
            return proto.OK, self.status()._asdict(), ()
        if t == proto.SHUTDOWN:
            logger.info('node server %r: shutdown requested by %s', self.name, conn.peer)
            if self._stop is not None:
                asyncio.get_running_loop().call_soon(self._stop.set)
            return proto.OK, None, ()
        return error_reply('bad-request', f'unknown message type {t}')

    async def _watch_idle(self, stop: asyncio.Event) -> None:
        assert self.idle_timeout is not None
        while not stop.is_set():
            await asyncio.sleep(min(self.idle_timeout / 4, 5.0))
            idle = time.monotonic() - self._last
            if not self.server.connections and idle > self.idle_timeout:
                logger.info('node server %r idle for %.0f s: stopping', self.name, idle)
                stop.set()
            elif self.server.connections:
                self._last = time.monotonic()

    async def serve(self, ready: asyncio.Event | None = None) -> None:
        """Serve until :meth:`stop`, a ``SHUTDOWN`` request, a signal, or idleness."""
        self._stop = stop = asyncio.Event()
        try:
            await self.server.start()
        except BaseException:
            self.table.clear()
            raise
        try:
            self.metrics_endpoint = start_endpoint(self.metrics, self.metrics_options)
        except BaseException:
            await self.server.close()
            self.table.clear()
            raise
        if self.run_dir is not None:
            write_state(self.run_dir, self._state())
        logger.info(
            'node server %r listening on %s:%d (address %s, memory %d bytes)',
            self.name,
            *self.server.address,
            self.address,
            self.table.memory_limit,
        )
        if self.bind in ALL_INTERFACES:
            logger.warning(
                'node server %r listens on every interface (%s:%d): any host that can reach '
                'this one may connect (each connection must still prove the shared secret%s)',
                self.name,
                *self.server.address,
                '' if self.tls else '; traffic is not encrypted, see --tls-cert',
            )
        if ready is not None:
            ready.set()
        watcher = asyncio.create_task(self._watch_idle(stop)) if self.idle_timeout else None
        try:
            await wait_for_stop(stop)
        finally:
            if watcher is not None:
                watcher.cancel()
            if self.run_dir is not None:
                remove_state(self.run_dir, self.name, os.getpid())
            await self.server.close()
            if self.metrics_endpoint is not None:
                self.metrics_endpoint.close()
            self.table.clear()

    def stop(self) -> None:
        """Ask :meth:`serve` to return (call from the server's event loop)."""
        if self._stop is not None:
            self._stop.set()

    def _state(self) -> NodeState:
        bind, port = self.server.address
        connect = '127.0.0.1' if bind in {'0.0.0.0', '::', ''} else bind
        secret = self._secret
        return NodeState(
            name=self.name,
            pid=os.getpid(),
            host=connect,
            port=port,
            address=self.address,
            secret=secret.decode() if isinstance(secret, bytes) else secret,
            bind=bind,
            tls=self.tls,
        )
