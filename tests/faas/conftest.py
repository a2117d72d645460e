"""Fixtures of the function-service tests: real PostgreSQL, real RabbitMQ, real endpoints.

The production service runs over a PostgreSQL database created for this test session
(dropped at the end) and the shared RabbitMQ with queue names unique to the session
(deleted at the end). Endpoints run their agent in a thread of the test process (or as a
``tether faas endpoint`` process where a test kills them), with real worker processes.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import pathlib
import threading
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from tests.conftest import RUN_ID, service_up
from tether.exceptions import TaskPending
from tether.faas import Client, EndpointConfig, ServiceConfig
from tether.faas._server import ServiceThread
from tether.faas.endpoint import Agent
from tether.testing import wait_until

ROOT = pathlib.Path(__file__).resolve().parents[2]
PG_ADMIN = 'postgresql://postgres@127.0.0.1:5432/postgres'
AMQP = 'amqp://guest:guest@127.0.0.1:5672/'


def wait_for(predicate: Callable[[], Any], timeout: float = 60.0, what: str = 'condition') -> Any:
    """``tether.testing.wait_until`` under the name (and argument names) these tests use."""
    return wait_until(predicate, timeout=timeout, message=what)


@pytest.fixture(scope='session')
def pg_url() -> Iterator[str]:
    if not service_up(5432):
        pytest.fail('PostgreSQL is not running on 127.0.0.1:5432: run `make services`')
    import asyncpg

    # Unique per instance: a test package that imports this fixture gets one of its own.
    name = f'tether_faas_{RUN_ID}_{uuid.uuid4().hex[:6]}'

    async def admin(sql: str) -> None:
        conn = await asyncpg.connect(PG_ADMIN)
        try:
            await conn.execute(sql)
        finally:
            await conn.close()

    asyncio.run(admin(f'CREATE DATABASE {name}'))
    yield f'postgresql://postgres@127.0.0.1:5432/{name}'
    asyncio.run(admin(f'DROP DATABASE IF EXISTS {name} WITH (FORCE)'))


@pytest.fixture(scope='session')
def queue_prefix() -> str:
    if not service_up(5672):
        pytest.fail('RabbitMQ is not running on 127.0.0.1:5672: run `make services`')
    return f'tether-test-{RUN_ID}-faas'


def delete_queues(st: ServiceThread) -> None:
    """Delete every queue the service's endpoints and task groups own."""
    assert st.service is not None
    service = st.service

    async def run() -> None:
        eps, tgs = await service.repo.all_queue_owners()
        for eid in eps:
            await service.broker.delete(service.task_queue(eid))
        for gid in tgs:
            await service.broker.delete(service.result_queue(gid))

    st.call(run())


@pytest.fixture(scope='session')
def prod_service(pg_url: str, queue_prefix: str) -> Iterator[ServiceThread]:
    """The service over PostgreSQL and RabbitMQ (shared by the session's tests)."""
    config = ServiceConfig(port=0, database=pg_url, broker=AMQP, queue_prefix=queue_prefix)
    st = ServiceThread(config).start()
    yield st
    delete_queues(st)
    st.stop()


@pytest.fixture
def dev_service() -> Iterator[ServiceThread]:
    """The same service over SQLite and in-process queues."""
    st = ServiceThread(ServiceConfig(port=0, database='sqlite://', broker='memory://')).start()
    yield st
    st.stop()


def new_user(st: ServiceThread) -> tuple[str, str]:
    """A fresh user of the service: ``(user_id, token)``."""
    assert st.service is not None
    result: tuple[str, str] = st.call(st.service.repo.create_user(f'u-{uuid.uuid4().hex[:10]}'))
    return result


def new_endpoint(st: ServiceThread, user_id: str, name: str = 'ep') -> tuple[str, str]:
    assert st.service is not None
    result: tuple[str, str] = st.call(st.service.repo.add_endpoint(user_id, name))
    return result


class AgentThread:
    """An endpoint agent running in a thread of this process."""

    def __init__(self, config: EndpointConfig, token: str) -> None:
        self.config = config
        self.agent = Agent(config, token)
        self.loop: asyncio.AbstractEventLoop | None = None
        self._stop: asyncio.Event | None = None
        self._thread = threading.Thread(target=self._main, daemon=True)

    def _main(self) -> None:
        async def main() -> None:
            self.loop = asyncio.get_running_loop()
            self._stop = asyncio.Event()
            await self.agent.run(self._stop)

        asyncio.run(main())

    def start(self, wait: bool = True) -> AgentThread:
        self._thread.start()
        if wait:
            wait_for(self.agent.connected.is_set, 60, 'the endpoint to connect')
        return self

    def stop(self) -> None:
        if self.loop is not None and self._stop is not None:
            with contextlib.suppress(RuntimeError):
                self.loop.call_soon_threadsafe(self._stop.set)
        self._thread.join(60)


@pytest.fixture
def start_endpoint() -> Iterator[Callable[..., AgentThread]]:
    """Start endpoint agents (stopped at the end of the test)."""
    started: list[AgentThread] = []

    def start(st: ServiceThread, user_id: str, wait: bool = True, **options: Any) -> AgentThread:
        endpoint_id, token = new_endpoint(st, user_id, options.pop('name', 'ep'))
        options.setdefault('max_workers', 2)
        config = EndpointConfig(
            name='ep', endpoint_id=endpoint_id, service_url=st.url, heartbeat_s=0.5, **options
        )
        agent = AgentThread(config, token).start(wait)
        started.append(agent)
        return agent

    yield start
    for agent in started:
        agent.stop()


@pytest.fixture
def faas_home(tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[pathlib.Path]:
    """A private TETHER_FAAS_HOME (endpoints, dev file) for this test."""
    home = pathlib.Path(os.environ.get('TMPDIR', '/tmp')) / f'tfh-{uuid.uuid4().hex[:8]}'
    home.mkdir(mode=0o700)
    monkeypatch.setenv('TETHER_FAAS_HOME', str(home))
    monkeypatch.delenv('TETHER_FAAS_URL', raising=False)
    monkeypatch.delenv('TETHER_FAAS_TOKEN', raising=False)
    yield home
    import shutil

    shutil.rmtree(home, ignore_errors=True)


def result_of(client: Client, task_id: str, timeout: float = 60.0) -> Any:
    """The result of ``task_id``, asked for until it is there (or ``timeout`` passes)."""

    def finished() -> tuple[Any] | None:
        try:
            return (client.get_result(task_id),)  # a tuple: the result itself may be falsy
        except TaskPending:
            return None

    return wait_for(finished, timeout, f'the result of task {task_id}')[0]
