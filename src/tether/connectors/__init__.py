"""Connectors: byte-level clients of mediated communication channels.

| connector | module | channel |
|---|---|---|
| :class:`~tether.connectors.local.LocalConnector` | ``tether.connectors.local`` | a dict in this process |
| :class:`~tether.connectors.file.FileConnector` | ``tether.connectors.file`` | a (shared) directory |
| :class:`~tether.connectors.redis.RedisConnector` | ``tether.connectors.redis`` | a Redis server |
| :class:`~tether.connectors.shared_memory.SharedMemoryConnector` | ``tether.connectors.shared_memory`` | POSIX shared memory on one node |

Import each from its module; this package imports none of them (so that ``import tether``
does not pull in redis-py).
"""

from __future__ import annotations

from tether.connectors.protocols import Connector, DeferrableConnector, VectoredConnector

__all__ = ['Connector', 'DeferrableConnector', 'VectoredConnector']
