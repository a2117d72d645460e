"""Connector and stream behaviours a ProxyStore program relies on."""

from __future__ import annotations

import queue
from pathlib import Path
from typing import Any

import pytest

from tether.connectors.file import FileConnector
from tether.connectors.local import LocalConnector
from tether.connectors.multi import MultiConnector, Policy
from tether.connectors.redis import RedisConnector
from tether.connectors.shared_memory import SharedMemoryConnector
from tether.exceptions import EventDecodeError, InvalidArgumentError, StreamError
from tether.proxy import Proxy
from tether.store import Store
from tether.stream import StreamConsumer, StreamProducer
from tether.stream.events import (
    EndOfStreamEvent,
    EventBatch,
    NewObjectEvent,
    NewObjectKeyEvent,
    bytes_to_event,
    decode,
    dict_to_event,
    encode,
    event_to_bytes,
    event_to_dict,
)
from tether.stream.filters import NullFilter, SamplingFilter
from tether.stream.shims.queue import QueuePublisher, QueueSubscriber

REDIS = ('127.0.0.1', 6379)


def _connectors(tmp_path: Path, prefix: str, shm: str) -> list[Any]:
    return [
        LocalConnector(),
        FileConnector(str(tmp_path / 'files')),
        SharedMemoryConnector(namespace=shm),
        RedisConnector(*REDIS, prefix=prefix),
        MultiConnector({'local': (LocalConnector(), Policy())}),
    ]


def test_connectors_are_context_managers(
    tmp_path: Path, unique_prefix: str, shm_namespace: str, redis_available: None
) -> None:
    for connector in _connectors(tmp_path, unique_prefix, shm_namespace):
        with connector as c:
            assert c is connector
            key = c.put(b'x')
            assert bytes(c.get(key)) == b'x'
            c.evict(key)
        # Leaving the block closed it: using a closed local or Redis connector raises.
    closed = LocalConnector()
    with closed:
        pass
    with pytest.raises(Exception, match='closed'):
        closed.put(b'x')


def test_new_key_with_data_only_reserves(
    tmp_path: Path, unique_prefix: str, shm_namespace: str, redis_available: None
) -> None:
    for connector in _connectors(tmp_path, unique_prefix, shm_namespace):
        with connector:
            key = connector.new_key(b'the data')
            assert not connector.exists(key), type(connector).__name__
            assert connector.get(key) is None
            connector.set(key, b'the data')
            assert connector.exists(key)
            connector.evict(key)


def _pair(*topics: str) -> tuple[QueuePublisher, dict[str, QueueSubscriber]]:
    queues: dict[str, queue.Queue[bytes]] = {t: queue.Queue() for t in topics}
    return QueuePublisher(queues), {t: QueueSubscriber(q, t) for t, q in queues.items()}


def test_close_topics_ends_only_those_named() -> None:
    publisher, subs = _pair('a', 'b')
    store = Store('porting-stream', LocalConnector())
    producer: StreamProducer[int] = StreamProducer(publisher, {'a': store, 'b': store})
    producer.send('a', 1)
    producer.send('b', 2)
    producer.close(topics=['a'], publisher=True)
    assert list(StreamConsumer(subs['a'], stores=store)) == [1]
    events = decode(subs['b'].next_message(timeout=5))
    assert [type(e) for e in events] == [NewObjectEvent]
    with pytest.raises(Exception, match=r'[Tt]imeout|no message'):
        subs['b'].next_message(timeout=0.01)  # no end-of-stream for b
    with pytest.raises(StreamError):
        publisher.send_message('b', b'x')  # the publisher was closed


def test_close_keyword_stores_closes_stores() -> None:
    publisher, _ = _pair('a')
    store = Store('porting-stream2', LocalConnector())
    StreamProducer(publisher, {'a': store}).close(stores=True)
    assert store.closed


def test_producer_and_consumer_are_generic() -> None:
    publisher, subs = _pair('t')
    store = Store('porting-generic', LocalConnector())
    producer = StreamProducer[list[int]](publisher, {'t': store})
    producer.send('t', [1, 2])
    producer.close()
    consumer = StreamConsumer[list[int]](subs['t'], stores=store)
    items: list[Proxy[list[int]]] = list(consumer)
    assert items == [[1, 2]]


def test_subscriber_is_iterable() -> None:
    publisher, subs = _pair('t')
    publisher.send_message('t', b'one')
    publisher.send_message('t', b'two')
    it = iter(subs['t'])
    assert it is subs['t']
    assert next(it) == b'one'
    assert [m for _, m in zip(range(1), subs['t'], strict=False)] == [b'two']


