"""The function service's ``Executor`` passes unresolved proxies through unresolved.

The same check as ``tests/patterns/test_engines_unresolved.py``: proxies whose factory
fails the test if it runs in this (the submitting) process, sent as task arguments to an
endpoint of the service in dev mode; the endpoint's workers are other processes.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from tests.faas.conftest import AgentThread, new_user
from tests.patterns import _guard
from tests.patterns._guard import Engine, check_passes_unresolved
from tether.connectors.redis import RedisConnector
from tether.faas import Executor
from tether.faas._server import ServiceThread
from tether.store import Store


@pytest.fixture
def store(redis_connector: RedisConnector) -> Iterator[Store[Any]]:
    with Store(f'faas-unresolved-{uuid.uuid4().hex[:8]}', redis_connector, register=True) as s:
        yield s


def test_faas_executor(
    dev_service: ServiceThread,
    start_endpoint: Callable[..., AgentThread],
    store: Store[Any],
) -> None:
    user, token = new_user(dev_service)
    ep = start_endpoint(dev_service, user)
    with Executor(ep.config.endpoint_id, service_url=dev_service.url, token=token) as ex:
        engine = Engine(ex.submit)

        def make(config: Any, pid: int) -> Any:
            return engine.result(engine.submit(_guard.make_proxies, config, pid))

        check_passes_unresolved(engine, store, make)
