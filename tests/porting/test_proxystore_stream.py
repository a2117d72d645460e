"""Stream behaviours a ProxyStore program relies on (issue 29): event-level shims,
``StreamConsumer.close(stores=)``."""

from __future__ import annotations

import queue
from typing import Any

import pytest

from tether.connectors.local import LocalConnector
from tether.exceptions import InvalidArgumentError
from tether.store import Store, get_store
from tether.stream import StreamConsumer, StreamProducer
from tether.stream.events import EventBatch
from tether.stream.protocols import EventPublisher, EventSubscriber
from tether.stream.shims.queue import QueuePublisher, QueueSubscriber


class _BatchPublisher:
    """An event-level publisher: puts EventBatch objects on a queue (no bytes)."""

    def __init__(self, q: queue.Queue[Any]) -> None:
        self.q = q
        self.closed = False

    def send_events(self, events: EventBatch) -> None:
        assert isinstance(events, EventBatch)
        self.q.put(events)

    def close(self) -> None:
        self.closed = True


class _BatchSubscriber:
    def __init__(self, q: queue.Queue[Any]) -> None:
        self.q = q
        self.closed = False

    def next_events(self) -> EventBatch:
        batch: EventBatch = self.q.get(timeout=30)
        return batch

    def close(self) -> None:
        self.closed = True


def test_event_level_publisher_and_subscriber_carry_a_stream() -> None:
    q: queue.Queue[Any] = queue.Queue()
    publisher, subscriber = _BatchPublisher(q), _BatchSubscriber(q)
    assert isinstance(publisher, EventPublisher)
    assert isinstance(subscriber, EventSubscriber)
    with Store('ps-stream-events', LocalConnector(), register=True) as store:
        producer = StreamProducer[int](publisher, {'t': store}, batch_size=2)
        consumer = StreamConsumer[int](subscriber, stores=store)
        for i in range(3):
            producer.send('t', i)
        producer.close()
        assert publisher.closed
        assert [int(x) for x in consumer] == [0, 1, 2]
        consumer.close()
        assert subscriber.closed


def test_event_level_publisher_refuses_an_explicit_stream_key() -> None:
    # Without key= the event-level shims run unsigned (above), even when the user has a
    # default key file; an explicit key cannot be honoured, so it is refused.
    with pytest.raises(InvalidArgumentError, match='cannot be signed'):
        StreamProducer(_BatchPublisher(queue.Queue()), key=b'k' * 32)


def test_consumer_close_stores_closes_the_stores_it_used() -> None:
    q: queue.Queue[bytes] = queue.Queue()
    store = Store('ps-stream-close', LocalConnector(), register=True)
    producer = StreamProducer[str](QueuePublisher({'t': q}), {'t': store})
    consumer = StreamConsumer[str](QueueSubscriber(q))
    producer.send('t', 'x')
    producer.close()
    assert list(consumer) == ['x']
    consumer.close(stores=True, subscriber=True)
    assert store.closed
    assert get_store('ps-stream-close') is None


@pytest.mark.parametrize('kind', ['thread', 'spawn'])
def test_queue_publisher_close_ends_the_subscribers_iteration(kind: str) -> None:
    import multiprocessing

    q: Any = queue.Queue() if kind == 'thread' else multiprocessing.get_context(kind).Queue()
    publisher, subscriber = QueuePublisher({'t': q}), QueueSubscriber(q)
    publisher.send_message('t', b'one')
    publisher.close()
    assert list(subscriber) == [b'one']
    assert list(subscriber) == []  # ended for good


def test_queue_publisher_unknown_topic_is_a_value_error() -> None:
    from tether.exceptions import StreamError, UnknownTopicError

    with pytest.raises(UnknownTopicError) as info:
        QueuePublisher({'t': queue.Queue()}).send_message('other', b'x')
    assert isinstance(info.value, ValueError)
    assert isinstance(info.value, StreamError)
