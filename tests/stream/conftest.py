"""Fixtures of the stream tests: a broker of every kind, a Redis-backed store."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests.conftest import service_up
from tests.stream._brokers import KINDS, Broker

PORTS = {
    'redis': 6379,
    'redis_queue': 6379,
    'nats': 4222,
    'jetstream': 4222,
    'amqp': 5672,
    'mqtt': 1883,
    'mqtt_session': 1883,
}


@pytest.fixture(params=KINDS)
def broker(request: pytest.FixtureRequest, unique_prefix: str) -> Iterator[Broker]:
    kind = request.param
    port = PORTS.get(kind)
    if port is not None and not service_up(port):
        pytest.fail(f'the {kind} broker is not running on 127.0.0.1:{port}: run `make services`')
    b = Broker(kind, unique_prefix)
    yield b
    b.close()


@pytest.fixture
def store(redis_connector: Any, unique_prefix: str) -> Iterator[Any]:
    """A store over Redis with a unique name and key prefix."""
    from tether.store import Store

    s = Store(f'stream-{unique_prefix}', redis_connector, register=True)
    yield s
    s.close()
