"""The protocols a message broker shim implements.

A shim is two small classes: a :class:`Publisher` that sends bytes to a topic and a
:class:`Subscriber` that receives the bytes of the topic(s) it subscribed to. Neither
knows about events, stores or proxies; :class:`~tether.stream.StreamProducer` and
:class:`~tether.stream.StreamConsumer` do that. Adding a broker (Kafka, say) is writing
these two classes and running the conformance suite (:mod:`tether.testing.stream`).

Rules every shim follows:

* Errors are tether errors: an unreachable or vanished broker raises
  :class:`~tether.exceptions.StreamBrokerError` (within the client timeouts the shim
  configures, never a hang); no message within the ``timeout`` raises
  :class:`~tether.exceptions.StreamTimeoutError`; a full bounded buffer raises
  :class:`~tether.exceptions.StreamBackpressureError` after blocking for its timeout.
* ``next_message`` returns one message as bytes, in the order the broker delivers them.
* A subscriber says which topics it reads (:class:`TopicSubscriber`: ``accepts_topic``),
  so that a consumer refuses a signed message replayed onto another topic.
* Durable shims acknowledge a message when ``next_message`` is called again (or at
  ``close``), so a consumer killed while handling a message gets it again on restart.
* A shim whose broker names are more than the topic (a key prefix, a virtual host) says
  so in a ``namespace`` string attribute, the same on its publisher and subscribers:
  signed messages name it, so one copied between two streams whose topics share a name
  is refused (:func:`tether.stream.auth.shim_namespace`). Without it, the namespace is
  ``''``.
"""

from __future__ import annotations

from typing import Any, Protocol, Self, cast, runtime_checkable

__all__ = [
    'EventPublisher',
    'EventSubscriber',
    'Publisher',
    'Subscriber',
    'SubscriberIterator',
    'TopicSubscriber',
]


@runtime_checkable
class Publisher(Protocol):
    """Sends messages (bytes) to topics of a broker."""

    def send_message(self, topic: str, message: bytes) -> None:
        """Send ``message`` to ``topic``; return once the broker has it (or raise)."""
        ...

    def close(self) -> None:
        """Release the connection; further sends raise."""
        ...


@runtime_checkable
class Subscriber(Protocol):
    """Receives the messages of the topic(s) it was created for."""

    def next_message(self, timeout: float | None = None) -> bytes:
        """Return the next message, waiting at most ``timeout`` seconds (None: forever).

        Raises:
            StreamTimeoutError: if no message arrived in time.
            StreamBrokerError: if the broker is gone.
        """
        ...

    def close(self) -> None:
        """Acknowledge what was handed out (durable shims) and release the connection."""
        ...


@runtime_checkable
class TopicSubscriber(Subscriber, Protocol):
    """A subscriber that says which topics it reads (every tether shim's does).

    A :class:`~tether.stream.StreamConsumer` with a stream key refuses a signed message
    whose topic its subscriber does not read (a message replayed onto another topic): it
    asks :meth:`accepts_topic`. A subscriber without it is trusted to read only its own
    topics unless the consumer is given ``topics=``.
    """

    def accepts_topic(self, topic: str) -> bool:
        """Whether a message published to ``topic`` can arrive on this subscriber."""
        ...


@runtime_checkable
class EventPublisher(Protocol):
    """ProxyStore's event-level publisher: takes :class:`~tether.stream.events.EventBatch`
    objects instead of bytes. A :class:`~tether.stream.StreamProducer` accepts one (its
    events cannot be signed, so not with a stream key)."""

    def send_events(self, events: Any) -> None:
        """Publish a batch of events of one topic."""
        ...

    def close(self) -> None:
        """Close this publisher."""
        ...


@runtime_checkable
class EventSubscriber(Protocol):
    """ProxyStore's event-level subscriber: yields event batches; a
    :class:`~tether.stream.StreamConsumer` accepts one."""

    def next_events(self) -> Any:
        """Return the next batch of events (or a single event)."""
        ...

    def close(self) -> None:
        """Close this subscriber."""
        ...


class SubscriberIterator:
    """Mixin that makes a subscriber iterable: each item is ``next_message()``'s.

    Iteration waits for messages (as ``next_message()`` without a timeout does) and ends
    only with an error, such as :class:`~tether.exceptions.StreamBrokerError` when the
    broker goes away. Every tether shim's subscriber has it, as ProxyStore's did.
    """

    __slots__ = ()

    def __iter__(self) -> Self:
        return self

    def __next__(self) -> bytes:
        next_message: Any = getattr(self, 'next_message')  # noqa: B009 - the shim's own
        return cast(bytes, next_message())
