"""The stream shim conformance suite: the tests every broker shim passes (needs pytest).

A shim is a :class:`~tether.stream.Publisher` and a :class:`~tether.stream.Subscriber`
for one broker. To run the suite against yours, write a :class:`ShimHarness` that makes
publishers and subscribers of it, subclass :class:`ShimConformance` in a test module
(its name must start with ``Test``) and give it a fixture named ``shim`` that yields a
harness and closes it::

    import pytest

    from tether.testing.stream import ShimConformance, ShimHarness


    class MyHarness(ShimHarness):
        fanout = True                      # every subscriber of a topic gets every message

        def new_publisher(self):
            return MyPublisher('127.0.0.1', 9999)

        def new_subscriber(self, topic, ident):
            return MySubscriber('127.0.0.1', 9999, topic)


    class TestMyShim(ShimConformance):
        @pytest.fixture
        def shim(self):
            with MyHarness() as harness:
                yield harness

A shim whose messages survive a consumer process that is killed mid-stream (durable
consumer groups, sessions, acknowledgements) also passes :class:`ShimRestartConformance`;
its harness implements :meth:`ShimHarness.subscriber_factory` so that a child process can
build a subscriber of the same identity.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import signal
import time
import uuid
from collections.abc import Callable
from typing import Any

import pytest

from tether._closing import ClosingContext
from tether.exceptions import (
    EventAuthenticationError,
    EventDecodeError,
    EventReplayError,
    ProxyResolveMissingKeyError,
    StreamTimeoutError,
)
from tether.proxy import Proxy, is_resolved
from tether.store import Store
from tether.stream import Publisher, StreamConsumer, StreamProducer, Subscriber, TopicSubscriber
from tether.stream import events as ev
from tether.stream.auth import Signer, resolve_key
from tether.testing._child import consume_and_die

__all__ = ['ShimConformance', 'ShimHarness', 'ShimRestartConformance', 'drain']


def drain(sub: Subscriber, timeout: float = 1.0) -> list[bytes]:
    """Read messages until none arrives for ``timeout`` seconds."""
    out = []
    while True:
        try:
            out.append(sub.next_message(timeout))
        except StreamTimeoutError:
            return out


def _drain_together(subs: list[Subscriber], timeout: float = 1.0) -> list[list[bytes]]:
    """:func:`drain` of each subscriber, the silences waited at once: read them in turn
    until none has received a message for ``timeout`` seconds (one after the other,
    each test waited ``timeout`` per subscriber)."""
    outs: list[list[bytes]] = [[] for _ in subs]
    last = [time.monotonic()] * len(subs)
    while True:
        for i, sub in enumerate(subs):
            try:
                outs[i].append(sub.next_message(0.05))
                last[i] = time.monotonic()
            except StreamTimeoutError:
                pass
        now = time.monotonic()
        if all(now - t >= timeout for t in last):
            return outs


class ShimHarness(ClosingContext):
    """Makes the publishers, subscribers and topics of one shim for one test.

    Implement :meth:`new_publisher` and :meth:`new_subscriber`; set :attr:`durable` and
    :attr:`fanout` to say how the broker behaves; override :meth:`ready` if a subscriber
    needs time to reach publishers, :meth:`make_store` to carry objects through another
    store, and :meth:`cleanup` to delete what the broker keeps for :attr:`topics`. The
    suite calls :meth:`publisher`, :meth:`subscriber` and :meth:`topic`; :meth:`close`
    (or leaving the ``with`` block) closes everything they made.

    Args:
        prefix: Makes this test's topic names (and durable identities) unique; default:
            a random one.

    Attributes:
        durable: Messages sent while no subscriber of the topic is up are kept and
            delivered to the next one.
        fanout: Every subscriber of a topic gets every message (else they share them).
        topics: The topics handed out by :meth:`topic`.
    """

    durable: bool = False
    fanout: bool = False

    def __init__(self, prefix: str | None = None) -> None:
        self.prefix = prefix if prefix is not None else f'tether-shim-{uuid.uuid4().hex[:12]}:'
        self.topics: set[str] = set()
        self.publishers: list[Publisher] = []
        self.subscribers: list[Subscriber] = []
        self._store: Store[Any] | None = None

    # What a harness implements --------------------------------------------------------

    def new_publisher(self) -> Publisher:
        """A new publisher of the shim."""
        raise NotImplementedError(f'{type(self).__name__} must implement new_publisher')

    def new_subscriber(self, topic: str, ident: str, **extra: Any) -> Subscriber:
        """A new subscriber of ``topic``; ``ident`` names its durable identity, if any."""
        raise NotImplementedError(f'{type(self).__name__} must implement new_subscriber')

    def ready(self, topic: str, count: int = 1) -> None:
        """Wait until ``count`` subscribers of ``topic`` receive what publishers send."""

    def subscriber_factory(self, topic: str, ident: str) -> Callable[[], Subscriber]:
        """A picklable callable that builds, in another process, a subscriber of ``topic``.

        It must have the identity of ``subscriber(topic, ident)``; only
        :class:`ShimRestartConformance` needs it.
        """
        raise NotImplementedError(f'{type(self).__name__} must implement subscriber_factory')

    def make_store(self) -> Store[Any]:
        """The store the stream tests carry objects through (default: an in-process one)."""
        return Store(f'{self.prefix.rstrip(":")}-store', register=True)

    def cleanup(self) -> None:
        """Delete what the broker keeps for :attr:`topics` (called by :meth:`close`)."""

    # What the suite uses --------------------------------------------------------------

    def topic(self, name: str = 't') -> str:
        """A topic name unique to this test."""
        topic = f'{self.prefix.rstrip(":")}-{name}'
        self.topics.add(topic)
        return topic

    def publisher(self) -> Publisher:
        """A new publisher, closed by :meth:`close`."""
        pub = self.new_publisher()
        self.publishers.append(pub)
        return pub

    def subscriber(self, topic: str, ident: str = 'c0', **extra: Any) -> Subscriber:
        """A new subscriber of ``topic``, closed by :meth:`close`."""
        sub = self.new_subscriber(topic, ident, **extra)
        self.subscribers.append(sub)
        return sub

    @property
    def store(self) -> Store[Any]:
        """The store of this test (made by :meth:`make_store` on first use)."""
        if self._store is None:
            self._store = self.make_store()
        return self._store

    def close(self) -> None:
        """Close every subscriber, publisher and store made, then :meth:`cleanup`."""
        for s in self.subscribers:
            _quietly(s.close)
        for p in self.publishers:
            _quietly(p.close)
        if self._store is not None:
            _quietly(self._store.close)
            self._store = None
        self.cleanup()


def _quietly(fn: Callable[..., Any], *args: Any) -> None:
    with contextlib.suppress(Exception):
        fn(*args)


class ShimConformance:
    """What every shim does, alone and under StreamProducer and StreamConsumer.

    Needs a fixture ``shim`` that yields a :class:`ShimHarness`.
    """

    def test_implements_the_protocols(self, shim: ShimHarness) -> None:
        topic = shim.topic()
        assert isinstance(shim.subscriber(topic), Subscriber)
        assert isinstance(shim.publisher(), Publisher)

    def test_subscriber_says_which_topics_it_reads(self, shim: ShimHarness) -> None:
        # The consumer's check of a signed message's topic relies on it (declared in
        # tether.stream.protocols.TopicSubscriber, not guessed from attributes).
        topic, other = shim.topic('reads'), shim.topic('not-read')
        sub = shim.subscriber(topic)
        assert isinstance(sub, TopicSubscriber)
        assert sub.accepts_topic(topic)
        assert not sub.accepts_topic(other)

    def test_raw_messages_in_order(self, shim: ShimHarness) -> None:
        topic = shim.topic()
        sub = shim.subscriber(topic)
        pub = shim.publisher()
        shim.ready(topic)
        sent = [f'm{i}'.encode() for i in range(20)] + [bytes(range(256))]
        for m in sent:
            pub.send_message(topic, m)
        assert [sub.next_message(10) for _ in sent] == sent

    def test_stream_yields_lazy_proxies_until_end(self, shim: ShimHarness) -> None:
        topic = shim.topic()
        consumer: StreamConsumer = StreamConsumer(shim.subscriber(topic), timeout=10)
        producer = StreamProducer(shim.publisher(), {topic: shim.store})
        shim.ready(topic)
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

    def test_batches_and_resolved_objects(self, shim: ShimHarness) -> None:
        topic = shim.topic()
        consumer: StreamConsumer = StreamConsumer(shim.subscriber(topic), timeout=10)
        with StreamProducer(shim.publisher(), {topic: shim.store}, batch_size=3) as producer:
            shim.ready(topic)
            for i in range(7):
                producer.send(topic, f'item-{i}', metadata={'i': i})
        assert list(consumer.iter_objects()) == [f'item-{i}' for i in range(7)]

    def test_topics_map_to_stores(self, shim: ShimHarness) -> None:
        store = shim.store
        other: Store[Any] = Store(f'{store.name}-other', register=True)  # local, for topic b
        ta, tb = shim.topic('a'), shim.topic('b')
        ca: StreamConsumer = StreamConsumer(shim.subscriber(ta, 'ca'), timeout=10)
        cb: StreamConsumer = StreamConsumer(shim.subscriber(tb, 'cb'), timeout=10)
        with StreamProducer(shim.publisher(), {ta: store}, default_store=other) as producer:
            shim.ready(ta)
            shim.ready(tb)
            producer.send(ta, 'to-a')
            producer.send(tb, 'to-b')
        ma = ca.next_event()
        assert ma.store_config['name'] == store.name
        mb = cb.next_event()
        assert mb.store_config['name'] == other.name
        pa = ca.store_of(ma).get(ma.key)
        assert (pa, cb.store_of(mb).get(mb.key)) == ('to-a', 'to-b')
        other.close()

    def test_garbage_raises_a_clear_error(self, shim: ShimHarness) -> None:
        topic = shim.topic()
        consumer: StreamConsumer = StreamConsumer(shim.subscriber(topic), timeout=10)
        pub = shim.publisher()
        shim.ready(topic)
        pub.send_message(topic, b'\x80garbage')
        pub.send_message(topic, b'\x80garbage')
        with pytest.raises(EventAuthenticationError, match='unsigned'):
            consumer.next()  # with a stream key (the default), refused before parsing
        consumer.close(close_subscriber=False)
        unsigned: StreamConsumer = StreamConsumer(consumer.subscriber, key=False, timeout=10)
        with pytest.raises(EventDecodeError, match='not a tether stream event'):
            unsigned.next()

    def test_message_replayed_onto_another_topic_is_refused(self, shim: ShimHarness) -> None:
        topic, other = shim.topic('signed-for'), shim.topic('replayed-on')
        consumer: StreamConsumer = StreamConsumer(shim.subscriber(other), timeout=10)
        pub = shim.publisher()
        shim.ready(other)
        key = resolve_key(None)
        assert key is not None
        signer = Signer(key, namespace=consumer.namespace)
        pub.send_message(other, ev.encode([ev.EndOfStreamEvent(topic)], signer=signer))
        pub.send_message(other, ev.encode([ev.EndOfStreamEvent(other)], signer=signer))
        with pytest.raises(EventReplayError, match='replayed onto another topic'):
            consumer.next()
        with pytest.raises(StopIteration):  # its own topic's message is accepted
            consumer.next()

    def test_timeout_when_nothing_comes(self, shim: ShimHarness) -> None:
        topic = shim.topic()
        consumer: StreamConsumer = StreamConsumer(shim.subscriber(topic), timeout=0.3)
        with pytest.raises(StreamTimeoutError, match=topic):
            consumer.next()

    def test_evicted_object_raises_when_resolved(self, shim: ShimHarness) -> None:
        store = shim.store
        topic = shim.topic()
        consumer: StreamConsumer = StreamConsumer(shim.subscriber(topic), timeout=10)
        with StreamProducer(shim.publisher(), {topic: store}) as producer:
            shim.ready(topic)
            producer.send(topic, 'gone', evict=True)
        event = consumer.next_event()
        store.evict(event.key)
        proxy = consumer.store_of(event).proxy_from_key(event.key, evict=event.evict)
        with pytest.raises(ProxyResolveMissingKeyError, match='evicted'):
            str(proxy)

    def test_two_producers_one_topic(self, shim: ShimHarness) -> None:
        store = shim.store
        topic = shim.topic()
        p1, p2 = shim.publisher(), shim.publisher()
        consumer: StreamConsumer = StreamConsumer(
            shim.subscriber(topic),
            timeout=10,
            end_events=2,
        )
        shim.ready(topic)
        with StreamProducer(p1, {topic: store}) as a, StreamProducer(p2, {topic: store}) as b:
            for i in range(4):
                a.send(topic, ('a', i))
                b.send(topic, ('b', i))
        got = list(consumer.iter_objects())
        assert sorted(got) == sorted([('a', i) for i in range(4)] + [('b', i) for i in range(4)])
        assert [x for x in got if x[0] == 'a'] == [('a', i) for i in range(4)]

    def test_two_consumers_share_or_fan_out(self, shim: ShimHarness) -> None:
        topic = shim.topic()
        s1 = shim.subscriber(topic, 'c1')
        s2 = shim.subscriber(topic, 'c2')
        pub = shim.publisher()
        shim.ready(topic, 2)
        sent = [f'm{i}'.encode() for i in range(10)]
        for m in sent:
            pub.send_message(topic, m)
        got1, got2 = _drain_together([s1, s2])
        if shim.fanout:
            assert got1 == sent
            assert got2 == sent
        else:
            assert sorted(got1 + got2) == sorted(sent)

    def test_messages_while_consumer_down(self, shim: ShimHarness) -> None:
        """Durable shims keep messages sent while the consumer is down; others lose them."""
        topic = shim.topic()
        first = shim.subscriber(topic)
        pub = shim.publisher()
        shim.ready(topic)
        first.close()
        shim.ready(topic)  # e.g. ZeroMQ: the publisher has seen the subscriber go
        pub.send_message(topic, b'while-down')
        again = shim.subscriber(topic)
        shim.ready(topic)
        pub.send_message(topic, b'after')
        got = drain(again)
        if shim.durable:
            assert got == [b'while-down', b'after']
        else:
            assert got == [b'after']


class ShimRestartConformance:
    """What a shim that survives a killed consumer process does.

    Needs a fixture ``shim`` that yields a :class:`ShimHarness` implementing
    :meth:`~ShimHarness.subscriber_factory`.
    """

    def test_killed_consumer_resumes(self, shim: ShimHarness) -> None:
        """A consumer killed mid-stream and restarted loses nothing and repeats at most one."""
        topic = shim.topic()
        shim.subscriber(topic).close()  # creates the durable group / consumer / session
        pub = shim.publisher()
        sent = [f'm{i}'.encode() for i in range(10)]
        for m in sent:
            pub.send_message(topic, m)
        ctx = multiprocessing.get_context('spawn')
        out = ctx.Queue()
        child = ctx.Process(
            target=consume_and_die,
            args=(shim.subscriber_factory(topic, 'c0'), 3, out),
        )
        child.start()
        before = [out.get(timeout=60) for _ in range(3)]
        child.join(60)
        assert child.exitcode == -signal.SIGKILL
        after = drain(shim.subscriber(topic), timeout=3.0)
        assert before == sent[:3]
        assert sorted(set(before + after)) == sorted(sent)
        # The message being handled when the consumer died is the only one seen twice.
        assert len(before + after) - len(sent) <= 1
