"""StreamProducer and StreamConsumer: plugins, laziness, closing, backpressure, processes."""

from __future__ import annotations

import multiprocessing
import queue
import secrets
from typing import Any

import pytest

from tether.exceptions import (
    ProxyResolveMissingKeyError,
    StreamBackpressureError,
    StreamError,
    TopicClosedError,
)
from tether.proxy import is_resolved
from tether.store import Store
from tether.stream import StreamConsumer, StreamProducer
from tether.stream.hooks import (
    EveryNthSampler,
    MetadataFilter,
    RandomSampler,
    concatenate,
    to_list,
)
from tether.stream.shims.queue import QueuePublisher, QueueSubscriber


@pytest.fixture
def local() -> Any:
    store: Store[Any]
    with Store('stream-local', register=True, metrics=True) as store:
        yield store


def _pair(maxsize: int = 0, timeout: float = 5.0) -> tuple[QueuePublisher, QueueSubscriber]:
    q: queue.Queue[bytes] = queue.Queue(maxsize)
    return QueuePublisher({'t': q}, timeout=timeout), QueueSubscriber(q, 't')


def test_no_bulk_data_read_until_the_proxy_is_used(local: Store[Any]) -> None:
    pub, sub = _pair()
    with StreamProducer(pub, {'t': local}) as producer:
        producer.send('t', b'x' * 1000, metadata={'n': 1})
    consumer = StreamConsumer(sub, timeout=5)
    proxy = consumer.next()
    assert local.metrics is not None
    assert 'store.get' not in local.metrics.aggregate_times()
    assert not is_resolved(proxy)
    assert len(proxy) == 1000
    assert local.metrics.aggregate_times()['store.get'].count == 1
    with pytest.raises(StopIteration):
        consumer.next()


def test_evict_true_removes_the_object_after_resolution(local: Store[Any]) -> None:
    pub, sub = _pair()
    with StreamProducer(pub, {'t': local}) as producer:
        producer.send('t', 'once', evict=True)
    event = StreamConsumer(sub, timeout=5).next_event()
    proxy = local.proxy_from_key(event.key, evict=event.evict)
    assert proxy == 'once'
    assert not local.exists(event.key)
    again = local.proxy_from_key(event.key)
    with pytest.raises(ProxyResolveMissingKeyError, match='missing from store'):
        str(again)


def test_producer_filter_sampler_aggregator(local: Store[Any]) -> None:
    pub, sub = _pair()
    producer = StreamProducer(
        pub,
        {'t': local},
        batch_size=2,
        filter_=MetadataFilter(keep=True),
        sampler=EveryNthSampler(2),
        aggregator=to_list,
    )
    for i in range(12):
        producer.send('t', i, metadata={'keep': i % 3 != 0, 'i': i})
    producer.close()
    # kept by the filter: 1 2 4 5 7 8 10 11; every 2nd of those: 1 4 7 10; batches of 2
    got = list(StreamConsumer(sub, timeout=5).iter_objects_with_metadata())
    assert [obj for _, obj in got] == [[1, 4], [7, 10]]
    assert [meta['i'] for meta, _ in got] == [4, 10]  # union of the batch's metadata


def test_partial_batch_is_flushed_on_close(local: Store[Any]) -> None:
    pub, sub = _pair()
    with StreamProducer(pub, local, batch_size=10, aggregator=concatenate) as producer:
        producer.send('t', b'ab')
        producer.send('t', b'cd')
        assert sub.queue.qsize() == 0  # type: ignore[attr-defined]
    assert list(StreamConsumer(sub, timeout=5).iter_objects()) == [b'abcd']


def test_random_sampler_is_seeded() -> None:
    first = RandomSampler(0.5, seed=1)
    a = [first({}) for _ in range(50)]
    b = RandomSampler(0.5, seed=1)
    assert a == [b({}) for _ in range(50)]
    assert 0 < sum(a) < 50
    with pytest.raises(ValueError, match='probability'):
        RandomSampler(2.0)


def test_consumer_filter_evicts_dropped_objects(local: Store[Any]) -> None:
    pub, sub = _pair()
    with StreamProducer(pub, {'t': local}) as producer:
        producer.send('t', 'skip', metadata={'kind': 'b'})
        producer.send('t', 'take', metadata={'kind': 'a'})
    consumer = StreamConsumer(sub, timeout=5, filter_=MetadataFilter(kind='a'))
    first = consumer.next_event()  # 'skip' was dropped (and evicted) on the way
    assert local.get(first.key) == 'take'
    assert local.metrics is not None
    assert local.metrics.aggregate_times()['store.evict'].count == 1


