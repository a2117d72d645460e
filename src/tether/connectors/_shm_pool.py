"""The shared-memory connector's pooled keys, on the named slot backing (internal).

A large object of a :class:`~tether.connectors.shared_memory.SharedMemoryConnector`
lives in a reusable named segment (:mod:`tether._shm.named`, which has the segment
format, the locking rules and the pool of free segments). This module holds what is the
connector's own: which objects are pooled, how their keys are named, where a namespace's
pool is, and the segment operations the connector calls (looked up here, so that a test
can hold one back).
"""

from __future__ import annotations

from tether._shm.named import (
    WAIT_TIMEOUT,
    begin_write,
    drain,
    is_full,
    lend,
    open_segment,
    read,
    release,
    write,
)
from tether.connectors._util import new_id

__all__ = [
    'MIN_POOLED',
    'POOL_SUFFIX',
    'WAIT_TIMEOUT',
    'begin_write',
    'drain',
    'is_full',
    'key_id',
    'lend',
    'new_name',
    'open_segment',
    'read',
    'release',
    'write',
]

POOL_SUFFIX = '-pool'
"""The pool directory of namespace ``ns`` is ``tether-<ns>-pool`` under ``/dev/shm``."""
MIN_POOLED = 256 << 10
"""Objects from this size live in pooled segments (below it, fresh pages cost little)."""
_MARK = 'p'
"""Pooled keys end in ``-p<32 hex digits>`` (plain keys: ``-<32 hex digits>``)."""


def new_name(prefix: str) -> str:
    """A new pooled key name under ``prefix`` (``tether-<namespace>-``)."""
    return f'{prefix}{_MARK}{new_id()}'


def key_id(name: str) -> bytes | None:
    """The 16-byte id of a pooled key's name (what its segment's header carries), or
    ``None`` if the key is not pooled."""
    tail = name.rpartition('-')[2]
    if len(tail) != 33 or tail[0] != _MARK:
        return None
    try:
        return bytes.fromhex(tail[1:])
    except ValueError:
        return None
