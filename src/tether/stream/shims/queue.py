"""In-process (and multiprocessing) queues as a stream broker.

One queue per topic, given as a ``{topic: queue}`` mapping; any object with
``put(item, timeout=...)`` and ``get(timeout=...)`` raising :class:`queue.Full` and
:class:`queue.Empty` works (:class:`queue.Queue`, :class:`multiprocessing.Queue`).

Delivery: messages wait in the queue until a subscriber takes them, so nothing is lost
while a consumer is slow or not yet started (within the process, or the processes, that
share the queue). Several subscribers on one queue share its messages (each message goes
to one of them). A queue with ``maxsize`` gives backpressure: ``send_message`` blocks up to
``timeout`` seconds for room, then raises
:class:`~tether.exceptions.StreamBackpressureError`.
"""

from __future__ import annotations

import queue
from collections.abc import Mapping
from typing import Any, Protocol

from tether.exceptions import (
    StreamBackpressureError,
    StreamError,
    StreamTimeoutError,
    UnknownTopicError,
)
from tether.stream.protocols import SubscriberIterator

__all__ = ['QueueLike', 'QueuePublisher', 'QueueSubscriber']


class _PublisherClosed:
    """Put on each queue by ``QueuePublisher.close()``: iterating subscribers stop there."""

    __slots__ = ()

    def __reduce__(self) -> str:
        return '_CLOSED'


_CLOSED = _PublisherClosed()


class QueueLike(Protocol):
    """The part of the queue API the shim uses."""

    def put(self, item: Any, block: bool = ..., timeout: float | None = ...) -> None:
        """Put an item."""

    def get(self, block: bool = ..., timeout: float | None = ...) -> Any:
        """Get an item."""


class QueuePublisher:
    """Puts each message on the queue of its topic.

    Args:
        queues: The queue of each topic.
        timeout: Seconds to wait for room in a full queue before raising.
    """

    def __init__(self, queues: Mapping[str, QueueLike], *, timeout: float = 10.0) -> None:
        self.queues = queues
        self.timeout = timeout
        self._closed = False

    def __repr__(self) -> str:
        return f'{type(self).__name__}(topics={sorted(self.queues)})'

    def send_message(self, topic: str, message: bytes) -> None:
        """Put ``message`` on the queue of ``topic`` (blocks while it is full)."""
        if self._closed:
            raise StreamError(f'{self!r} is closed')
        try:
            q = self.queues[topic]
        except KeyError:
            raise UnknownTopicError(
                f'{self!r} has no queue for topic {topic!r}; add one to its queues',
            ) from None
        try:
            q.put(message, timeout=self.timeout)
        except queue.Full as e:
            raise StreamBackpressureError(
                f'the queue of topic {topic!r} stayed full for {self.timeout} s: the '
                'consumer is slower than the producer (raise maxsize or the timeout)',
            ) from e

    def close(self) -> None:
        """Stop sending, and tell each queue's subscriber so: its iteration ends there,
        as ProxyStore's does (the queues stay usable by others)."""
        if self._closed:
            return
        self._closed = True
        for q in self.queues.values():
            try:
                q.put(_CLOSED, timeout=self.timeout)
            except (queue.Full, ValueError, OSError):  # full, or closed by its owner
                continue


class QueueSubscriber(SubscriberIterator):
    """Takes messages from one queue.

    Args:
        queue: The queue of the topic to read.
        topic: The topic's name (for messages; with signed events, a consumer refuses
            messages signed for any other topic). ``None``: unknown, not checked.
    """

    def __init__(self, queue: QueueLike, topic: str | None = None) -> None:
        self.queue = queue
        self.topic = topic
        self._closed = False
        self._ended = False

    def __repr__(self) -> str:
        return f'{type(self).__name__}({self.topic or "?"!r})'

    def accepts_topic(self, topic: str) -> bool:
        """Whether ``topic`` is the one this subscriber reads (any, if its topic is unknown)."""
        return self.topic is None or topic == self.topic

    def _take(self, timeout: float | None) -> Any:
        if self._closed:
            raise StreamError(f'{self!r} is closed')
        try:
            return self.queue.get(timeout=timeout)
        except queue.Empty as e:
            raise StreamTimeoutError(
                f'no message on topic {self.topic or "?"!r} within {timeout} s'
            ) from e
        except ValueError as e:  # a multiprocessing queue closed by its owner
            self._closed = True
            raise StreamError(f'{self!r}: its queue was closed') from e

    def next_message(self, timeout: float | None = None) -> bytes:
        """Return the next message of the queue (a publisher's close mark is skipped:
        other publishers may share the queue; stream consumers end on end-of-stream)."""
        while True:
            item = self._take(timeout)
            if not isinstance(item, _PublisherClosed):
                return bytes(item)

    def __next__(self) -> bytes:
        # Iterating the subscriber itself (ProxyStore's way) ends where a publisher of
        # the queue closed, or when the queue was closed; and stays ended.
        if self._ended:
            raise StopIteration
        try:
            item = self._take(None)
        except StreamError:
            if self._closed:
                raise StopIteration from None
            raise
        if isinstance(item, _PublisherClosed):
            self._ended = True
            raise StopIteration
        return bytes(item)

    def close(self) -> None:
        """Stop reading."""
        self._closed = True
