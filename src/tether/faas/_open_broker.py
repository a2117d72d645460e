"""Open the broker a faas service configuration names (above the broker modules)."""

from __future__ import annotations

from tether.exceptions import ConfigError
from tether.faas._amqp import AmqpBroker
from tether.faas._broker import Broker, MemoryBroker

__all__ = ['open_broker']


async def open_broker(
    url: str,
    queue_expiry_s: float = 7 * 86400,
    expiring_prefix: str = '',
    channel_budget: int = 2000,
) -> Broker:
    """Open the broker a service configuration names (``channel_budget``: consumer
    channels on RabbitMQ's connection, at most)."""
    if url == 'memory://':
        return MemoryBroker()
    if url.startswith(('amqp://', 'amqps://')):
        return await AmqpBroker.connect(url, queue_expiry_s, expiring_prefix, channel_budget)
    raise ConfigError(f'unsupported broker URL {url!r}: use amqp:// or memory://')
