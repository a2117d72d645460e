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

# The package's names are the connector contracts: those of tether.connectors.protocols.
from tether.connectors import protocols as _protocols
from tether.connectors.protocols import *  # noqa: F403

__all__ = list(_protocols.__all__)
