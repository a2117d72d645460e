"""The program of figure 4.6 of the dissertation, with only its imports changed.

The figure's ``...`` placeholders are filled in (a store name and connector, ten items, a
topic), Globus Compute's ``Executor`` is a process pool on this machine, and Redis
streams (the durable Redis shim) stand in for Kafka. The program is otherwise as printed.
"""

from __future__ import annotations

from tests.stream._fig46_compat import (  # was: ...kafka
    Executor,  # was: globus_compute_sdk
    FooConnector,  # was: proxystore.connector.foo
    KafkaPublisher,
    KafkaSubscriber,
)
from tether.proxy import Proxy
from tether.store import Store
from tether.stream import StreamConsumer, StreamProducer


def producer() -> None:
    store = {'topic': Store('fig46', FooConnector())}
    publisher = KafkaPublisher()

    with StreamProducer(publisher, store) as producer:
        for item in range(10):
            producer.send('topic', item)


def consumer() -> list[int]:
    subscriber = KafkaSubscriber('topic')
    items = []

    with StreamConsumer(subscriber) as consumer:
        for item in consumer:
            assert isinstance(item, Proxy)
            items.append(int(item))
    return items


def main() -> list[int]:
    with Executor('<Endpoint UUID>') as client:
        t1 = client.submit(producer)
        t2 = client.submit(consumer)

        t1.result(), t2.result()
        return t2.result()
