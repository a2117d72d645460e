"""What the service's sessions share: the serialized socket, a queued message's entries,
the tracking of deliveries that carry several tasks, and the batching of deliveries."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Iterable, Sequence
from typing import Any

from tether.exceptions import ProtocolError, WireError
from tether.faas import _frames
from tether.faas._broker import Delivery

__all__ = [
    'MAX_CANCELLED',
    'MAX_TIMEOUT',
    'Batcher',
    'Entry',
    'Socket',
    'Tracker',
    'entries_of',
    'parse',
    'task_ids',
]

logger = logging.getLogger('tether.faas._core')

# The longest time limit a task may have (30 days), and how many cancelled ids the
# service remembers to drop their queued messages.
MAX_TIMEOUT = 30 * 86400
MAX_CANCELLED = 100_000


class Socket:
    """One message-oriented connection (a WebSocket); sends are serialized."""

    def __init__(
        self, send: Callable[[bytes], Awaitable[None]], recv: Callable[[], Awaitable[bytes]]
    ) -> None:
        self._send = send
        self.recv = recv
        self._lock = asyncio.Lock()

    async def send(self, data: bytes) -> None:
        async with self._lock:
            await self._send(data)


Entry = tuple[dict[str, Any], memoryview | bytes]


def entries_of(body: bytes | memoryview, key: str) -> list[Entry]:
    """The ``(header, payload)`` entries of a queued message: ``{key: [headers]}`` with one
    payload each, or (messages queued by an earlier version) one header and payload."""
    frame = _frames.decode(body)
    headers = frame.header.get(key)
    if headers is None and 'task_id' in frame.header:
        return [(frame.header, frame.payloads[0] if frame.payloads else b'')]
    if not isinstance(headers, list) or len(headers) != len(frame.payloads):
        raise ProtocolError(f'a queued message needs one payload per entry of {key!r}')
    for h in headers:
        if not isinstance(h, dict) or 'task_id' not in h:
            raise ProtocolError(f'an entry of {key!r} without a task_id')
    return list(zip(headers, frame.payloads, strict=True))


def parse(
    items: Sequence[Delivery], key: str
) -> tuple[list[tuple[Delivery, list[Entry]]], list[str], list[Any]]:
    """Deliveries' entries (``entries_of``), the task ids of those delivered again, and the
    tags of malformed messages (logged; their caller acknowledges them to drop them)."""
    batches = []
    again: list[str] = []
    stale = []
    for d in items:
        try:
            entries = entries_of(d.body, key)
        except WireError as e:
            logger.warning('dropping a malformed message of a %s queue: %s', key[:-1], e)
            stale.append(d.tag)
            continue
        batches.append((d, entries))
        if d.redelivered:
            again.extend(str(h['task_id']) for h, _ in entries)
    return batches, again, stale


class _Held:
    __slots__ = ('remaining', 'tag')

    def __init__(self, tag: Any, remaining: set[str]) -> None:
        self.tag = tag
        self.remaining = remaining


class Tracker:
    """Broker deliveries that each carry several tasks (or results): a delivery may be
    acknowledged once every id in it is done."""

    def __init__(self) -> None:
        self._by_id: dict[str, list[_Held]] = {}

    def hold(self, tag: Any, ids: Iterable[str]) -> bool:
        """Track a delivery of ``ids``; False if there is nothing to wait for."""
        held = _Held(tag, set(ids))
        for i in held.remaining:
            self._by_id.setdefault(i, []).append(held)
        return bool(held.remaining)

    def done(self, ids: Iterable[str]) -> list[Any]:
        """Mark ``ids`` done; return the tags of the deliveries now complete."""
        tags = []
        for i in ids:
            for held in self._by_id.pop(i, ()):
                held.remaining.discard(i)
                if not held.remaining:
                    tags.append(held.tag)
        return tags

    def __len__(self) -> int:
        return len(self._by_id)


class Batcher:
    """Collects deliveries that arrive together and hands them on as one batch; a failed
    batch calls ``on_error`` (the session ends, and its deliveries return to the queue)."""

    def __init__(
        self,
        flush: Callable[[list[Delivery]], Awaitable[None]],
        on_error: Callable[[Exception], None],
    ) -> None:
        self._flush = flush
        self._on_error = on_error
        self._items: list[Delivery] = []
        self._task: asyncio.Task[None] | None = None

    def add(self, delivery: Delivery) -> None:
        self._items.append(delivery)
        if self._task is None or self._task.done():
            self._task = asyncio.ensure_future(self._run())

    async def _run(self) -> None:
        await asyncio.sleep(0)
        while self._items:
            items, self._items = self._items, []
            try:
                await self._flush(items)
            except Exception as e:
                logger.debug('batch not delivered: %r', e)
                self._on_error(e)
                return


def task_ids(header: dict[str, Any]) -> list[str]:
    """The ``task_ids`` of an ACK frame."""
    ids = header.get('task_ids', [])
    if not isinstance(ids, list) or not all(isinstance(t, str) for t in ids):
        raise ProtocolError('"task_ids" must be a list of task id strings')
    return ids
