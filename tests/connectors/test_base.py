"""The connector base class: its defaults pass the conformance suite, and a connector
written against the protocols only (not a subclass) is adapted once by a Store."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any, Self

import pytest

from tether.connectors.base import ConnectorBase, adapt
from tether.connectors.protocols import Connector
from tether.serialize import BytesLike
from tether.store import Store
from tether.testing.connectors import ConnectorConformance

from .conftest import CONNECTOR_FACTORIES


class CoreOnly(ConnectorBase[Any]):
    """A connector that implements only the core: every other method is the base's."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner

    def put(self, data: BytesLike) -> Any:
        return self.inner.put(data)

    def get(self, key: Any) -> BytesLike | None:
        data: BytesLike | None = self.inner.get(key)
        return data

    def exists(self, key: Any) -> bool:
        return bool(self.inner.exists(key))

    def evict(self, key: Any) -> None:
        self.inner.evict(key)

    def config(self) -> dict[str, Any]:
        return {'inner': self.inner}

    @classmethod
    def from_config(cls, config: dict[str, Any]) -> Self:
        return cls(config['inner'])

    def close(self) -> None:
        pass

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class ProtocolOnly:
    """A third-party connector: the Connector protocol, no base class, no capability."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.calls: list[str] = []

    def put(self, data: BytesLike) -> Any:
        self.calls.append('put')
        return self.inner.put(data)

    def get(self, key: Any) -> BytesLike | None:
        self.calls.append('get')
        data: BytesLike | None = self.inner.get(key)
        return data

    def exists(self, key: Any) -> bool:
        return bool(self.inner.exists(key))

    def evict(self, key: Any) -> None:
        self.inner.evict(key)

    def put_batch(self, datas: Sequence[BytesLike]) -> list[Any]:
        return [self.put(d) for d in datas]

    def get_batch(self, keys: Sequence[Any]) -> list[BytesLike | None]:
        return [self.get(k) for k in keys]

    def config(self) -> dict[str, Any]:
        return {'inner': self.inner}

    @classmethod
    def from_config(cls, config: dict[str, Any]) -> ProtocolOnly:
        return cls(config['inner'])

    def close(self) -> None:
        pass

    def __enter__(self) -> ProtocolOnly:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


@pytest.fixture(params=['file', 'local', 'redis', 'shared_memory'])
def inner(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Any]:
    c, cleanup = CONNECTOR_FACTORIES[request.param](request, tmp_path)
    yield c
    cleanup()


class TestBaseDefaults(ConnectorConformance):
    """The suite over the base class's defaults (batch, parts, background, reads)."""

    @pytest.fixture
    def connector(self, inner: Any) -> Any:
        return CoreOnly(inner)


class TestProtocolOnly(ConnectorConformance):
    """The suite over a connector that is not a ConnectorBase (adapted)."""

    @pytest.fixture
    def connector(self, inner: Any) -> Any:
        return ProtocolOnly(inner)


def test_a_store_adapts_a_protocol_connector_once(tmp_path: Path) -> None:
    from tether.connectors.local import LocalConnector

    third = ProtocolOnly(LocalConnector())
    assert isinstance(third, Connector)
    assert not isinstance(third, ConnectorBase)
    with Store('adapted', third, cache_size=0) as store:
        io = store._io
        assert io is not third  # type: ignore[comparison-overlap]
        key = store.put([1, 2, 3])
        assert store.get(key) == [1, 2, 3]
        assert store.put_batch(['a', 'b']) != []
        assert store._io is io  # adapted once, at construction
    assert third.calls[:2] == ['put', 'get']


def test_a_base_connector_is_not_wrapped() -> None:
    from tether.connectors.local import LocalConnector

    c = LocalConnector()
    assert isinstance(c, ConnectorBase)
    assert adapt(c) is c
