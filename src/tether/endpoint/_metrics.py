"""An endpoint's Prometheus metrics (see :mod:`tether._serve.metrics`).

Requests its clients send are counted by operation when they reach the endpoint's
handler, with the bytes they carry; the latency histogram covers the requests answered
at once from the endpoint's own objects. Requests passed on to a peer (the endpoint's
fast paths and forwarding) are counted in aggregate from the endpoint's own counters.
Peers are counted by the path each uses, and the bytes carried per path (hop kind).
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from tether._serve import codes as proto
from tether._serve.metrics import Served, ServerMetrics, payload_bytes

if TYPE_CHECKING:
    from tether.endpoint._server import Endpoint

__all__ = ['EndpointMetrics']

_OPS = {**proto.OP_NAMES, proto.PEERS: 'peers', proto.CHANNEL: 'channel'}


def _piped(ep: Endpoint) -> dict[tuple[str, ...], float]:
    return {(f'piped_{op}',): n for op, n in ep.piped.items()}


def _by_path(ep: Endpoint, field: str | None) -> dict[tuple[str, ...], float]:
    out: Counter[str] = Counter()
    for info in ep.peers.info():
        path = str(info.get('path') or 'none')
        out[path] += 1 if field is None else int(info.get(field) or 0)
    return {(path,): n for path, n in out.items()}


class EndpointMetrics(Served):
    """An endpoint's metrics and their HTTP endpoint (both ``None`` when off)."""

    def __init__(self, ep: Endpoint) -> None:
        options = ep.config.metrics
        super().__init__(_server_metrics(ep) if options.enabled else None, options)

    def observed_sync(self, handler: Callable[..., Any]) -> Callable[..., Any]:
        """A synchronous ``handler`` (which may answer later) recording each client
        request (``handler`` itself when metrics are off)."""
        m = self.metrics
        if m is None:
            return handler

        def handle(conn: Any, frame: Any) -> Any:
            start = time.perf_counter()
            reply = handler(conn, frame)
            op = _OPS.get(frame.type, 'other')
            if isinstance(reply, tuple | bytearray):  # answered at once
                seconds = time.perf_counter() - start
                error = isinstance(reply, tuple) and reply[0] != proto.OK
                out = len(reply) if isinstance(reply, bytearray) else payload_bytes(reply[2])
                m.observe(op, seconds, payload_bytes(frame.payloads), out, error=error)
            else:  # passed on or answered later: counted, not timed
                m.count(op, payload_bytes(frame.payloads))
            return reply

        return handle


def _server_metrics(ep: Endpoint) -> ServerMetrics:
    m = ServerMetrics('endpoint', ep.config.name, _OPS.values())
    m.gauge('tether_objects', 'Objects held (in memory and on disk)', lambda: len(ep.table))
    m.gauge(
        'tether_objects_bytes',
        'Bytes of objects held, by place',
        lambda: {('memory',): ep.table.memory_used, ('disk',): ep.table.disk_used},
        ('place',),
    )
    m.gauge(
        'tether_memory_limit_bytes', 'Memory budget for objects', lambda: ep.table.memory_limit
    )
    m.gauge(
        'tether_inflight_bytes', 'Bytes of requests being received', lambda: ep.memory.inflight
    )
    m.gauge('tether_clients', 'Connected clients', lambda: len(ep.clients.connections))
    m.gauge(
        'tether_endpoint_passed_on',
        'Client requests passed on to a peer, by how',
        lambda: {('forwarded',): ep.forwarded, ('fast',): ep.passed, **_piped(ep)},
        ('how',),
        counter=True,
    )
    m.gauge('tether_peers', 'Peer links, by path', lambda: _by_path(ep, None), ('path',))
    m.gauge(
        'tether_peer_bytes',
        'Bytes carried over peer links, by path',
        lambda: _by_path(ep, 'bytes'),
        ('path',),
        counter=True,
    )
    m.gauge(
        'tether_peer_requests',
        'Requests carried over peer links, by path',
        lambda: _by_path(ep, 'requests'),
        ('path',),
        counter=True,
    )
    m.gauge(
        'tether_own_channels',
        'Client connections on a peer channel of their own',
        lambda: len(ep.own),
    )
    m.gauge(
        'tether_pending_requests', 'Requests in flight on peer channels', lambda: len(ep.in_flight)
    )
    return m
