"""Shared fixtures: real services on loopback, unique names per test run, cleanup."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from tether.testing import port_open

REDIS_HOST = '127.0.0.1'
REDIS_PORT = 6379

RUN_ID = uuid.uuid4().hex[:8]


# Whether something accepts TCP connections on ``host:port``.
service_up = port_open


@pytest.fixture(scope='session')
def redis_available() -> None:
    if not service_up(REDIS_PORT):
        pytest.fail('Redis is not running on 127.0.0.1:6379: run `make services`')


@pytest.fixture
def unique_prefix() -> str:
    """A key prefix unique to this test (for Redis keys, queues, topics ...)."""
    return f'tether-test-{RUN_ID}-{uuid.uuid4().hex[:8]}:'


@pytest.fixture
def redis_client(redis_available: None) -> Iterator[Any]:
    import redis

    client = redis.Redis(REDIS_HOST, REDIS_PORT)
    yield client
    client.close()


@pytest.fixture
def chunked_redis(redis_client: Any, unique_prefix: str) -> Iterator[Any]:
    """Makes Redis connectors that store values in chunks of the size given (cleaned up)."""
    from tether.connectors.redis import RedisConnector

    made: list[Any] = []

    def make(chunk_size: int) -> Any:
        connector = RedisConnector(
            REDIS_HOST, REDIS_PORT, prefix=unique_prefix, chunk_size=chunk_size
        )
        made.append(connector)
        return connector

    yield make
    for key in redis_client.scan_iter(match=f'{unique_prefix}*'):
        redis_client.delete(key)
    for connector in made:
        connector.close()


def count_keys(client: Any, prefix: str) -> int:
    """Count the Redis keys that start with ``prefix`` (literally: globs escaped)."""
    from tether.connectors._util import glob_escape

    return sum(1 for _ in client.scan_iter(match=f'{glob_escape(prefix)}*', count=1000))


@pytest.fixture
def redis_connector(redis_client: Any, unique_prefix: str) -> Iterator[Any]:
    """A RedisConnector writing keys under a unique prefix, all deleted afterwards."""
    from tether.connectors.redis import RedisConnector

    connector = RedisConnector(REDIS_HOST, REDIS_PORT, prefix=unique_prefix)
    yield connector
    for key in redis_client.scan_iter(match=f'{unique_prefix}*'):
        redis_client.delete(key)
    connector.close()


@pytest.fixture
def shm_namespace() -> Iterator[str]:
    """A shared-memory namespace unique to this test, cleaned afterwards."""
    from tether.connectors.shared_memory import cleanup

    ns = f'test{RUN_ID}{uuid.uuid4().hex[:6]}'
    yield ns
    cleanup(ns)


@pytest.fixture(autouse=True)
def _clean_registry() -> Iterator[None]:
    """Every test starts and ends with an empty store registry."""
    from tether.store import _registry

    before = dict(_registry._stores)
    yield
    for name in list(_registry._stores):
        if name not in before:
            _registry._stores.pop(name, None)


# Parsl starts a pool's first block on the first run of its job-status poller, which
# comes ``Config.strategy_period`` (5 s by default) after the kernel starts: every Parsl
# pool of the tests would wait that long for nothing. Kernels made in this process (and
# in processes forked from it) poll every 0.5 s at most.
PARSL_STRATEGY_PERIOD = 0.5


@pytest.fixture(autouse=True, scope='session')
def _parsl_polls_quickly() -> Iterator[None]:
    try:
        from parsl.dataflow.dflow import DataFlowKernel
    except ImportError:  # pragma: no cover - parsl is a dev dependency
        yield
        return
    original = DataFlowKernel.__init__

    def init(self: Any, config: Any = None, *args: Any, **kwargs: Any) -> None:
        if config is not None:
            config.strategy_period = min(config.strategy_period, PARSL_STRATEGY_PERIOD)
        original(self, config, *args, **kwargs)

    DataFlowKernel.__init__ = init  # type: ignore[method-assign]
    yield
    DataFlowKernel.__init__ = original  # type: ignore[method-assign]


@pytest.fixture
def spans() -> Iterator[Any]:
    """Tether's OpenTelemetry spans on for the test, kept in memory (an
    ``InMemorySpanExporter``); off again after."""
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    from tether import tracing

    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracing.enable(provider)
    try:
        yield exporter
    finally:
        tracing.disable()
