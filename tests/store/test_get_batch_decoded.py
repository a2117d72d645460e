"""Store.get_batch reads through the connector's decoded batch read when it has one.

A store with tether's own serializer asks its connector for objects, not bytes
(``ConnectorBase.get_objects``): the Redis connector then reads a batch with
``get_decoded_batch`` (one round trip, each large ``bytes`` value read into its final
object), as ``Store.get`` reads one with ``get_decoded``. A protocol-only connector that
implements :class:`~tether.connectors.protocols.DecodingBatchConnector` is used the same
way through the store's adapter; a custom deserializer reads bytes with ``get_batch``.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from typing import Any

from tests.conftest import REDIS_HOST, REDIS_PORT
from tether.connectors.local import LocalConnector
from tether.connectors.protocols import Capabilities, DecodingBatchConnector
from tether.connectors.redis import RedisConnector, RedisKey
from tether.serialize import BytesLike, deserialize
from tether.store import Store


class CountingRedis(RedisConnector):
    """A real Redis connector that counts its batch reads."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.calls: list[str] = []

    def get_batch(self, keys: Sequence[RedisKey]) -> list[BytesLike | None]:
        self.calls.append('get_batch')
        return super().get_batch(keys)

    def get_decoded_batch(self, keys: Sequence[RedisKey]) -> list[tuple[Any, int] | None]:
        self.calls.append('get_decoded_batch')
        return super().get_decoded_batch(keys)


class DecodingLocal:
    """A protocol-only connector (no base class) over a local one, with decoded reads."""

    def __init__(self) -> None:
        self.inner = LocalConnector()
        self.calls: list[str] = []

    def put(self, data: BytesLike) -> Any:
        return self.inner.put(data)

    def get(self, key: Any) -> BytesLike | None:
        return self.inner.get(key)

    def put_batch(self, datas: Sequence[BytesLike]) -> list[Any]:
        return self.inner.put_batch(datas)

    def get_batch(self, keys: Sequence[Any]) -> list[BytesLike | None]:
        self.calls.append('get_batch')
        return self.inner.get_batch(keys)

    def get_decoded(self, key: Any) -> tuple[Any, int] | None:
        self.calls.append('get_decoded')
        data = self.inner.get(key)
        return None if data is None else (deserialize(data), len(data))

    def get_decoded_batch(self, keys: Sequence[Any]) -> list[tuple[Any, int] | None]:
        self.calls.append('get_decoded_batch')
        out: list[tuple[Any, int] | None] = []
        for data in self.inner.get_batch(keys):
            out.append(None if data is None else (deserialize(data), len(data)))
        return out

    def exists(self, key: Any) -> bool:
        return self.inner.exists(key)

    def evict(self, key: Any) -> None:
        self.inner.evict(key)

    def config(self) -> dict[str, Any]:
        return {}

    @classmethod
    def from_config(cls, config: dict[str, Any]) -> DecodingLocal:
        return cls()

    def close(self) -> None:
        self.inner.close()


def _objects() -> list[Any]:
    return [b'x' * 400_000, 'text', {'a': [1, 2]}, bytes(range(256)) * 4_000]


def test_get_batch_over_redis_reads_decoded(redis_available: None) -> None:
    prefix = f'gbd-{uuid.uuid4().hex[:8]}-'
    connector = CountingRedis(REDIS_HOST, REDIS_PORT, prefix=prefix)
    with Store(f'gbd-{uuid.uuid4().hex[:8]}', connector, cache_size=16) as store:
        objs = _objects()
        keys = store.put_batch(objs)
        store.evict(keys[1])
        assert store.get(keys[2]) == objs[2]  # cached: not read again
        got = store.get_batch([*keys, keys[0]], default='missing')
        assert got == [objs[0], 'missing', objs[2], objs[3], objs[0]]
        assert type(got[0]) is bytes
        assert connector.calls == ['get_decoded_batch']
        for key in keys:
            store.evict(key)


def test_get_batch_with_a_deserializer_reads_bytes(redis_available: None) -> None:
    prefix = f'gbd-{uuid.uuid4().hex[:8]}-'
    connector = CountingRedis(REDIS_HOST, REDIS_PORT, prefix=prefix)
    with Store(f'gbd-{uuid.uuid4().hex[:8]}', connector, cache_size=0) as store:
        keys = store.put_batch(_objects())
        got = store.get_batch(keys, deserializer=lambda data: bytes(data)[:3])
        assert all(type(g) is bytes and len(g) == 3 for g in got)
        assert connector.calls == ['get_batch']
        for key in keys:
            store.evict(key)


def test_an_adapted_connector_reads_decoded_batches() -> None:
    connector = DecodingLocal()
    assert isinstance(connector, DecodingBatchConnector)
    assert Capabilities.of(connector).decoding_batch is connector
    with Store(f'gbd-{uuid.uuid4().hex[:8]}', connector, cache_size=0) as store:
        objs = _objects()
        keys = store.put_batch(objs)
        assert store.get_batch(keys) == objs
        assert connector.calls == ['get_decoded_batch']
        connector.calls.clear()
        assert store.get_batch(keys, deserializer=deserialize) == objs
        assert connector.calls == ['get_batch']
