"""Event-level publishers and subscribers (ProxyStore's ``EventPublisher`` and
``EventSubscriber``) behind tether's bytes-level shim protocols.

A producer given an object with ``send_events(batch)`` (and no ``send_message``) sends it
:class:`~tether.stream.events.EventBatch` objects; a consumer given one with
``next_events()`` reads batches from it. Such shims move event objects, not bytes, so
their events are never signed: without ``key=`` the producer and consumer of such a shim
run unsigned (the user's default key is not used); with an explicit key they refuse it.
"""

from __future__ import annotations

from typing import Any, cast

from tether.exceptions import InvalidArgumentError
from tether.stream import events as ev
from tether.stream.protocols import Publisher, Subscriber, SubscriberIterator

__all__ = [
    'EventPublisherShim',
    'EventSubscriberShim',
    'as_publisher',
    'as_subscriber',
    'is_event_publisher',
    'is_event_subscriber',
]


class EventPublisherShim:
    """A bytes-level publisher that hands each message to ``send_events`` as a batch."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner

    def __repr__(self) -> str:
        return f'EventPublisherShim({self.inner!r})'

    def send_message(self, topic: str, message: bytes) -> None:
        """Decode ``message`` (this producer's own bytes) and send it as one batch."""
        self.inner.send_events(ev.EventBatch(topic, ev.decode(message)))

    def close(self) -> None:
        """Close the event publisher."""
        self.inner.close()


class EventSubscriberShim(SubscriberIterator):
    """A bytes-level subscriber that reads batches from ``next_events``."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner

    def __repr__(self) -> str:
        return f'EventSubscriberShim({self.inner!r})'

    def next_message(self, timeout: float | None = None) -> bytes:
        """The next batch (or event) of the event subscriber, as a message."""
        return ev.event_to_bytes(self.inner.next_events())

    def close(self) -> None:
        """Close the event subscriber."""
        self.inner.close()


def is_event_publisher(publisher: Any) -> bool:
    """Whether ``publisher`` takes event batches (ProxyStore's ``EventPublisher``)."""
    return not hasattr(publisher, 'send_message') and hasattr(publisher, 'send_events')


def is_event_subscriber(subscriber: Any) -> bool:
    """Whether ``subscriber`` yields event batches (ProxyStore's ``EventSubscriber``)."""
    return not hasattr(subscriber, 'next_message') and hasattr(subscriber, 'next_events')


def as_publisher(publisher: Any, *, signed: bool) -> Publisher:
    """``publisher`` itself, or its bytes-level shim if it is an event publisher.

    Raises:
        InvalidArgumentError: for an event publisher with a stream key (its events are
            objects, which cannot carry a signature).
    """
    if not is_event_publisher(publisher):
        return cast(Publisher, publisher)
    if signed:
        raise InvalidArgumentError(
            f'{publisher!r} publishes event objects, which cannot be signed: use a shim '
            'that sends bytes (tether.stream.shims) with a stream key, or key=False',
        )
    return EventPublisherShim(publisher)


def as_subscriber(subscriber: Any) -> Subscriber:
    """``subscriber`` itself, or its bytes-level shim if it is an event subscriber."""
    if not is_event_subscriber(subscriber):
        return cast(Subscriber, subscriber)
    return EventSubscriberShim(subscriber)
