"""Tasks and the producer of bench_stream.py (a module, so workers import it by name)."""

from __future__ import annotations

import time
from typing import Any


def simulate(item: Any, sleep_s: float) -> int:
    """The compute task: use the item (resolving a proxy), then sleep ``sleep_s``."""
    n = len(item)
    time.sleep(sleep_s)
    return n


def produce(spec: dict[str, Any]) -> None:
    """Publish ``count`` items of ``size`` bytes at ``rate`` items/s, then end the stream.

    ``spec`` holds ``mode``, ``redis_port``, ``topic``, ``size``, ``count``, ``rate``,
    ``store_kind`` and ``prefix``.
    """
    mode, redis_port, topic = spec['mode'], spec['redis_port'], spec['topic']
    size, count, rate = spec['size'], spec['count'], spec['rate']
    store_kind, prefix = spec['store_kind'], spec['prefix']
    payload = bytearray(size)
    period = 1.0 / rate
    start = time.perf_counter()
    if mode == 'baseline':
        import redis

        client = redis.Redis('127.0.0.1', redis_port)
        for i in range(count):
            _pace(start, i, period)
            payload[:8] = i.to_bytes(8, 'little')
            client.publish(topic, bytes(payload))
        client.publish(topic, b'')  # end of stream
        client.close()
        return

    from tether.store import Store
    from tether.stream import StreamProducer
    from tether.stream.shims.redis import RedisPublisher

    connector: Any
    if store_kind == 'redis':
        from tether.connectors.redis import RedisConnector

        connector = RedisConnector('127.0.0.1', redis_port, prefix=prefix)
    else:
        from tether.connectors.shared_memory import SharedMemoryConnector

        connector = SharedMemoryConnector(namespace=prefix.strip(':').replace('-', '_'))
    store = Store(f'bench-stream-{prefix}', connector, register=True)
    publisher = RedisPublisher('127.0.0.1', redis_port)
    with StreamProducer(publisher, {topic: store}) as producer:
        for i in range(count):
            _pace(start, i, period)
            payload[:8] = i.to_bytes(8, 'little')
            producer.send(topic, bytes(payload), metadata={'i': i}, evict=True)


def _pace(start: float, i: int, period: float) -> None:
    delay = start + i * period - time.perf_counter()
    if delay > 0:
        time.sleep(delay)


def warm(item: Any, sleep_s: float) -> int:
    """Import what resolving a proxy needs, so the first measured tasks do not pay it."""
    import redis  # noqa: F401

    import tether.connectors.redis
    import tether.connectors.shared_memory
    import tether.store  # noqa: F401

    return simulate(item, sleep_s)
