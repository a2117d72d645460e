"""Fixtures of the stream tests: a harness of every broker kind (tests/stream/_brokers.py)."""

from __future__ import annotations

from collections.abc import Iterator

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
    """A harness of every broker kind (the ``shim`` of the conformance suite)."""
    kind = request.param
    port = PORTS.get(kind)
    if port is not None and not service_up(port):
        pytest.fail(f'the {kind} broker is not running on 127.0.0.1:{port}: run `make services`')
    with Broker(kind, unique_prefix) as b:
        yield b