def test_null_and_sampling_filters() -> None:
    assert NullFilter()({'a': 1}) is False
    # p is the probability of dropping an item, as in ProxyStore.
    assert SamplingFilter(0.0)({}) is False  # always kept
    assert SamplingFilter(1.0)({}) is True  # always dropped
    sampled = SamplingFilter(0.5, seed=1)
    drops = [sampled({}) for _ in range(200)]
    assert 0 < sum(drops) < 200
    with pytest.raises(InvalidArgumentError) as info:
        SamplingFilter(1.5)
    assert isinstance(info.value, ValueError)


def test_filters_plug_into_the_producer() -> None:
    publisher, subs = _pair('t')
    store = Store('porting-filter', LocalConnector())
    producer: StreamProducer[int] = StreamProducer(
        publisher, {'t': store}, filter_=SamplingFilter(1.0)
    )
    producer.send('t', 1)
    producer.close()
    assert list(StreamConsumer(subs['t'], stores=store)) == []


def test_event_batch_api() -> None:
    store = Store('porting-events', LocalConnector())
    key = store.put(1)
    new = NewObjectKeyEvent('t', store.config().model_dump(), key, {'i': 1}, True)
    assert NewObjectKeyEvent is NewObjectEvent
    end = EndOfStreamEvent('t')
    batch = EventBatch('t', [new, end])
    assert bytes_to_event(event_to_bytes(batch)) == batch
    assert bytes_to_event(event_to_bytes(new)) == new
    assert dict_to_event(event_to_dict(batch)) == batch
    assert dict_to_event(event_to_dict(end)) == end
    assert event_to_bytes(batch) == encode([new, end])
    with pytest.raises(StreamError):
        EventBatch('t', [EndOfStreamEvent('other')])
    with pytest.raises(EventDecodeError):
        dict_to_event({'type': 'event_batch', 'topic': 't', 'events': [{'type': 'x'}]})
    with pytest.raises(EventDecodeError):
        bytes_to_event(encode([EndOfStreamEvent('a'), EndOfStreamEvent('b')]))


def test_topic_mapped_to_no_store_sends_objects_inline() -> None:
    publisher, subs = _pair('inline', 'stored')
    store = Store('porting-inline', LocalConnector())
    producer: StreamProducer[Any] = StreamProducer(publisher, {'inline': None, 'stored': store})
    producer.send('inline', {'small': [1, 2]}, metadata={'i': 0})
    producer.send('stored', 'big')
    producer.close()
    raw = subs['inline'].next_message(timeout=5)
    assert b'"inline_object"' in raw
    # Back on the queue for the consumer (the queue shim has no replay).
    q: queue.Queue[bytes] = queue.Queue()
    q.put(raw)
    q.put(subs['inline'].next_message(timeout=5))
    consumer: StreamConsumer[Any] = StreamConsumer(QueueSubscriber(q), accept_inline=True)
    meta, item = consumer.next_with_metadata()
    assert meta == {'i': 0}
    assert isinstance(item, Proxy)
    assert item == {'small': [1, 2]}
    assert list(consumer) == []
    assert list(StreamConsumer(subs['stored'], stores=store)) == ['big']


def test_inline_objects_are_refused_unless_accepted() -> None:
    from tether.exceptions import EventRefusedError

    # Unsigned (key=False): without a stream key nobody vouches for the pickled bytes.
    publisher, subs = _pair('t')
    producer: StreamProducer[Any] = StreamProducer(publisher, {'t': None}, key=False)
    producer.send('t', 1)
    producer.close()
    consumer: StreamConsumer[Any] = StreamConsumer(subs['t'], key=False)
    with pytest.raises(EventRefusedError, match='accept_inline'):
        consumer.next()
    assert list(consumer) == []  # the consumer stays usable: the next event ends it


def test_inline_objects_with_a_stream_key_are_accepted() -> None:
    import secrets

    key = secrets.token_bytes(32)
    publisher, subs = _pair('t')
    producer: StreamProducer[Any] = StreamProducer(publisher, {'t': None}, key=key)
    producer.send('t', [3])
    producer.close()
    assert list(StreamConsumer(subs['t'], key=key)) == [[3]]


def test_a_topic_without_any_store_still_raises() -> None:
    publisher, _ = _pair('t')
    producer: StreamProducer[Any] = StreamProducer(publisher, {'a': None})
    with pytest.raises(StreamError, match="'t'"):
        producer.send('t', 1)
