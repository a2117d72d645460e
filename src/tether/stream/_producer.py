"""StreamProducer: objects into stores, events into a broker."""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from typing import Any, Generic

from typing_extensions import TypeVar

from tether._closing import ClosingContext
from tether.exceptions import StreamError, TopicClosedError
from tether.serialize import serialize
from tether.store import Store
from tether.stream import events as ev
from tether.stream._event_io import as_publisher, is_event_publisher
from tether.stream.auth import KeySpec, Signer, StreamKey, resolve_key, shim_namespace
from tether.stream.hooks import Aggregator, Filter, Sampler
from tether.stream.protocols import EventPublisher, Publisher

__all__ = ['StreamProducer']

logger = logging.getLogger(__name__)

T = TypeVar('T', default=Any)


class StreamProducer(ClosingContext, Generic[T]):
    """Sends objects to a stream: each object goes to a store, an event to the broker.

    Generic in the type of the objects sent (``StreamProducer[np.ndarray]``), for type
    checkers only.

    ``send(topic, obj)`` (1) puts ``obj`` in the store mapped to ``topic``, (2) makes an
    event with the store's config, the key, the metadata and the evict flag and (3)
    publishes it with ``publisher``. Consumers read the event and get a proxy, so bulk
    data flows from the store straight to whoever resolves the proxy.

    With a stream key (``key=`` or ``$TETHER_STREAM_KEY``, see :mod:`tether.stream.auth`)
    every message is signed, so consumers with the same key can tell it from a forgery.

    Memory is bounded: at most ``batch_size`` items per topic wait in the producer; a
    full batch is stored and published before :meth:`send` returns, and a publisher
    whose broker is full blocks (then raises
    :class:`~tether.exceptions.StreamBackpressureError`) instead of buffering.

    Args:
        publisher: The broker shim (see :mod:`tether.stream.shims`).
        stores: The store of each topic: a ``{topic: Store}`` mapping, or one store for
            every topic. A topic mapped to ``None`` sends its objects inside the events
            (serialized, base64 in the JSON): for small objects, and only to consumers
            that accept them (``accept_inline``, or a stream key).
        default_store: The store of topics missing from ``stores``.
        batch_size: Items per topic gathered before they are stored (one ``put_batch``)
            and published (one broker message).
        filter_: Called with each item's metadata; ``True`` drops the item.
        sampler: Called with each item's metadata (after the filter); ``False`` drops it.
        aggregator: Turns each full batch into one object (sent with the union of the
            batch's metadata).
        key: The stream key that signs every message (see :mod:`tether.stream.auth`):
            given here, else ``$TETHER_STREAM_KEY`` or ``$TETHER_STREAM_KEY_FILE``;
            ``False`` sends unsigned messages even if the environment has a key.
        namespace: The stream's namespace, signed into every message so that consumers
            of another stream refuse a copy (see :mod:`tether.stream.auth`): by default
            the publisher's (a Redis queue's key prefix, a RabbitMQ virtual host; ``''``
            for most shims). Consumers must use the same.
    """

    def __init__(
        self,
        publisher: Publisher | EventPublisher,
        stores: Mapping[str, Store[Any] | None] | Store[Any] | None = None,
        *,
        default_store: Store[Any] | None = None,
        batch_size: int = 1,
        filter_: Filter | None = None,
        sampler: Sampler | None = None,
        aggregator: Aggregator | None = None,
        key: KeySpec | StreamKey = None,
        namespace: str | None = None,
    ) -> None:
        if batch_size < 1:
            raise ValueError(f'batch_size must be at least 1, not {batch_size}')
        if isinstance(stores, Store):
            default_store, stores = stores, None
        # Event-level publishers carry objects, not signable bytes: no default key.
        unsigned = key is None and is_event_publisher(publisher)
        stream_key = None if unsigned else resolve_key(key)
        self.publisher: Publisher = as_publisher(publisher, signed=stream_key is not None)
        self.stores: dict[str, Store[Any] | None] = dict(stores or {})
        self.default_store = default_store
        self.batch_size = batch_size
        self.filter_ = filter_
        self.sampler = sampler
        self.aggregator = aggregator
        self.namespace = shim_namespace(self.publisher) if namespace is None else namespace
        self._signer = None if stream_key is None else Signer(stream_key, namespace=self.namespace)
        self._buffers: dict[str, list[tuple[Any, dict[str, Any], bool]]] = {}
        self._closed_topics: set[str] = set()
        self._topics: set[str] = set()
        self._closed = False

    def __repr__(self) -> str:
        return f'StreamProducer({self.publisher!r}, topics={sorted(self.stores)})'

    @property
    def signed(self) -> bool:
        """Whether this producer signs its messages (a stream key is configured)."""
        return self._signer is not None

    def _inline(self, topic: str) -> bool:
        return topic in self.stores and self.stores[topic] is None

    def store_for(self, topic: str) -> Store[Any]:
        """Return the store that holds the objects of ``topic``.

        Raises:
            StreamError: if the topic has no store (or is mapped to ``None``: inline).
        """
        store = self.stores.get(topic, self.default_store)
        if store is None:
            raise StreamError(
                f'no store for topic {topic!r}: pass it in stores={{...}} or give a default_store',
            )
        return store

    def send(
        self,
        topic: str,
        obj: T,
        *,
        metadata: Mapping[str, Any] | None = None,
        evict: bool = True,
    ) -> None:
        """Send ``obj`` to ``topic`` (stored and published once its batch is full).

        Args:
            topic: The topic.
            obj: The object.
            metadata: JSON-serializable metadata that travels in the event.
            evict: The consumer's proxy evicts the object once it is resolved.

        Raises:
            TopicClosedError: if the topic was closed with :meth:`close_topics`.
            StreamError: if the metadata is not JSON-serializable or the topic has no store.
            StreamBrokerError: if the broker is unreachable.
            StreamBackpressureError: if the broker stayed full for its timeout.
        """
        self._check_open()
        if topic in self._closed_topics:
            raise TopicClosedError(f'topic {topic!r} was closed by this producer')
        meta = ev.check_metadata(metadata)
        if not self._inline(topic):
            self.store_for(topic)
        self._topics.add(topic)
        if self.filter_ is not None and self.filter_(meta):
            return
        if self.sampler is not None and not self.sampler(meta):
            return
        buffer = self._buffers.setdefault(topic, [])
        buffer.append((obj, meta, evict))
        if len(buffer) >= self.batch_size:
            self._flush_topic(topic)

    def _flush_topic(self, topic: str) -> None:
        buffer = self._buffers.pop(topic, [])
        if not buffer:
            return
        objs = [b[0] for b in buffer]
        metas = [b[1] for b in buffer]
        evicts = [b[2] for b in buffer]
        if self.aggregator is not None:
            merged: dict[str, Any] = {}
            for m in metas:
                merged.update(m)
            objs, metas, evicts = [self.aggregator(objs)], [merged], [all(evicts)]
        if self._inline(topic):
            inline: list[ev.Event] = [
                ev.InlineObjectEvent(topic, serialize(obj), meta)
                for obj, meta in zip(objs, metas, strict=True)
            ]
            self.publisher.send_message(topic, ev.encode(inline, signer=self._signer))
            return
        store = self.store_for(topic)
        keys = [store.put(objs[0])] if len(objs) == 1 else store.put_batch(objs)
        config = store.config().model_dump()
        events: list[ev.Event] = [
            ev.NewObjectEvent(topic, config, key, meta, evict)
            for key, meta, evict in zip(keys, metas, evicts, strict=True)
        ]
        self.publisher.send_message(topic, ev.encode(events, signer=self._signer))

    def flush_topic(self, topic: str) -> None:
        """Store and publish the items of ``topic`` waiting for a full batch."""
        self._check_open()
        self._flush_topic(topic)

    def flush(self) -> None:
        """Store and publish every item waiting for a full batch."""
        self._check_open()
        for topic in list(self._buffers):
            self._flush_topic(topic)

    def close_topics(self, *topics: str) -> None:
        """Flush ``topics`` and send each an end-of-stream event (consumers stop there)."""
        self._check_open()
        for topic in topics:
            if topic in self._closed_topics:
                continue
            self._flush_topic(topic)
            self.publisher.send_message(
                topic, ev.encode([ev.EndOfStreamEvent(topic)], signer=self._signer)
            )
            self._closed_topics.add(topic)

    def close(
        self,
        *,
        close_topics: bool = True,
        close_publisher: bool = True,
        close_stores: bool = False,
        topics: Iterable[str] | None = None,
        publisher: bool | None = None,
        stores: bool | None = None,
    ) -> None:
        """Flush, end the topics, and close the publisher.

        Args:
            close_topics: Send end-of-stream to every topic this producer knows of
                (those in ``stores`` and those sent to).
            close_publisher: Close the publisher.
            close_stores: Close the stores too (their objects stay in the channel).
            topics: End only these topics (ProxyStore's ``close(topics=[...])``); the
                others are flushed but not ended.
            publisher: ProxyStore's name for ``close_publisher``.
            stores: ProxyStore's name for ``close_stores``.
        """
        if self._closed:
            return
        if publisher is not None:
            close_publisher = publisher
        if stores is not None:
            close_stores = stores
        try:
            if topics is not None:
                self.close_topics(*topics)
                self.flush()
            elif close_topics:
                topics = sorted(set(self.stores) | self._topics)
                self.close_topics(*topics)
            else:
                self.flush()
        finally:
            self._closed = True
            if close_publisher:
                self.publisher.close()
            if close_stores:
                known = [*self.stores.values(), self.default_store]
                for store in {id(s): s for s in known if s is not None}.values():
                    store.close()

    def _check_open(self) -> None:
        if self._closed:
            raise StreamError('the stream producer is closed')
