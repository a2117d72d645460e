"""Large arguments and results by proxy through a tether Store, outside the service."""

from __future__ import annotations

import hashlib
import os
import threading
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from tests.faas import _tasks
from tests.faas.conftest import AgentThread, new_user
from tether.connectors import _shm_pool
from tether.connectors.redis import RedisConnector
from tether.connectors.shared_memory import SharedMemoryConnector
from tether.faas import Executor
from tether.faas._server import ServiceThread
from tether.proxy import Proxy, is_resolved
from tether.store import Store


@pytest.fixture
def store(redis_connector: RedisConnector) -> Iterator[Store[Any]]:
    with Store('faas-proxies', redis_connector, register=True) as s:
        yield s


def test_large_arguments_and_results_travel_by_proxy(
    dev_service: ServiceThread,
    start_endpoint: Callable[..., AgentThread],
    store: Store[Any],
    redis_client: Any,
    unique_prefix: str,
) -> None:
    user, token = new_user(dev_service)
    ep = start_endpoint(dev_service, user)
    big = b'x' * (2 * 2**20)
    with Executor(
        ep.config.endpoint_id,
        service_url=dev_service.url,
        token=token,
        store=store,
        proxy_threshold=100_000,
    ) as ex:
        # Above the threshold: proxied, so the service sees a few hundred bytes.
        future = ex.submit(_tasks.nbytes, big)
        assert future.result(timeout=60) == len(big)
        # The argument is evicted once its task completed.
        assert not any(redis_client.scan_iter(match=f'{unique_prefix}*'))
        # A large result comes back as a proxy of the same store.
        result = ex.submit(_tasks.make_bytes, 3 * 2**20).result(timeout=60)
        assert isinstance(result, Proxy)
        assert not is_resolved(result)
        assert result == b'x' * (3 * 2**20)
        # Small values go by value.
        assert ex.submit(_tasks.make_bytes, 10).result(timeout=60) == b'x' * 10
    tasks = dev_service.call(dev_service.service.repo.recent_tasks(user, 10))  # type: ignore[union-attr]
    assert len(tasks) == 3


def test_payload_over_the_limit_passes_with_a_proxy(
    dev_service: ServiceThread,
    start_endpoint: Callable[..., AgentThread],
    store: Store[Any],
) -> None:
    user, token = new_user(dev_service)
    ep = start_endpoint(dev_service, user)
    big = b'y' * (dev_service.config.max_payload_bytes + 1)
    with Executor(ep.config.endpoint_id, service_url=dev_service.url, token=token) as ex:
        assert ex.submit(_tasks.nbytes, store.proxy(big)).result(timeout=60) == len(big)


def test_a_shared_memory_argument_is_copied_while_its_task_travels(
    dev_service: ServiceThread,
    start_endpoint: Callable[..., AgentThread],
    shm_namespace: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    user, token = new_user(dev_service)
    ep = start_endpoint(dev_service, user)
    copy = threading.Event()
    real = _shm_pool.begin_write

    def held_write(*args: Any) -> Callable[[], None]:
        finish = real(*args)
        return lambda: (copy.wait(), finish())[1]

    monkeypatch.setattr(_shm_pool, 'begin_write', held_write)
    big = os.urandom(2 * 2**20)
    with (
        Store('faas-proxies-shm', SharedMemoryConnector(shm_namespace), register=True) as store,
        Executor(
            ep.config.endpoint_id,
            service_url=dev_service.url,
            token=token,
            store=store,
            proxy_threshold=100_000,
        ) as ex,
    ):
        # The task is sent before its argument is copied; the worker waits for the copy.
        future = ex.submit(_tasks.digest, big)
        with pytest.raises(TimeoutError):
            future.result(timeout=0.5)
        copy.set()
        assert future.result(timeout=60) == hashlib.sha256(big).hexdigest()
        # Memory the caller may change is copied before submit returns.
        copy.clear()
        mutable = bytearray(big)
        future = ex.submit(_tasks.digest, mutable)
        mutable[:4] = b'XXXX'
        assert future.result(timeout=60) == hashlib.sha256(big).hexdigest()
        copy.set()
