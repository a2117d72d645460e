"""Connectors: byte-level clients of mediated communication channels.

* ``tether.connectors.local.LocalConnector``: a dict in this process;
* ``tether.connectors.file.FileConnector``: a (shared) directory;
* ``tether.connectors.redis.RedisConnector``: a Redis server;
* ``tether.connectors.shared_memory.SharedMemoryConnector``: POSIX shared memory on
  one node.

Import each from its module; this package imports none of them (so that ``import tether``
does not pull in redis-py).
"""

from __future__ import annotations

from tether.connectors.protocols import (
    BackgroundWriteConnector,
    Capabilities,
    Connector,
    DecodingConnector,
    DeferrableConnector,
    VectoredBatchConnector,
    VectoredConnector,
    WaitingConnector,
)

__all__ = [
    'BackgroundWriteConnector',
    'Capabilities',
    'Connector',
    'DecodingConnector',
    'DeferrableConnector',
    'VectoredBatchConnector',
    'VectoredConnector',
    'WaitingConnector',
]
