"""The conformance suite: every broker shim passes these tests against its real broker."""

from __future__ import annotations

import multiprocessing
import os
import signal
from typing import Any

import pytest

from tests.stream._brokers import RESTARTABLE, Broker, make_subscriber
from tether.exceptions import (
    EventDecodeError,
    ProxyResolveMissingKeyError,
    StreamTimeoutError,
)
from tether.proxy import Proxy, is_resolved
from tether.stream import Publisher, StreamConsumer, StreamProducer, Subscriber


def drain(sub: Subscriber, timeout: float = 1.0) -> list[bytes]:
    """Read messages until none arrives for ``timeout`` seconds."""
    out = []
    while True:
        try:
            out.append(sub.next_message(timeout))
        except StreamTimeoutError:
            return out


def test_implements_the_protocols(broker: Broker) -> None:
    topic = broker.topic()
    assert isinstance(broker.subscriber(topic), Subscriber)
    assert isinstance(broker.publisher(), Publisher)


def test_raw_messages_in_order(broker: Broker) -> None:
    topic = broker.topic()
    sub = broker.subscriber(topic)
    pub = broker.publisher()
    broker.ready(topic)
    sent = [f'm{i}'.encode() for i in range(20)] + [bytes(range(256))]
    for m in sent:
        pub.send_message(topic, m)
    assert [sub.next_message(10) for _ in sent] == sent


def test_stream_yields_lazy_proxies_until_end(broker: Broker, store: Any) -> None:
    topic = broker.topic()
    consumer = StreamConsumer(broker.subscriber(topic), timeout=10)
    producer = StreamProducer(broker.publisher(), {topic: store})
    broker.ready(topic)
    for i in range(5):
        producer.send(topic, [i] * 3, metadata={'i': i}, evict=False)
    producer.close()
    got = []
    for meta, proxy in consumer.iter_with_metadata():
        assert isinstance(proxy, Proxy)
        assert not is_resolved(proxy)
        got.append((meta['i'], list(proxy)))
    assert got == [(i, [i] * 3) for i in range(5)]
    assert consumer.ended


def test_batches_and_resolved_objects(broker: Broker, store: Any) -> None:
    topic = broker.topic()
    consumer = StreamConsumer(broker.subscriber(topic), timeout=10)
    with StreamProducer(broker.publisher(), {topic: store}, batch_size=3) as producer:
        broker.ready(topic)
        for i in range(7):
            producer.send(topic, f'item-{i}', metadata={'i': i})
    assert list(consumer.iter_objects()) == [f'item-{i}' for i in range(7)]


def test_topics_map_to_stores(broker: Broker, store: Any) -> None:
    from tether.store import Store

    other: Store[Any] = Store(f'{store.name}-other', register=True)  # a local store for topic b
    ta, tb = broker.topic('a'), broker.topic('b')
    ca = StreamConsumer(broker.subscriber(ta, 'ca'), timeout=10)
    cb = StreamConsumer(broker.subscriber(tb, 'cb'), timeout=10)
    with StreamProducer(broker.publisher(), {ta: store}, default_store=other) as producer:
        broker.ready(ta)
        broker.ready(tb)
        producer.send(ta, 'to-a')
        producer.send(tb, 'to-b')
    ma = ca.next_event()
    assert ma.store_config['name'] == store.name
    mb = cb.next_event()
    assert mb.store_config['name'] == other.name
    pa = ca.store_of(ma).get(ma.key)
    assert (pa, cb.store_of(mb).get(mb.key)) == ('to-a', 'to-b')


def test_garbage_raises_a_clear_error(broker: Broker) -> None:
    topic = broker.topic()
    consumer = StreamConsumer(broker.subscriber(topic), timeout=10)
    pub = broker.publisher()
    broker.ready(topic)
    pub.send_message(topic, b'\x80garbage')
    with pytest.raises(EventDecodeError, match='not a tether stream event'):
        consumer.next()


def test_timeout_when_nothing_comes(broker: Broker) -> None:
    topic = broker.topic()
    consumer = StreamConsumer(broker.subscriber(topic), timeout=0.3)
    with pytest.raises(StreamTimeoutError, match=topic):
        consumer.next()


