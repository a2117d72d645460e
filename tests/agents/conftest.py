"""Exchange factories for the agent tests: one list, every exchange (the conformance suite
is parametrized over it), each with a unique Redis prefix cleaned up afterwards."""

from __future__ import annotations

import os
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from tests.conftest import REDIS_HOST, REDIS_PORT, RUN_ID


def _cleanup(prefix: str) -> None:
    import redis

    client = redis.Redis(REDIS_HOST, REDIS_PORT)
    keys = list(client.scan_iter(match=f'{prefix}*', count=1000))
    if keys:
        client.delete(*keys)
    client.close()


def thread_exchange(prefix: str, **kwargs: Any) -> Any:
    from tether.agents.exchange import ThreadExchange

    return ThreadExchange()


def redis_exchange(prefix: str, **kwargs: Any) -> Any:
    from tether.agents.exchange import RedisExchange

    return RedisExchange(REDIS_HOST, REDIS_PORT, prefix=prefix, **kwargs)


def hybrid_exchange(prefix: str, **kwargs: Any) -> Any:
    from tether.agents.exchange import HybridExchange

    return HybridExchange(REDIS_HOST, REDIS_PORT, prefix=prefix, **kwargs)


EXCHANGE_FACTORIES: dict[str, Callable[..., Any]] = {
    'thread': thread_exchange,
    'redis': redis_exchange,
    'hybrid': hybrid_exchange,
}
"""Every exchange the conformance suite runs against (add a factory to add an exchange)."""

DISTRIBUTED = ('redis', 'hybrid')


@pytest.fixture
def agent_prefix(redis_available: None) -> Iterator[str]:
    prefix = f'tether-test-{RUN_ID}-agents-{uuid.uuid4().hex[:8]}:'
    yield prefix
    _cleanup(prefix)


@pytest.fixture
def make_exchange(agent_prefix: str) -> Iterator[Callable[..., Any]]:
    """Build exchanges by kind; each is closed (and its keys deleted) after the test."""
    made: list[Any] = []

    def make(kind: str, **kwargs: Any) -> Any:
        exchange = EXCHANGE_FACTORIES[kind](agent_prefix, **kwargs)
        made.append(exchange)
        return exchange

    yield make
    for exchange in made:
        exchange.close()


@pytest.fixture(params=sorted(EXCHANGE_FACTORIES))
def exchange(request: pytest.FixtureRequest, make_exchange: Callable[..., Any]) -> Any:
    """Each exchange in turn."""
    return make_exchange(request.param)


@pytest.fixture(params=DISTRIBUTED)
def distributed_exchange(request: pytest.FixtureRequest, make_exchange: Callable[..., Any]) -> Any:
    """The exchanges that reach other processes."""
    return make_exchange(request.param)


@pytest.fixture
def agents_home(tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> Any:
    """A private agents home (state files, daemon records)."""
    home = tmp_path / 'agents-home'
    monkeypatch.setenv('TETHER_AGENTS_HOME', str(home))
    os.makedirs(home, exist_ok=True)
    return home
