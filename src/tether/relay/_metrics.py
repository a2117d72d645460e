"""The relay's Prometheus metrics (see :mod:`tether._serve.metrics`).

Control requests by kind, with bytes and latency; endpoints registered, users with an
endpoint, tunnels (tickets waiting, sides open), bytes forwarded over relayed channels,
early bytes held and the control memory budget. No label names a user or an endpoint.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from tether._serve import signalling as rp
from tether._serve.metrics import Served, ServerMetrics

if TYPE_CHECKING:
    from collections.abc import Callable

    from tether.relay._server import RelayServer

__all__ = ['OPS', 'relay_metrics']

OPS = {
    rp.REGISTER: 'register',
    rp.LIST: 'list',
    rp.CONNECT: 'connect',
    rp.ANSWER: 'answer',
    rp.TUNNEL: 'tunnel',
}


def relay_metrics(relay: RelayServer) -> Served:
    """The relay's metrics, served if its configuration says so."""
    options = relay.config.metrics
    if not options.enabled:
        return Served(None, options)
    m = ServerMetrics('relay', 'relay', OPS.values())
    m.gauge('tether_relay_endpoints', 'Endpoints registered', lambda: relay.counts().endpoints)
    m.gauge(
        'tether_relay_users',
        'Users with an endpoint registered',
        lambda: relay.counts().users,
    )
    m.gauge(
        'tether_relay_tunnels',
        'Relayed channels, by state',
        _tunnels(relay),
        ('state',),
    )
    m.gauge(
        'tether_relay_forwarded_bytes',
        'Bytes forwarded over relayed channels (every user)',
        lambda: relay.counts().forwarded_bytes,
        counter=True,
    )
    m.gauge('tether_relay_early_bytes', 'Early bytes held', lambda: relay.early_bytes)
    m.gauge(
        'tether_memory_bytes',
        'Control-message memory budget, by kind',
        lambda: {('reserved',): relay.memory.reserved, ('budget',): relay.memory.limit},
        ('kind',),
    )
    m.gauge('tether_clients', 'Control connections', lambda: len(relay.server.connections))
    served = Served(m, options)
    served.ok_type = rp.OK
    return served


def _tunnels(relay: RelayServer) -> Callable[[], dict[tuple[str, ...], float]]:
    def tunnels() -> dict[tuple[str, ...], float]:
        counts = relay.counts()
        return {('waiting',): counts.waiting_tunnels, ('open_sides',): counts.open_sides}

    return tunnels