def test_evicted_object_raises_when_resolved(broker: Broker, store: Any) -> None:
    topic = broker.topic()
    consumer = StreamConsumer(broker.subscriber(topic), timeout=10)
    with StreamProducer(broker.publisher(), {topic: store}) as producer:
        broker.ready(topic)
        producer.send(topic, 'gone', evict=True)
    event = consumer.next_event()
    store.evict(event.key)
    proxy = consumer.store_of(event).proxy_from_key(event.key, evict=event.evict)
    with pytest.raises(ProxyResolveMissingKeyError, match='evicted'):
        str(proxy)


def test_two_producers_one_topic(broker: Broker, store: Any) -> None:
    topic = broker.topic()
    p1, p2 = broker.publisher(), broker.publisher()
    consumer = StreamConsumer(broker.subscriber(topic), timeout=10, end_events=2)
    broker.ready(topic)
    with StreamProducer(p1, {topic: store}) as a, StreamProducer(p2, {topic: store}) as b:
        for i in range(4):
            a.send(topic, ('a', i))
            b.send(topic, ('b', i))
    got = list(consumer.iter_objects())
    assert sorted(got) == sorted([('a', i) for i in range(4)] + [('b', i) for i in range(4)])
    assert [x for x in got if x[0] == 'a'] == [('a', i) for i in range(4)]


def test_two_consumers_share_or_fan_out(broker: Broker) -> None:
    topic = broker.topic()
    s1 = broker.subscriber(topic, 'c1')
    s2 = broker.subscriber(topic, 'c2')
    pub = broker.publisher()
    broker.ready(topic, 2)
    sent = [f'm{i}'.encode() for i in range(10)]
    for m in sent:
        pub.send_message(topic, m)
    got1, got2 = drain(s1), drain(s2)
    if broker.fanout:
        assert got1 == sent
        assert got2 == sent
    else:
        assert sorted(got1 + got2) == sorted(sent)


def test_messages_while_consumer_down(broker: Broker) -> None:
    """Durable shims keep messages sent while the consumer is down; others lose them."""
    topic = broker.topic()
    first = broker.subscriber(topic)
    pub = broker.publisher()
    broker.ready(topic)
    first.close()
    broker.ready(topic)  # ZeroMQ: the publisher has seen the subscriber go
    pub.send_message(topic, b'while-down')
    again = broker.subscriber(topic)
    broker.ready(topic)
    pub.send_message(topic, b'after')
    got = drain(again)
    if broker.durable:
        assert got == [b'while-down', b'after']
    else:
        assert got == [b'after']


def _consume_and_die(kind: str, topic: str, ident: str, count: int, out: Any) -> None:
    sub = make_subscriber(kind, topic, ident)
    for _ in range(count):
        out.put(sub.next_message(10))
    out.close()
    out.join_thread()  # the messages reach the parent before the kill
    os.kill(os.getpid(), signal.SIGKILL)


@pytest.mark.parametrize('broker', RESTARTABLE, indirect=True)
def test_killed_consumer_resumes(broker: Broker) -> None:
    """A consumer killed mid-stream and restarted loses nothing and repeats at most one."""
    topic = broker.topic()
    broker.subscriber(topic).close()  # creates the durable group / consumer / session
    pub = broker.publisher()
    sent = [f'm{i}'.encode() for i in range(10)]
    for m in sent:
        pub.send_message(topic, m)
    ctx = multiprocessing.get_context('spawn')
    out = ctx.Queue()
    child = ctx.Process(
        target=_consume_and_die,
        args=(broker.kind, topic, f'{broker.prefix}c0', 3, out),
    )
    child.start()
    before = [out.get(timeout=60) for _ in range(3)]
    child.join(60)
    assert child.exitcode == -signal.SIGKILL
    after = drain(broker.subscriber(topic), timeout=3.0)
    assert before == sent[:3]
    assert sorted(set(before + after)) == sorted(sent)
    # The message being handled when the consumer died is the only one seen twice.
    assert len(before + after) - len(sent) <= 1
