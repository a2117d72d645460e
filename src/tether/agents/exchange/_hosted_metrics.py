"""The hosted exchange's Prometheus metrics (see :mod:`tether._serve.metrics`).

Requests by operation (``send``, ``register``, ``listen`` ...) with bytes and latency;
mailboxes by status, messages and bytes queued in mailboxes (their depth, over every
user), connections, and sends that waited for their user's rate. No label names a user
or a mailbox.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from tether._serve.metrics import MetricsOptions, Served, ServerMetrics

if TYPE_CHECKING:
    from tether.agents.exchange._hosted_server import HostedState

__all__ = ['OPS', 'hosted_metrics']

OPS = (
    'discover',
    'listen',
    'register',
    'send',
    'share',
    'status',
    'terminate',
    'unlisten',
    'unshare',
)


def hosted_metrics(state: HostedState, options: MetricsOptions) -> Served:
    """The exchange's metrics (``state.metrics`` is set when on)."""
    if not options.enabled:
        return Served(None, options)
    m = ServerMetrics('hosted-exchange', 'exchange', OPS)
    m.gauge(
        'tether_exchange_mailboxes',
        'Mailboxes, by status',
        lambda: _by_status(state),
        ('status',),
    )
    m.gauge(
        'tether_exchange_queued_messages',
        'Messages waiting in mailboxes',
        lambda: sum(len(b.queue) for b in list(state.boxes.values())),
    )
    m.gauge(
        'tether_exchange_queued_bytes',
        'Bytes waiting in mailboxes',
        lambda: sum(b.queued for b in list(state.boxes.values())),
    )
    m.gauge(
        'tether_exchange_connections',
        'Open connections',
        lambda: sum(state.connections.copy().values()),
    )
    m.gauge(
        'tether_exchange_throttled',
        "Sends that waited for their user's rate limit",
        lambda: state.throttled,
        counter=True,
    )
    state.metrics = m
    return Served(m, options)


def _by_status(state: HostedState) -> dict[tuple[str, ...], float]:
    out: dict[tuple[str, ...], float] = {('active',): 0, ('terminated',): 0}
    for box in list(state.boxes.values()):
        out[(box.status,)] = out.get((box.status,), 0) + 1
    return out