def test_closed_topic_and_unknown_topic(local: Store[Any]) -> None:
    pub, _ = _pair()
    producer = StreamProducer(pub, {'t': local})
    producer.close_topics('t')
    with pytest.raises(TopicClosedError, match="'t'"):
        producer.send('t', 1)
    with pytest.raises(StreamError, match="no store for topic 'other'"):
        producer.send('other', 1)
    with pytest.raises(StreamError, match='JSON'):
        StreamProducer(pub, local).send('t', 1, metadata={'x': object()})
    producer.close()
    with pytest.raises(StreamError, match='closed'):
        producer.send('t', 1)


def test_slow_consumer_blocks_then_raises_instead_of_buffering(local: Store[Any]) -> None:
    pub, sub = _pair(maxsize=2, timeout=0.2)
    producer = StreamProducer(pub, {'t': local})
    producer.send('t', 1)
    producer.send('t', 2)
    with pytest.raises(StreamBackpressureError, match='stayed full'):
        producer.send('t', 3)
    assert sub.next_message(1)  # a consumer catching up makes room again
    producer.send('t', 4)


def _send_many(pub: Any, message: bytes) -> None:
    for _ in range(1000):  # the kernel's socket buffers take a few first
        pub.send_message('t', message)


def test_zmq_slow_subscriber_blocks_the_publisher() -> None:
    from tether.stream.shims.zmq import ZMQPublisher, ZMQSubscriber

    pub = ZMQPublisher('tcp://127.0.0.1:*', hwm=1, timeout=0.2)
    sub = ZMQSubscriber(pub.address, 't', hwm=1)
    pub.wait_for_subscribers('t')
    big = b'x' * (1 << 20)
    with pytest.raises(StreamBackpressureError, match='slow consumer'):
        _send_many(pub, big)
    assert sub.next_message(5) == big
    sub.close()
    pub.close()


def test_amqp_full_queue_refuses_the_publisher(unique_prefix: str) -> None:
    from tether.stream.shims.amqp import AMQPPublisher

    topic = f'{unique_prefix}bp'
    pub = AMQPPublisher(max_length=2)
    try:
        pub.send_message(topic, b'1')
        pub.send_message(topic, b'2')
        with pytest.raises(StreamBackpressureError, match='max_length=2'):
            pub.send_message(topic, b'3')
    finally:
        pub.delete_topic(topic)
        pub.close()


def _consume_in_child(q: Any, out: Any) -> None:
    # The child knows nothing of the store: each event carries its config, and the stream
    # key (from the environment) authenticates the producer that vouches for it.
    consumer = StreamConsumer(QueueSubscriber(q, 't'), timeout=30)
    assert consumer.authenticated
    assert consumer.accept_unknown_stores
    out.put([sum(p) for p in consumer])
    out.close()
    out.join_thread()


def test_consumer_in_another_process_needs_no_store_config(
    redis_connector: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv('TETHER_STREAM_KEY', secrets.token_hex(16))  # inherited by the child
    store = Store('stream-xproc', redis_connector, register=True)
    ctx = multiprocessing.get_context('spawn')
    q, out = ctx.Queue(10), ctx.Queue()
    child = ctx.Process(target=_consume_in_child, args=(q, out))
    child.start()
    with StreamProducer(QueuePublisher({'t': q}), {'t': store}) as producer:
        for i in range(5):
            producer.send('t', list(range(i)))
    assert out.get(timeout=60) == [sum(range(i)) for i in range(5)]
    child.join(30)
    assert child.exitcode == 0


def test_mqtt_forget_session_drops_kept_messages(unique_prefix: str) -> None:
    from tether.exceptions import StreamTimeoutError
    from tether.stream.shims.mqtt import MQTTPublisher, MQTTSubscriber

    topic, session = f'{unique_prefix}forget', f'{unique_prefix}session'
    MQTTSubscriber('127.0.0.1', 1883, topic, session_id=session).close()
    pub = MQTTPublisher('127.0.0.1', 1883)
    pub.send_message(topic, b'kept')
    sub = MQTTSubscriber('127.0.0.1', 1883, topic, session_id=session)
    assert sub.next_message(5) == b'kept'  # the session kept it while we were away
    sub.close()
    pub.send_message(topic, b'dropped')
    sub.forget_session()
    again = MQTTSubscriber('127.0.0.1', 1883, topic, session_id=session)
    with pytest.raises(StreamTimeoutError):
        again.next_message(0.5)
    again.forget_session()
    pub.close()


def test_old_hooks_module_name_is_an_alias() -> None:
    """``tether.stream.plugins`` (the old name) gives the same objects as ``hooks``."""
    from tether.stream import hooks, plugins

    assert plugins.__all__ == hooks.__all__
    assert all(getattr(plugins, n) is getattr(hooks, n) for n in hooks.__all__)
