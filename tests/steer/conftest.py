"""Fixtures for the steering tests: queues under unique names, stores, task servers."""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from tests.conftest import REDIS_HOST, REDIS_PORT


@pytest.fixture
def store(redis_connector: Any) -> Iterator[Any]:
    """A registered Store over Redis, with a unique name and key prefix."""
    from tether.store import Store

    name = f'steer-{uuid.uuid4().hex[:8]}'
    with Store(name, redis_connector, register=True) as s:
        yield s


@pytest.fixture(params=['pipe', 'redis'])
def make_queues(request: Any, redis_available: None) -> Iterator[Callable[..., Any]]:
    """Build queues of the parametrized kind; Redis ones under a unique prefix."""
    from tether.steer.queue import PipeQueues, RedisQueues

    made: list[Any] = []

    def make(*args: Any, **kwargs: Any) -> Any:
        if request.param == 'pipe':
            q = PipeQueues(*args, **kwargs)
        else:
            prefix = f'steer-test-{uuid.uuid4().hex}'
            q = RedisQueues(*args, hostname=REDIS_HOST, port=REDIS_PORT, prefix=prefix, **kwargs)
        made.append(q)
        return q

    yield make
    for q in made:
        if hasattr(q, 'close'):  # Redis queues: drop their keys, close the connections
            with contextlib.suppress(Exception):
                q.flush()
            q.close()
