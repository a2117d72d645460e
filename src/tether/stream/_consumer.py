"""StreamConsumer: events from a broker become lazy proxies."""

from __future__ import annotations

import collections
import json
import logging
from collections.abc import Iterator
from types import TracebackType
from typing import Any, Self

from tether.exceptions import EventDecodeError, StreamError
from tether.proxy import Proxy, extract
from tether.store import Store, StoreConfig, get_or_create_store
from tether.stream import events as ev
from tether.stream.plugins import Filter
from tether.stream.protocols import Subscriber

__all__ = ['StreamConsumer']

logger = logging.getLogger(__name__)


class StreamConsumer:
    """Iterates over a stream, yielding a proxy per object (no bulk data read yet).

    Each event names the store that holds its object (by config), so the consumer needs
    no configuration of the data channel: it rebuilds the store on the first event that
    names it (once per process, through the store registry). Iteration stops at the
    end-of-stream event (after ``end_events`` of them when several producers share the
    subscribed topics).

    Args:
        subscriber: The broker shim (see :mod:`tether.stream.shims`).
        filter_: Called with each item's metadata; ``True`` drops the item (its object
            is evicted if its event says ``evict``).
        timeout: Seconds each ``next`` waits for a message before raising
            :class:`~tether.exceptions.StreamTimeoutError` (None: wait forever, still
            raising :class:`~tether.exceptions.StreamBrokerError` if the broker goes).
        end_events: End-of-stream events to see before stopping (one per producer).
    """

    def __init__(
        self,
        subscriber: Subscriber,
        *,
        filter_: Filter | None = None,
        timeout: float | None = None,
        end_events: int = 1,
    ) -> None:
        if end_events < 1:
            raise ValueError(f'end_events must be at least 1, not {end_events}')
        self.subscriber = subscriber
        self.filter_ = filter_
        self.timeout = timeout
        self.end_events = end_events
        self._ends = 0
        self._pending: collections.deque[ev.Event] = collections.deque()
        self._configs: dict[str, StoreConfig] = {}
        self._closed = False

    def __repr__(self) -> str:
        return f'StreamConsumer({self.subscriber!r})'

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def close(self, *, close_subscriber: bool = True) -> None:
        """Close the subscriber (durable shims acknowledge what was consumed)."""
        if self._closed:
            return
        self._closed = True
        if close_subscriber:
            self.subscriber.close()

    @property
    def ended(self) -> bool:
        """Whether the end of the stream was reached."""
        return self._ends >= self.end_events

    # Events ----------------------------------------------------------------------------

    def _next_event(self) -> ev.NewObjectEvent | None:
        """Return the next object event that passes the filter, or None at the end."""
        while True:
            if self.ended:
                return None
            if self._closed:
                raise StreamError('the stream consumer is closed')
            if not self._pending:
                message = self.subscriber.next_message(self.timeout)
                self._pending.extend(ev.decode(message))
                continue
            event = self._pending.popleft()
            if isinstance(event, ev.EndOfStreamEvent):
                self._ends += 1
                logger.debug('end of stream on topic %r (%d seen)', event.topic, self._ends)
                continue
            if self.filter_ is not None and self.filter_(event.metadata):
                if event.evict:
                    self.store_of(event).evict(event.key)
                continue
            return event

    def store_of(self, event: ev.NewObjectEvent) -> Store[Any]:
        """Return the store that holds the object of ``event`` (rebuilt from its config)."""
        marker = json.dumps(event.store_config, sort_keys=True)
        config = self._configs.get(marker)
        if config is None:
            try:
                config = StoreConfig.model_validate(event.store_config)
            except Exception as e:
                raise EventDecodeError(f'bad store config in stream event: {e}') from e
            self._configs[marker] = config
        return get_or_create_store(config)

    def _proxy(self, event: ev.NewObjectEvent) -> Proxy[Any]:
        return self.store_of(event).proxy_from_key(event.key, evict=event.evict)

    # Single items ----------------------------------------------------------------------

    def next_with_metadata(self) -> tuple[dict[str, Any], Proxy[Any]]:
        """Return the next item's metadata and proxy.

        Raises:
            StopIteration: at the end of the stream.
        """
        event = self._next_event()
        if event is None:
            raise StopIteration
        return event.metadata, self._proxy(event)

    def next(self) -> Proxy[Any]:
        """Return a proxy of the next item (raises ``StopIteration`` at the end)."""
        return self.next_with_metadata()[1]

    def next_object(self) -> Any:
        """Return the next item itself (read from its store now)."""
        return self.next_object_with_metadata()[1]

    def next_object_with_metadata(self) -> tuple[dict[str, Any], Any]:
        """Return the next item's metadata and the item itself."""
        event = self._next_event()
        if event is None:
            raise StopIteration
        store = self.store_of(event)
        return event.metadata, extract(store.proxy_from_key(event.key, evict=event.evict))

    def next_event(self) -> ev.NewObjectEvent:
        """Return the next object event itself (raises ``StopIteration`` at the end)."""
        event = self._next_event()
        if event is None:
            raise StopIteration
        return event

    # Iteration -------------------------------------------------------------------------

    def __iter__(self) -> Iterator[Proxy[Any]]:
        return self

    def __next__(self) -> Proxy[Any]:
        return self.next()

    def iter_with_metadata(self) -> Iterator[tuple[dict[str, Any], Proxy[Any]]]:
        """Yield ``(metadata, proxy)`` for each item until the end of the stream."""
        while True:
            try:
                yield self.next_with_metadata()
            except StopIteration:
                return

    def iter_objects(self) -> Iterator[Any]:
        """Yield each item itself (resolved) until the end of the stream."""
        for _, obj in self.iter_objects_with_metadata():
            yield obj

    def iter_objects_with_metadata(self) -> Iterator[tuple[dict[str, Any], Any]]:
        """Yield ``(metadata, item)`` for each item until the end of the stream."""
        while True:
            try:
                yield self.next_object_with_metadata()
            except StopIteration:
                return
