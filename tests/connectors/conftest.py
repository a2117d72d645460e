"""The connectors every conformance test runs over (the suite is tether.testing.connectors).

To add a connector to the conformance suite, add a factory to ``CONNECTOR_FACTORIES``:
a function taking the pytest ``request`` and ``tmp_path`` and returning
``(connector, cleanup)``.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import REDIS_HOST, REDIS_PORT, service_up

Factory = Callable[[pytest.FixtureRequest, Path], tuple[Any, Callable[[], None]]]


def _local(request: pytest.FixtureRequest, tmp_path: Path) -> tuple[Any, Callable[[], None]]:
    from tether.connectors.local import LocalConnector

    c = LocalConnector()
    return c, c.close


def _file(request: pytest.FixtureRequest, tmp_path: Path) -> tuple[Any, Callable[[], None]]:
    from tether.connectors.file import FileConnector

    c = FileConnector(tmp_path / 'store')
    return c, lambda: c.close(clear=True)


def _redis(request: pytest.FixtureRequest, tmp_path: Path) -> tuple[Any, Callable[[], None]]:
    from tether.connectors.redis import RedisConnector

    if not service_up(REDIS_PORT):
        pytest.fail('Redis is not running on 127.0.0.1:6379: run `make services`')
    c = RedisConnector(REDIS_HOST, REDIS_PORT, prefix=f'tether-test-{uuid.uuid4().hex}:')
    return c, lambda: c.close(clear=True)


def _shm(request: pytest.FixtureRequest, tmp_path: Path) -> tuple[Any, Callable[[], None]]:
    from tether.connectors.shared_memory import SharedMemoryConnector

    c = SharedMemoryConnector(namespace=f'test{uuid.uuid4().hex[:12]}')
    return c, lambda: c.close(clear=True)


def _node(request: pytest.FixtureRequest, tmp_path: Path) -> tuple[Any, Callable[[], None]]:
    from tether.connectors.node import NodeConnector

    c = NodeConnector(
        f'test-{uuid.uuid4().hex[:12]}',
        address='127.0.0.1',
        run_dir=str(tmp_path / 'run'),
        secret=uuid.uuid4().hex,
        idle_timeout=120,
        memory='256MB',
    )
    return c, lambda: c.close(stop_server=True)


@pytest.fixture(scope='session')
def conformance_endpoint(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """One running endpoint (no relay) for the EndpointConnector conformance runs."""
    from tether.endpoint import EndpointConfig, start_endpoint, stop_endpoint

    home = tmp_path_factory.mktemp('endpoint-home')
    EndpointConfig.create('conformance', home, storage={'memory': '256MB'})
    start_endpoint('conformance', home)
    yield home
    stop_endpoint('conformance', home)


def _endpoint(request: pytest.FixtureRequest, tmp_path: Path) -> tuple[Any, Callable[[], None]]:
    from tether.connectors.endpoint import EndpointConnector

    home = request.getfixturevalue('conformance_endpoint')
    c = EndpointConnector(['conformance'], home=str(home))
    return c, c.close


def _multi(request: pytest.FixtureRequest, tmp_path: Path) -> tuple[Any, Callable[[], None]]:
    from tether.connectors.file import FileConnector
    from tether.connectors.local import LocalConnector
    from tether.connectors.multi import MultiConnector, Policy

    c = MultiConnector(
        {
            'small': (LocalConnector(), Policy(max_size=4096, priority=1)),
            'large': (FileConnector(tmp_path / 'multi'), Policy()),
        },
    )
    return c, c.close


CONNECTOR_FACTORIES: dict[str, Factory] = {
    'endpoint': _endpoint,
    'local': _local,
    'multi': _multi,
    'node': _node,
    'file': _file,
    'redis': _redis,
    'shared_memory': _shm,
}


@pytest.fixture(params=sorted(CONNECTOR_FACTORIES))
def connector(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Any]:
    c, cleanup = CONNECTOR_FACTORIES[request.param](request, tmp_path)
    yield c
    cleanup()


@pytest.fixture
def shm(shm_namespace: str) -> Iterator[Any]:
    """A shared-memory connector of its own namespace, cleared afterwards."""
    from tether.connectors.shared_memory import SharedMemoryConnector

    c = SharedMemoryConnector(shm_namespace)
    yield c
    c.close(clear=True)


def copy_lent(view: memoryview, keep: Callable[[], Any]) -> bytes:
    """A copier for ``get_lent``: the lent bytes, copied."""
    return bytes(view)
