"""An endpoint's Prometheus metrics (see :mod:`tether._serve.metrics`).

Requests its clients send are counted by operation when they reach the endpoint's
handler, with the bytes they carry; the latency histogram covers the requests answered
at once from the endpoint's own objects. Requests passed on to a peer (the endpoint's
fast paths and forwarding) are counted in aggregate from the endpoint's own counters.
Peers are counted by the path each uses, and the bytes carried per path (hop kind).

The handler's requests are recorded in a :class:`~tether._serve.metrics.Tally` of plain
numbers, written only from the endpoint's event loop, without a lock or a call per
request: a few attribute updates and two clock reads, about 4,000 CPU instructions per
request against 11,300 for the wrapper it replaced (which called
:meth:`ServerMetrics.observe`); a 1 KB put + get + evict costs the endpoint about
271,000 and its client 340,000 (``benchmarks/bench_metrics_overhead_callgrind.py``).
With metrics off the handler is not wrapped at all.
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
        request (``handler`` itself when metrics are off).

        The wrapper must be called from one thread only (the endpoint's event loop).
        """
        m = self.metrics
        if m is None:
            return handler
        tally = m.tally(_OPS)
        row_of = tally.by_type.get
        other = tally.other
        perf = time.perf_counter
        bucket = tally.bucket
        first = tally.FIRST
        ok = proto.OK

        def handle(conn: Any, frame: Any) -> Any:
            start = perf()
            reply = handler(conn, frame)
            row = row_of(frame.type, other)
            payloads = frame.payloads
            if payloads:
                p = payloads[0]
                if type(p) is bytearray and len(payloads) == 1:  # a put's one buffer
                    row.bytes_in += len(p)
                else:
                    row.bytes_in += payload_bytes(payloads)
            kind = type(reply)
            if kind is bytearray:  # answered at once, as one encoded frame
                seconds = perf() - start
                row.bytes_out += len(reply)
            elif kind is tuple:  # answered at once
                seconds = perf() - start
                if reply[0] != ok:
                    row.errors += 1
                if reply[2]:
                    row.bytes_out += payload_bytes(reply[2])
            else:  # passed on or answered later: counted, not timed
                row.untimed += 1
                return reply
            row.seconds += seconds
            if seconds < first:
                row.quick += 1
            else:
                row.buckets[bucket(seconds)] += 1
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
