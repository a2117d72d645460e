"""A harness per broker shim for the conformance suite (tether.testing.stream).

To add a shim to the suite, add its kind to ``KINDS`` (and to ``DURABLE``, ``FANOUT`` or
``RESTARTABLE`` as it behaves) and build its publisher and subscriber in
:meth:`Broker.new_publisher` and :func:`make_subscriber`.
"""

from __future__ import annotations

import collections
import contextlib
import functools
import multiprocessing
import queue
import time
from collections.abc import Callable
from typing import Any

from tether.store import Store
from tether.stream.protocols import Publisher, Subscriber
from tether.testing.stream import ShimHarness

REDIS = ('127.0.0.1', 6379)
NATS = 'nats://127.0.0.1:4222'
AMQP = 'amqp://guest:guest@127.0.0.1:5672/'
MQTT = ('127.0.0.1', 1883)

KINDS = [
    'queue',
    'multiprocessing',
    'redis',
    'redis_queue',
    'zmq',
    'nats',
    'jetstream',
    'amqp',
    'mqtt',
    'mqtt_session',
]
# Messages sent while a subscriber is down are kept (and replayed) for these.
DURABLE = {'queue', 'multiprocessing', 'redis_queue', 'jetstream', 'amqp', 'mqtt_session'}
# Several subscribers of one topic each get every message (else they share them).
FANOUT = {'redis', 'zmq', 'nats', 'mqtt', 'mqtt_session'}
# Durable across processes: a killed consumer's messages come back on restart.
RESTARTABLE = ['redis_queue', 'jetstream', 'amqp', 'mqtt_session']


def make_subscriber(kind: str, topic: str, ident: str, **extra: Any) -> Subscriber:
    """Build a subscriber of ``kind`` (network brokers only: used in child processes)."""
    if kind == 'redis':
        from tether.stream.shims.redis import RedisSubscriber

        return RedisSubscriber(*REDIS, topic)
    if kind == 'redis_queue':
        from tether.stream.shims.redis import RedisQueueSubscriber

        return RedisQueueSubscriber(*REDIS, topic, consumer=ident, **extra)
    if kind == 'nats':
        from tether.stream.shims.nats import NatsSubscriber

        return NatsSubscriber(NATS, topic)
    if kind == 'jetstream':
        from tether.stream.shims.nats import JetStreamSubscriber

        extra.setdefault('ack_wait', 1.0)
        return JetStreamSubscriber(NATS, topic, **extra)
    if kind == 'amqp':
        from tether.stream.shims.amqp import AMQPSubscriber

        return AMQPSubscriber(AMQP, topic)
    if kind == 'mqtt':
        from tether.stream.shims.mqtt import MQTTSubscriber

        return MQTTSubscriber(*MQTT, topic)
    if kind == 'mqtt_session':
        from tether.stream.shims.mqtt import MQTTSubscriber

        return MQTTSubscriber(*MQTT, topic, session_id=f'tether-test-{ident}')
    raise ValueError(kind)


