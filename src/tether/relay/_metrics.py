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
    m.gauge('tether_relay_endpoints', 'Endpoints registered', lambda: len(relay._endpoints))
    m.gauge(
        'tether_relay_users',
        'Users with an endpoint registered',
        lambda: len({r.user for r in list(relay._endpoints.values())}),
    )
    m.gauge(
        'tether_relay_tunnels',
        'Relayed channels, by state',
        lambda: {('waiting',): len(relay._tickets), ('open_sides',): len(relay._sides)},
        ('state',),
    )
    m.gauge(
        'tether_relay_forwarded_bytes',
        'Bytes forwarded over relayed channels (every user)',
        lambda: sum(u.forwarded for u in list(relay._usage.values())),
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
