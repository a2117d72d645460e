"""What every pool of blocking connections shares: the idle list, its lock, closing it.

:class:`~tether._wire.SyncClient` and the agent exchanges' Redis client keep the
connections no thread is using in ``_idle`` under ``_lock``; once closed (``_closed``)
they close the idle ones at once and each borrowed one when it is given back.
"""

from __future__ import annotations

import threading
from typing import Generic, Protocol, TypeVar

__all__ = ['IdlePool']


class _Closable(Protocol):
    def close(self) -> None: ...


_C = TypeVar('_C', bound=_Closable)


class IdlePool(Generic[_C]):
    """The idle connections of a thread-safe pool (a subclass or a dataclass sets the
    three attributes; borrowing and giving back stay in the subclass, inline)."""

    _idle: list[_C]
    _lock: threading.Lock
    _closed: bool

    def close(self) -> None:
        """Close every idle connection (borrowed ones close when given back)."""
        with self._lock:
            self._closed = True
            idle, self._idle = self._idle, []
        for conn in idle:
            conn.close()
