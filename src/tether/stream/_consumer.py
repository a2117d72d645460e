"""StreamConsumer: events from a broker become lazy proxies."""

from __future__ import annotations

import collections
import json
import logging
from collections.abc import Callable, Iterable, Iterator
from typing import Any, Generic, TypeAlias, cast

from typing_extensions import TypeVar

from tether._closing import ClosingContext
from tether.exceptions import (
    EventDecodeError,
    EventRefusedError,
    EventReplayError,
    StreamError,
    UntrustedStoreError,
    UntrustedTypeError,
)
from tether.proxy import Proxy, extract
from tether.store import Store, StoreConfig, allowlist, get_or_create_store, get_store
from tether.store.config import path_of
from tether.stream import events as ev
from tether.stream._event_io import as_subscriber, is_event_subscriber
from tether.stream.auth import KeySpec, StreamKey, Verifier, resolve_key, shim_namespace
from tether.stream.hooks import Filter
from tether.stream.protocols import EventSubscriber, Subscriber, TopicSubscriber

__all__ = ['StreamConsumer']

logger = logging.getLogger(__name__)

_ObjectEvent: TypeAlias = ev.NewObjectEvent | ev.InlineObjectEvent


def _inline_proxy(event: ev.InlineObjectEvent) -> Proxy[Any]:
    """A resolved proxy of an object sent inside its event."""
    from tether.factory import SimpleFactory
    from tether.serialize import deserialize

    try:
        obj = deserialize(event.data)
    except Exception as e:
        raise EventDecodeError(
            f'the object sent inline on topic {event.topic!r} does not deserialize: {e}',
        ) from e
    return Proxy(SimpleFactory(obj), target=obj, cache_defaults=True)


T = TypeVar('T', default=Any)


def _marker(config: StoreConfig) -> str:
    return json.dumps(config.model_dump(), sort_keys=True, default=repr)


_SECRET_WORDS = ('password', 'secret', 'token', 'key')


def _describe(config: StoreConfig) -> str:
    """A store config for an error message: secret-looking values hidden, length bounded."""
    shown = {
        k: '***' if any(w in k.lower() for w in _SECRET_WORDS) else v
        for k, v in config.connector_config.items()
    }
    text = f'{config.name!r} ({config.connector_type} {shown})'
    return text if len(text) <= 300 else text[:297] + '...'


def _topic_check(subscriber: Any, topics: Iterable[str] | None) -> Callable[[str], bool] | None:
    """How to tell whether a signed message's topic is one ``subscriber`` reads: the
    consumer's ``topics=``, else the subscriber's :class:`TopicSubscriber` contract."""
    if topics is not None:
        return set(topics).__contains__
    if isinstance(subscriber, TopicSubscriber):
        return subscriber.accepts_topic
    return None


