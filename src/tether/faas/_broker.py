"""Message queues behind one interface: RabbitMQ (production) and in-process (dev).

The service keeps one task queue per endpoint and one result queue per task group, and
broadcasts its replicas' control messages on a topic (:meth:`Broker.broadcast`). A
consumer receives at most ``prefetch`` unacknowledged messages; when it is closed (its
endpoint or client went away) every message it did not acknowledge goes back to the
queue, flagged ``redelivered``. Both implementations keep these rules; the tests run the
service over both.
"""

from __future__ import annotations

import asyncio
import collections
import dataclasses
import itertools
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, Protocol

__all__ = ['Broker', 'Consumer', 'Delivery', 'MemoryBroker']


@dataclasses.dataclass(slots=True)
class Delivery:
    """One message handed to a consumer."""

    body: bytes
    tag: Any
    redelivered: bool = False


OnMessage = Callable[[Delivery], Awaitable[None] | None]


class Consumer(Protocol):
    """A subscription to one queue."""

    async def ack(self, tags: Sequence[Any]) -> None:
        """Acknowledge deliveries; tags of a previous connection are ignored."""

    async def close(self) -> None:
        """Stop; unacknowledged messages return to the queue."""


class Broker(Protocol):
    """Queues of opaque messages."""

    async def publish(self, queue: str, bodies: Sequence[bytes]) -> None:
        """Append messages to ``queue`` (created if needed) durably, in order."""

    async def consume(self, queue: str, prefetch: int, on_message: OnMessage) -> Consumer:
        """Subscribe to ``queue`` (created if needed)."""

    async def delete(self, queue: str) -> None:
        """Delete a queue and its messages."""

    async def stats(self, queue: str) -> tuple[int, int]:
        """``(messages ready, consumers)`` of ``queue`` (messages delivered but not
        acknowledged are not ready); ``(0, 0)`` for a queue that does not exist."""

    async def broadcast(self, topic: str, body: bytes) -> None:
        """Send ``body`` to every current listener of ``topic`` (not kept for later ones)."""

    async def listen(self, topic: str, on_message: Callable[[bytes], None]) -> Consumer:
        """Hear every broadcast on ``topic`` from now on, until closed."""

    async def close(self) -> None:
        """Close the connection."""


class _MemoryListener:
    def __init__(self, broker: MemoryBroker, topic: str, cb: Callable[[bytes], None]) -> None:
        self.broker = broker
        self.topic = topic
        self.cb = cb

    async def ack(self, tags: Sequence[Any]) -> None:
        pass

    async def close(self) -> None:
        listeners = self.broker._listeners.get(self.topic, [])
        if self in listeners:
            listeners.remove(self)


class _MemoryQueue:
    def __init__(self) -> None:
        self.ready: collections.deque[tuple[int, bytes, bool]] = collections.deque()
        self.consumers: list[_MemoryConsumer] = []
        self.turn = 0


class _MemoryConsumer:
    def __init__(self, broker: MemoryBroker, name: str, prefetch: int, cb: OnMessage) -> None:
        self.broker = broker
        self.name = name
        self.prefetch = prefetch
        self.cb = cb
        self.unacked: dict[int, tuple[bytes, bool]] = {}
        self.closed = False

    async def ack(self, tags: Sequence[Any]) -> None:
        for tag in tags:
            self.unacked.pop(tag, None)
        self.broker._pump(self.name)

    async def close(self) -> None:
        if self.closed:
            return
        self.closed = True
        q = self.broker._queues.get(self.name)
        if q is None:
            return
        q.consumers = [c for c in q.consumers if c is not self]
        for tag in sorted(self.unacked, reverse=True):
            body, _ = self.unacked[tag]
            q.ready.appendleft((tag, body, True))
        self.unacked.clear()
        self.broker._pump(self.name)


class MemoryBroker:
    """In-process queues with the same acknowledgement rules as RabbitMQ.

    For one service process (``tether faas dev``); messages live as long as the process.
    """

    def __init__(self) -> None:
        self._queues: dict[str, _MemoryQueue] = {}
        self._ids = itertools.count(1)
        self._tasks: set[asyncio.Task[None]] = set()
        self._listeners: dict[str, list[_MemoryListener]] = {}

    def _queue(self, name: str) -> _MemoryQueue:
        q = self._queues.get(name)
        if q is None:
            q = self._queues[name] = _MemoryQueue()
        return q

    async def publish(self, queue: str, bodies: Sequence[bytes]) -> None:
        q = self._queue(queue)
        for body in bodies:
            q.ready.append((next(self._ids), bytes(body), False))
        self._pump(queue)

    async def consume(self, queue: str, prefetch: int, on_message: OnMessage) -> Consumer:
        consumer = _MemoryConsumer(self, queue, max(1, prefetch), on_message)
        self._queue(queue).consumers.append(consumer)
        self._pump(queue)
        return consumer

    def _pump(self, name: str) -> None:
        q = self._queues.get(name)
        if q is None:
            return
        while q.ready and q.consumers:
            free = [c for c in q.consumers if len(c.unacked) < c.prefetch]
            if not free:
                return
            consumer = free[q.turn % len(free)]
            q.turn += 1
            tag, body, redelivered = q.ready.popleft()
            consumer.unacked[tag] = (body, redelivered)
            result = consumer.cb(Delivery(body, tag, redelivered))
            if asyncio.iscoroutine(result):
                task = asyncio.ensure_future(result)
                self._tasks.add(task)
                task.add_done_callback(self._tasks.discard)

    async def delete(self, queue: str) -> None:
        q = self._queues.pop(queue, None)
        if q is not None:
            for c in q.consumers:
                c.closed = True

    async def broadcast(self, topic: str, body: bytes) -> None:
        for listener in list(self._listeners.get(topic, ())):
            listener.cb(bytes(body))

    async def listen(self, topic: str, on_message: Callable[[bytes], None]) -> Consumer:
        listener = _MemoryListener(self, topic, on_message)
        self._listeners.setdefault(topic, []).append(listener)
        return listener

    async def close(self) -> None:
        self._queues.clear()
        self._listeners.clear()

    async def stats(self, queue: str) -> tuple[int, int]:
        q = self._queues.get(queue)
        return (len(q.ready), len(q.consumers)) if q else (0, 0)
