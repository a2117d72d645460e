"""A broker that stops mid-stream: producer and consumer raise clear errors, no hang.

Each test starts a private broker on a free port and kills it (the shared brokers are
never touched). Every wait below is bounded by the shims' client timeouts; the test
timeout (120 s) would catch a hang.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.stream._servers import mosquitto_args, nats_args, rabbitmq
from tether.exceptions import StreamBrokerError
from tether.stream import StreamConsumer, StreamProducer
from tether.testing import RedisServer, ServerProcess, free_port


def _send_until_error(producer: StreamProducer, topic: str) -> None:
    for _ in range(100):  # a publisher may hand a few messages to the OS first
        producer.send(topic, 'after')


def _stream_then_kill(server: Any, publisher: Any, subscriber: Any, store: Any) -> None:
    topic = 'down'
    consumer = StreamConsumer(subscriber, timeout=None)
    producer = StreamProducer(publisher, {topic: store})
    producer.send(topic, 'before', evict=False)
    assert consumer.next_object() == 'before'
    server.stop()
    with pytest.raises(StreamBrokerError, match=r'127\.0\.0\.1'):
        _send_until_error(producer, topic)
    with pytest.raises(StreamBrokerError):
        consumer.next()
    producer.close(close_topics=False)
    consumer.close()


@pytest.fixture
def local_store() -> Any:
    from tether.store import Store

    store: Store[Any]
    with Store('stream-broker-down', register=True) as store:
        yield store


@pytest.mark.parametrize('durable', [False, True])
def test_redis_stops(durable: bool, local_store: Any) -> None:
    from tether.stream.shims import redis as shim

    with RedisServer() as server:
        port = server.port
        opts: dict[str, Any] = {'socket_timeout': 2, 'connect_timeout': 1, 'retries': 1}
        if durable:
            pub: Any = shim.RedisQueuePublisher('127.0.0.1', port, **opts)
            sub: Any = shim.RedisQueueSubscriber('127.0.0.1', port, 'down', **opts)
        else:
            pub = shim.RedisPublisher('127.0.0.1', port, **opts)
            sub = shim.RedisSubscriber('127.0.0.1', port, 'down', **opts)
        _stream_then_kill(server, pub, sub, local_store)


@pytest.mark.parametrize('jetstream', [False, True])
def test_nats_stops(jetstream: bool, local_store: Any, tmp_path: Path) -> None:
    from tether.stream.shims import nats as shim

    port = free_port()
    url = f'nats://127.0.0.1:{port}'
    opts: dict[str, Any] = {'timeout': 3, 'max_reconnect_attempts': 2, 'reconnect_time_wait': 0.2}
    with ServerProcess(nats_args(port, tmp_path), port) as server:
        if jetstream:
            pub: Any = shim.JetStreamPublisher(url, **opts)
            sub: Any = shim.JetStreamSubscriber(url, 'down', **opts)
        else:
            pub = shim.NatsPublisher(url, **opts)
            sub = shim.NatsSubscriber(url, 'down', **opts)
        _stream_then_kill(server, pub, sub, local_store)


def test_mqtt_stops(local_store: Any) -> None:
    from tether.stream.shims import mqtt as shim

    port = free_port()
    with ServerProcess(mosquitto_args(port), port) as server:
        pub = shim.MQTTPublisher('127.0.0.1', port, timeout=3)
        sub = shim.MQTTSubscriber('127.0.0.1', port, 'down', timeout=3)
        _stream_then_kill(server, pub, sub, local_store)


def test_zmq_publisher_goes_away(local_store: Any) -> None:
    from tether.stream.shims import zmq as shim

    pub = shim.ZMQPublisher('tcp://127.0.0.1:*')
    sub = shim.ZMQSubscriber(pub.address, 'down')
    consumer = StreamConsumer(sub, timeout=None)
    producer = StreamProducer(pub, {'down': local_store})
    pub.wait_for_subscribers('down')
    producer.send('down', 'before', evict=False)
    assert consumer.next_object() == 'before'
    producer.close(close_topics=False)  # closes the publisher: the "broker" is gone
    with pytest.raises(StreamBrokerError, match='disconnected'):
        consumer.next()
    consumer.close()


def test_amqp_stops(local_store: Any, tmp_path: Path) -> None:
    from tether.stream.shims import amqp as shim

    port = free_port()
    args, env = rabbitmq(port, tmp_path)
    url = f'amqp://guest:guest@127.0.0.1:{port}/'
    with ServerProcess(args, port, env=env) as server:
        pub = shim.AMQPPublisher(url, timeout=5)
        sub = shim.AMQPSubscriber(url, 'down', timeout=5)
        _stream_then_kill(server, pub, sub, local_store)


def test_amqp_broker_unreachable() -> None:
    from tether.stream.shims import amqp as shim

    url = f'amqp://guest:guest@127.0.0.1:{free_port()}/'
    with pytest.raises(StreamBrokerError, match='is it up'):
        shim.AMQPPublisher(url, timeout=3)
    with pytest.raises(StreamBrokerError, match='is it up'):
        shim.AMQPSubscriber(url, 'down', timeout=3)


def test_redis_unreachable_at_start() -> None:
    from tether.stream.shims.redis import RedisPublisher, RedisSubscriber

    port = free_port()
    with pytest.raises(StreamBrokerError, match=f'127.0.0.1:{port}'):
        RedisSubscriber('127.0.0.1', port, 't', connect_timeout=1, retries=0)
    pub = RedisPublisher('127.0.0.1', port, connect_timeout=1, retries=0)
    with pytest.raises(StreamBrokerError, match='unreachable'):
        pub.send_message('t', b'x')
    pub.close()
