"""What figure 4.6 imports, mapped onto tether and this machine."""

from __future__ import annotations

import os
from concurrent.futures import ProcessPoolExecutor
from typing import Any

from tether.connectors.redis import RedisConnector
from tether.stream.shims.redis import RedisQueuePublisher, RedisQueueSubscriber

# Streams and objects of one run share a unique prefix (set by the test before the run).
PREFIX_ENV = 'TETHER_FIG46_PREFIX'


class Executor(ProcessPoolExecutor):
    """Stands in for ``globus_compute_sdk.Executor``: the endpoint is this machine."""

    def __init__(self, endpoint_id: str) -> None:
        import multiprocessing

        super().__init__(max_workers=2, mp_context=multiprocessing.get_context('spawn'))
        self.endpoint_id = endpoint_id


def FooConnector(*args: Any, **kwargs: Any) -> RedisConnector:  # noqa: N802
    """Stands in for the figure's ``FooConnector``: Redis, keys under the run's prefix."""
    return RedisConnector('127.0.0.1', 6379, prefix=os.environ.get(PREFIX_ENV, 'tether-fig46:'))


class KafkaPublisher(RedisQueuePublisher):
    """Stands in for ``KafkaPublisher``: Redis streams, durable like Kafka topics."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__('127.0.0.1', 6379, prefix=os.environ.get(PREFIX_ENV, 'tether-fig46:'))


class KafkaSubscriber(RedisQueueSubscriber):
    """Stands in for ``KafkaSubscriber``."""

    def __init__(self, topic: str, *args: Any, **kwargs: Any) -> None:
        super().__init__(
            '127.0.0.1',
            6379,
            topic,
            prefix=os.environ.get(PREFIX_ENV, 'tether-fig46:'),
        )