class Broker(ShimHarness):
    """Publishers and subscribers of one kind, cleaned up at the end of a test."""

    def __init__(self, kind: str, prefix: str) -> None:
        super().__init__(prefix)
        self.kind = kind
        self.durable = kind in DURABLE
        self.fanout = kind in FANOUT
        self._queues: dict[str, Any] | None = None
        self._spare: Any = None  # a ZeroMQ publisher made early for a subscriber to reach
        if kind == 'queue':
            self._queues = collections.defaultdict(lambda: queue.Queue(1000))
        elif kind == 'multiprocessing':
            ctx = multiprocessing.get_context('spawn')
            self._queues = collections.defaultdict(lambda: ctx.Queue(1000))

    def make_store(self) -> Store[Any]:
        """A store over Redis with a unique name and key prefix."""
        from tether.connectors.redis import RedisConnector

        connector = RedisConnector(*REDIS, prefix=self.prefix, clear=True)  # keys go at close
        return Store(f'stream-{self.prefix}', connector, register=True)

    def publisher(self) -> Publisher:
        """A new publisher (the ZeroMQ one a subscriber was made to reach, first)."""
        if self._spare is not None:
            pub, self._spare = self._spare, None
            return pub  # type: ignore[no-any-return]
        return super().publisher()

    def new_publisher(self) -> Publisher:
        """A new publisher of this kind."""
        pub: Any
        if self.kind in ('queue', 'multiprocessing'):
            from tether.stream.shims.queue import QueuePublisher

            assert self._queues is not None
            pub = QueuePublisher(self._queues, timeout=5)
        elif self.kind == 'redis':
            from tether.stream.shims.redis import RedisPublisher

            pub = RedisPublisher(*REDIS)
        elif self.kind == 'redis_queue':
            from tether.stream.shims.redis import RedisQueuePublisher

            pub = RedisQueuePublisher(*REDIS)
        elif self.kind == 'zmq':
            from tether.stream.shims.zmq import ZMQPublisher

            pub = ZMQPublisher('tcp://127.0.0.1:*')
        elif self.kind == 'nats':
            from tether.stream.shims.nats import NatsPublisher

            pub = NatsPublisher(NATS)
        elif self.kind == 'jetstream':
            from tether.stream.shims.nats import JetStreamPublisher

            pub = JetStreamPublisher(NATS)
        elif self.kind == 'amqp':
            from tether.stream.shims.amqp import AMQPPublisher

            pub = AMQPPublisher(AMQP)
        elif self.kind in ('mqtt', 'mqtt_session'):
            from tether.stream.shims.mqtt import MQTTPublisher

            pub = MQTTPublisher(*MQTT)
        else:  # pragma: no cover
            raise ValueError(self.kind)
        return pub  # type: ignore[no-any-return]

    def new_subscriber(self, topic: str, ident: str, **extra: Any) -> Subscriber:
        """A new subscriber of ``topic`` (``ident`` names a durable identity)."""
        sub: Any
        if self.kind in ('queue', 'multiprocessing'):
            from tether.stream.shims.queue import QueueSubscriber

            assert self._queues is not None
            sub = QueueSubscriber(self._queues[topic], topic)
        elif self.kind == 'zmq':
            from tether.stream.shims.zmq import ZMQSubscriber

            if not self.publishers:
                self._spare = self.publisher()
            sub = ZMQSubscriber([p.address for p in self.publishers], topic)
        else:
            sub = make_subscriber(self.kind, topic, f'{self.prefix}{ident}', **extra)
        return sub  # type: ignore[no-any-return]

    def subscriber_factory(self, topic: str, ident: str) -> Callable[[], Subscriber]:
        """Builds ``subscriber(topic, ident)`` in another process (network brokers)."""
        return functools.partial(make_subscriber, self.kind, topic, f'{self.prefix}{ident}')

    def ready(self, topic: str, count: int = 1) -> None:
        """Wait until ``count`` subscribers of ``topic`` reach every publisher."""
        if self.kind == 'zmq':
            expected = sum(1 for s in self.subscribers if s.topic == topic and not s._closed)
            deadline = time.monotonic() + 10
            for p in self.publishers:
                while p.subscribers(topic) != expected:
                    assert time.monotonic() < deadline, 'ZeroMQ subscribers did not settle'
                    time.sleep(0.01)

    def cleanup(self) -> None:
        """Delete what the brokers keep for this test."""
        if self.kind == 'redis_queue':
            import redis

            client = redis.Redis(*REDIS)
            for t in self.topics:
                client.delete(f'tether-stream:{t}')
            client.close()
        elif self.kind == 'jetstream':
            from tether.stream.shims.nats import JetStreamPublisher

            pub = JetStreamPublisher(NATS)
            for t in self.topics:
                _quietly(pub.delete_topic, t)
            pub.close()
        elif self.kind == 'amqp':
            from tether.stream.shims.amqp import AMQPPublisher

            apub = AMQPPublisher(AMQP)
            for t in self.topics:
                _quietly(apub.delete_topic, t)
            apub.close()
        elif self.kind == 'mqtt_session':
            for s in self.subscribers:
                _quietly(s.forget_session)


def _quietly(fn: Callable[..., Any], *args: Any) -> None:
    with contextlib.suppress(Exception):
        fn(*args)
