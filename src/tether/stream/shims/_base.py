"""What the broker shims share: the closed state, the repr, the broker's host and port, the
read deadline, the close."""

from __future__ import annotations

import operator
import time
from collections.abc import Callable
from typing import Any, ClassVar

from tether._serve.loop import LoopThread
from tether.exceptions import StreamError, StreamTimeoutError


class Shim:
    """Base of a shim's publisher or subscriber.

    A subclass names in ``_shown`` the attributes its ``repr`` lists (or overrides
    :meth:`_where`). :meth:`close` calls :meth:`_release` once, which closes ``_client``
    unless a subclass releases its connection otherwise.
    """

    _shown: ClassVar[tuple[str, ...]] = ()
    _closed = False
    _client: Any

    def _where(self) -> str:
        return ', '.join(repr(getattr(self, name)) for name in self._shown)

    def __repr__(self) -> str:
        return f'{type(self).__name__}({self._where()})'

    def _check_open(self) -> None:
        if self._closed:
            raise StreamError(f'{self!r} is closed')

    def _release(self) -> None:
        self._client.close()

    def close(self) -> None:
        """Close the connection."""
        if not self._closed:
            self._closed = True
            self._release()


class AtHost(Shim):
    """A shim of a broker at one ``hostname`` and ``port``: its ``repr`` lists them, and its
    errors name the broker by :attr:`_at`."""

    _shown = ('hostname', 'port')

    def __init__(self, hostname: str, port: int) -> None:
        self.hostname = hostname
        self.port = port

    @property
    def _at(self) -> str:
        """``hostname:port``."""
        return f'{self.hostname}:{self.port}'


class OneTopic:
    """A subscriber of one ``topic``, which :meth:`accepts_topic` compares by ``_matches``
    (equality, or the broker's wildcard rule where ``topic`` is a pattern)."""

    topic: str
    _matches: Callable[[str, str], bool] = staticmethod(operator.eq)

    def accepts_topic(self, topic: str) -> bool:
        """Whether ``topic`` is the one this subscriber reads (or one its pattern matches)."""
        return self._matches(self.topic, topic)


class Deadline:
    """The waits of one read: slices of at most ``poll`` seconds until ``timeout`` passes."""

    __slots__ = ('_at', '_poll', '_timeout', '_what')

    def __init__(self, timeout: float | None, poll: float, what: str) -> None:
        self._at = None if timeout is None else time.monotonic() + timeout
        self._poll = poll
        self._timeout = timeout
        self._what = what

    def left(self) -> float:
        """The next wait, or :class:`~tether.exceptions.StreamTimeoutError` (naming ``what``,
        the topic read) once the read's ``timeout`` (``None``: none) has passed."""
        if self._at is None:
            return self._poll
        left = min(self._at - time.monotonic(), self._poll)
        if left <= 0:
            raise StreamTimeoutError(f'no message on {self._what} within {self._timeout} s')
        return left


def close_on_loop(loop: LoopThread, connection: Any, run: Callable[..., Any]) -> None:
    """Close an asyncio client's ``connection`` through ``run`` (5 s at most), then ``loop``."""
    try:
        if not connection.is_closed:
            run(connection.close(), 'closing', timeout=5.0)
    except StreamError:
        pass
    finally:
        loop.stop()