class StreamConsumer(ClosingContext, Generic[T]):
    """Iterates over a stream, yielding a proxy per object (no bulk data read yet).

    Generic in the type of the objects (``StreamConsumer[np.ndarray]`` yields
    ``Proxy[np.ndarray]``), for type checkers only.

    Each event names the store that holds its object (by config). The consumer acts only
    on events whose store it accepts: by default the ``stores`` it was given and the
    stores registered in this process (``register=True``) under an identical config. An
    event naming any other store raises :class:`~tether.exceptions.UntrustedStoreError`
    and nothing it names is built, read or evicted. With ``accept_unknown_stores`` the
    consumer instead rebuilds such stores from the event (once per process, through the
    store registry), provided every type they name is allowlisted
    (:mod:`tether.store.allowlist`): a store config says which host to connect to and
    which directory to use, so this trusts whoever can publish to the topic.

    With a stream key (by default the user's key file, see :mod:`tether.stream.auth`;
    ``key=False`` for none) every message must be signed by a producer with that key:
    unsigned, altered and replayed messages raise
    :class:`~tether.exceptions.EventAuthenticationError`, and since authenticated
    producers vouch for their stores, ``accept_unknown_stores`` defaults to true. A signed
    message must also name a topic that the subscriber reads (its ``topic``, ``topics`` or
    ``accepts_topic``, or the ``topics`` given here), and be signed for this stream's
    namespace: one replayed onto another topic, or copied from another stream whose
    topic has the same name, raises :class:`~tether.exceptions.EventReplayError`.

    A refused message raises, and the consumer stays usable: the next call reads the
    next message (``skip_invalid=True`` logs refused messages and skips them instead).
    Iteration stops at the end-of-stream event (after ``end_events`` of them when several
    producers share the subscribed topics).

    Args:
        subscriber: The broker shim (see :mod:`tether.stream.shims`).
        stores: Stores whose events are accepted (a store or an iterable of them).
        accept_unknown_stores: Rebuild stores of allowlisted types that the consumer was
            not given (default: only when events are authenticated by a stream key).
        key: The stream key (default: the environment, else the user's key file;
            ``False``: none).
        max_age: With a key: the oldest message accepted, in seconds (None: any).
        skip_invalid: Log and skip refused or undecodable messages instead of raising.
        filter_: Called with each item's metadata; ``True`` drops the item (its object
            is evicted if its event says ``evict``, in an accepted store only).
        timeout: Seconds each ``next`` waits for a message before raising
            :class:`~tether.exceptions.StreamTimeoutError` (None: wait forever, still
            raising :class:`~tether.exceptions.StreamBrokerError` if the broker goes).
        end_events: End-of-stream events to see before stopping (one per producer).
        topics: The topics the subscriber reads, for checking signed messages (default:
            what the subscriber says; a shim that says nothing is not checked).
        accept_inline: Accept objects sent inside events (a producer topic mapped to no
            store): decoding them unpickles bytes from the broker, so the default is to
            accept them only when messages are authenticated by a stream key; otherwise
            they raise :class:`~tether.exceptions.EventRefusedError`. Such items come as
            proxies that are already resolved.
        namespace: The stream's namespace, which signed messages must name (see
            :mod:`tether.stream.auth`): by default the subscriber's (a Redis queue's key
            prefix, a RabbitMQ virtual host; ``''`` for most shims), as the producer's.
    """

    def __init__(
        self,
        subscriber: Subscriber | EventSubscriber,
        *,
        stores: Store[Any] | Iterable[Store[Any]] | None = None,
        accept_unknown_stores: bool | None = None,
        key: KeySpec | StreamKey = None,
        max_age: float | None = 3600.0,
        skip_invalid: bool = False,
        filter_: Filter | None = None,
        timeout: float | None = None,
        end_events: int = 1,
        topics: Iterable[str] | None = None,
        accept_inline: bool | None = None,
        namespace: str | None = None,
    ) -> None:
        if end_events < 1:
            raise ValueError(f'end_events must be at least 1, not {end_events}')
        self.subscriber: Subscriber = as_subscriber(subscriber)
        self.filter_ = filter_
        self.timeout = timeout
        self.end_events = end_events
        self.skip_invalid = skip_invalid
        # Event-level subscribers yield objects, not signed bytes: no default key.
        unsigned = key is None and is_event_subscriber(subscriber)
        stream_key = None if unsigned else resolve_key(key)
        self.namespace = shim_namespace(self.subscriber) if namespace is None else namespace
        self._verifier = (
            None
            if stream_key is None
            else Verifier(stream_key, namespace=self.namespace, max_age=max_age)
        )
        self._accepts_topic = _topic_check(self.subscriber, topics)
        self.accept_unknown_stores = (
            self._verifier is not None if accept_unknown_stores is None else accept_unknown_stores
        )
        self.accept_inline = self._verifier is not None if accept_inline is None else accept_inline
        given = [stores] if isinstance(stores, Store) else list(stores or ())
        self._pinned: dict[str, Store[Any]] = {_marker(s.config()): s for s in given}
        self._ends = 0
        self._pending: collections.deque[ev.Event] = collections.deque()
        self._accepted: dict[str, Store[Any]] = {}
        self._closed = False

    def __repr__(self) -> str:
        return f'StreamConsumer({self.subscriber!r})'

    def close(
        self,
        *,
        close_subscriber: bool = True,
        close_stores: bool = False,
        subscriber: bool | None = None,
        stores: bool | None = None,
    ) -> None:
        """Close the subscriber (durable shims acknowledge what was consumed).

        Args:
            close_subscriber: Close the subscriber.
            close_stores: Close the stores this consumer was given or has used (their
                objects stay in the channel).
            subscriber: ProxyStore's name for ``close_subscriber``.
            stores: ProxyStore's name for ``close_stores``.
        """
        if self._closed:
            return
        self._closed = True
        if subscriber is not None:
            close_subscriber = subscriber
        if stores is not None:
            close_stores = stores
        if close_subscriber:
            self.subscriber.close()
        if close_stores:
            seen: set[int] = set()
            for store in (*self._pinned.values(), *self._accepted.values()):
                if id(store) not in seen:
                    seen.add(id(store))
                    store.close()

    @property
    def ended(self) -> bool:
        """Whether the end of the stream was reached."""
        return self._ends >= self.end_events

    @property
    def authenticated(self) -> bool:
        """Whether this consumer requires signed messages (a stream key is configured)."""
        return self._verifier is not None

    # Events ----------------------------------------------------------------------------

    def _next_event(self) -> tuple[_ObjectEvent, Store[Any] | None] | None:
        """Return the next accepted object event and its store, or None at the end."""
        while True:
            if self.ended:
                return None
            if self._closed:
                raise StreamError('the stream consumer is closed')
            try:
                found = self._step()
            except EventDecodeError as e:
                if not self.skip_invalid:
                    raise
                logger.warning('skipped a stream message: %s', e)
                continue
            if found is not None:
                return found

    def _step(self) -> tuple[_ObjectEvent, Store[Any] | None] | None:
        if not self._pending:
            message = self.subscriber.next_message(self.timeout)
            events = ev.decode(message, verifier=self._verifier)
            if self._verifier is not None and events and self._accepts_topic is not None:
                topic = events[0].topic  # a signed message carries one topic, under its MAC
                if not self._accepts_topic(topic):
                    raise EventReplayError(
                        f'refused a stream message signed for topic {topic!r}: it arrived '
                        f'on {self.subscriber!r}, which does not read that topic (a message '
                        'replayed onto another topic)',
                    )
            self._pending.extend(events)
            return None
        event = self._pending.popleft()
        if isinstance(event, ev.EndOfStreamEvent):
            self._ends += 1
            logger.debug('end of stream on topic %r (%d seen)', event.topic, self._ends)
            return None
        if isinstance(event, ev.InlineObjectEvent):
            if not self.accept_inline:
                raise EventRefusedError(
                    f'refused an object sent inline on topic {event.topic!r}: decoding it '
                    'would unpickle bytes from the broker. Pass accept_inline=True if you '
                    'trust every publisher on the topic, or sign messages with a stream key',
                )
            if self.filter_ is not None and self.filter_(event.metadata):
                return None
            return event, None
        if self.filter_ is not None and self.filter_(event.metadata):
            if event.evict:
                self.store_of(event).evict(event.key)
            return None
        return event, self.store_of(event)

    def store_of(self, event: ev.NewObjectEvent) -> Store[Any]:
        """Return the store that holds the object of ``event``, if this consumer accepts it.

        Raises:
            UntrustedStoreError: if the event names a store this consumer does not accept.
            EventRefusedError: if the store names a type that is not allowlisted, or the
                key is not of its connector's key type.
            EventDecodeError: if the store config is invalid.
        """
        raw = repr(event.store_config)  # a cache key only: a miss just checks again
        store = self._accepted.get(raw)
        if store is None or store.closed:
            store = self._accept(event.store_config)
            if len(self._accepted) >= 256:  # bounded, whatever the events say
                self._accepted.clear()
            self._accepted[raw] = store
        expected = allowlist.key_type_of(store.config().connector_type)
        if expected is not None and path_of(type(event.key)) != expected:
            raise EventRefusedError(
                f'refused a stream event: its key {event.key!r} is not a {expected} '
                f'(the key type of store {store.name!r})',
            )
        return store

    def _accept(self, data: dict[str, Any]) -> Store[Any]:
        try:
            config = StoreConfig.model_validate(data)
        except Exception as e:
            raise EventDecodeError(f'bad store config in stream event: {e}') from e
        store = self._pinned.get(_marker(config))
        if store is not None:
            return store
        registered = get_store(config.name)
        if registered is not None and not registered.closed and registered.config() == config:
            return registered
        if not self.accept_unknown_stores:
            raise UntrustedStoreError(
                f'refused a stream event naming store {_describe(config)}: this consumer accepts '
                'only the stores it was given (stores=...) and stores registered in this '
                'process with an identical config. Pass the store, register it, or use a '
                'stream key so that authenticated producers vouch for their stores '
                '(accept_unknown_stores=True trusts whoever can publish to the topic)',
            )
        try:
            allowlist.check_config(config)
        except UntrustedTypeError as e:
            raise EventRefusedError(
                f'refused a stream event naming store {config.name!r}: {e}'
            ) from e
        store = get_or_create_store(config)
        if store.config() != config:
            raise UntrustedStoreError(
                f'a stream event names store {_describe(config)}, but another store of that '
                f'name is registered in this process: {_describe(store.config())}; rename '
                'one of them',
            )
        return store

    def _proxy(self, event: _ObjectEvent, store: Store[Any] | None) -> Proxy[Any]:
        if isinstance(event, ev.InlineObjectEvent) or store is None:
            return _inline_proxy(cast(ev.InlineObjectEvent, event))
        return store.proxy_from_key(event.key, evict=event.evict)

    # Single items ----------------------------------------------------------------------

    def next_with_metadata(self) -> tuple[dict[str, Any], Proxy[T]]:
        """Return the next item's metadata and proxy.

        Raises:
            StopIteration: at the end of the stream.
        """
        found = self._next_event()
        if found is None:
            raise StopIteration
        event, store = found
        return event.metadata, self._proxy(event, store)

    def next(self) -> Proxy[T]:
        """Return a proxy of the next item (raises ``StopIteration`` at the end)."""
        return self.next_with_metadata()[1]

    def next_object(self) -> T:
        """Return the next item itself (read from its store now)."""
        return self.next_object_with_metadata()[1]

    def next_object_with_metadata(self) -> tuple[dict[str, Any], T]:
        """Return the next item's metadata and the item itself."""
        found = self._next_event()
        if found is None:
            raise StopIteration
        event, store = found
        return event.metadata, extract(self._proxy(event, store))

    def next_event(self) -> ev.NewObjectEvent:
        """Return the next accepted object event (raises ``StopIteration`` at the end).

        Raises:
            StreamError: if the next object was sent inline (use :meth:`next`).
        """
        found = self._next_event()
        if found is None:
            raise StopIteration
        event = found[0]
        if isinstance(event, ev.InlineObjectEvent):
            raise StreamError(
                f'the next object on topic {event.topic!r} was sent inline, not by key: '
                'read it with next() or next_object()',
            )
        return event

    # Iteration -------------------------------------------------------------------------

    def __iter__(self) -> Iterator[Proxy[T]]:
        return self

    def __next__(self) -> Proxy[T]:
        return self.next()

    def iter_with_metadata(self) -> Iterator[tuple[dict[str, Any], Proxy[T]]]:
        """Yield ``(metadata, proxy)`` for each item until the end of the stream."""
        while True:
            try:
                yield self.next_with_metadata()
            except StopIteration:
                return

    def iter_objects(self) -> Iterator[T]:
        """Yield each item itself (resolved) until the end of the stream."""
        for _, obj in self.iter_objects_with_metadata():
            yield obj

    def iter_objects_with_metadata(self) -> Iterator[tuple[dict[str, Any], T]]:
        """Yield ``(metadata, item)`` for each item until the end of the stream."""
        while True:
            try:
                yield self.next_object_with_metadata()
            except StopIteration:
                return
