"""The typed connector contract of the Store: capabilities resolved once, one error for a
missing one, and vectored batch writes (``put_batch`` copies no more than ``put``)."""

from __future__ import annotations

import pathlib
import pickle
import re
from collections.abc import Sequence
from typing import Any, NamedTuple, Self

import pytest

from tether.connectors.local import LocalConnector, LocalKey
from tether.connectors.protocols import (
    Capabilities,
    DeferrableConnector,
    VectoredBatchConnector,
    VectoredConnector,
    WaitingConnector,
)
from tether.exceptions import InvalidArgumentError, MissingCapabilityError, StoreError
from tether.proxy import extract
from tether.serialize import BytesLike
from tether.store import Store
from tether.store.ref import update

np = pytest.importorskip('numpy')


class PlainKey(NamedTuple):
    n: int


class PlainConnector:
    """A connector with the Connector protocol only: no capability at all."""

    def __init__(self) -> None:
        self.data: dict[PlainKey, bytes] = {}

    def close(self) -> None:
        self.data.clear()

    def config(self) -> dict[str, Any]:
        return {}

    @classmethod
    def from_config(cls, config: dict[str, Any]) -> Self:
        return cls()

    def evict(self, key: PlainKey) -> None:
        self.data.pop(key, None)

    def exists(self, key: PlainKey) -> bool:
        return key in self.data

    def get(self, key: PlainKey) -> BytesLike | None:
        return self.data.get(key)

    def get_batch(self, keys: Sequence[PlainKey]) -> list[BytesLike | None]:
        return [self.get(k) for k in keys]

    def put(self, data: BytesLike) -> PlainKey:
        key = PlainKey(len(self.data))
        self.data[key] = bytes(data)
        return key

    def put_batch(self, datas: Sequence[BytesLike]) -> list[PlainKey]:
        return [self.put(d) for d in datas]


class RecordingConnector(LocalConnector):
    """A local connector that keeps the buffers each write call received."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.calls: list[tuple[str, Any]] = []

    def put_parts(self, parts: Sequence[BytesLike]) -> LocalKey:
        self.calls.append(('put_parts', list(parts)))
        return super().put_parts(parts)

    def put_batch(self, datas: Sequence[BytesLike]) -> list[LocalKey]:
        self.calls.append(('put_batch', list(datas)))
        return super().put_batch(datas)

    def put_parts_batch(self, batch: Sequence[Sequence[BytesLike]]) -> list[LocalKey]:
        self.calls.append(('put_parts_batch', [list(p) for p in batch]))
        return [LocalConnector.put_parts(self, parts) for parts in batch]


def _shares(array: Any, parts: Sequence[BytesLike]) -> bool:
    return any(
        np.shares_memory(array, np.frombuffer(memoryview(p).cast('B'), dtype=np.uint8))
        for p in parts
        if memoryview(p).nbytes
    )


def test_capabilities_are_resolved_once_when_the_store_is_made() -> None:
    with Store('caps-local', LocalConnector()) as store:
        caps = store.capabilities
        assert caps.deferrable is store.connector
        assert caps.vectored is store.connector
        assert caps.vectored_batch is store.connector
        assert caps.waiting is None
    with Store('caps-plain', PlainConnector()) as plain:
        assert plain.capabilities == Capabilities(plain.connector)
    assert isinstance(LocalConnector(), DeferrableConnector)
    assert isinstance(LocalConnector(), VectoredConnector)
    assert not isinstance(PlainConnector(), VectoredBatchConnector)
    assert not isinstance(PlainConnector(), WaitingConnector)


def test_missing_capability_is_one_clear_error() -> None:
    with Store('caps-missing', PlainConnector(), register=True) as store:
        with pytest.raises(MissingCapabilityError, match='DeferrableConnector') as info:
            store.future()
        assert isinstance(info.value, StoreError)
        assert isinstance(info.value, NotImplementedError)
        assert 'caps-missing' in str(info.value)
        owned = store.owned_proxy([1, 2])
        extract(owned).append(3)
        with pytest.raises(MissingCapabilityError, match='overwrite'):
            update(owned)
        # Without the optional capabilities, writes fall back to joined bytes.
        keys = store.put_batch([b'a', [1]])
        assert store.get(keys[0]) == b'a'
        proxy = store.proxy({'x': 1})
        assert pickle.loads(pickle.dumps(proxy)) == {'x': 1}


def test_not_a_connector_is_refused() -> None:
    with pytest.raises(InvalidArgumentError, match=r'not a connector.*put'):
        Store('caps-bad', object())  # type: ignore[type-var]


def test_put_batch_hands_parts_over_without_joining() -> None:
    arrays = [np.arange(100_000, dtype=np.float64) + i for i in range(3)]
    connector = RecordingConnector()
    with Store('caps-vectored', connector, cache_size=0) as store:
        store.put(arrays[0])
        (kind, single), *_ = connector.calls
        assert kind == 'put_parts'
        assert _shares(arrays[0], single)

        connector.calls.clear()
        proxies = store.proxy_batch(arrays)
        assert [kind for kind, _ in connector.calls] == ['put_parts_batch']
        batch = connector.calls[0][1]
        assert len(batch) == 3
        for array, parts in zip(arrays, batch, strict=True):
            # The array's own memory reached the connector: not copied into one bytes.
            assert _shares(array, parts)
            assert len(parts) == len(single)
        assert all(np.array_equal(extract(p), a) for p, a in zip(proxies, arrays, strict=True))
        assert all(
            np.array_equal(store.get(k), a)
            for k, a in zip(store.put_batch(arrays), arrays, strict=True)
        )


def test_put_batch_with_a_custom_serializer_uses_put_batch() -> None:
    connector = RecordingConnector()
    with Store('caps-custom', connector, cache_size=0) as store:
        keys = store.put_batch([b'ab', b'cd'], serializer=bytes)
        # (the local connector's put_batch then writes each item through put_parts)
        assert connector.calls[0] == ('put_batch', [b'ab', b'cd'])
        assert 'put_parts_batch' not in [kind for kind, _ in connector.calls]
        assert [bytes(connector.get(k) or b'') for k in keys] == [b'ab', b'cd']


def test_redis_proxy_batch_is_vectored(redis_connector: Any) -> None:
    from tether.connectors.redis import RedisConnector

    assert isinstance(redis_connector, VectoredBatchConnector)
    small = RedisConnector(
        redis_connector.hostname,
        redis_connector.port,
        prefix=redis_connector.prefix,
        chunk_size=64 * 1024,  # the 800 kB arrays below go in chunks, the rest in one SET
    )
    objs: list[Any] = [np.arange(100_000) * i for i in range(3)]
    objs += [b'small', {'a': [1, 2]}]
    for connector in (redis_connector, small):
        with Store('caps-redis', connector, cache_size=0) as store:
            proxies = store.proxy_batch(objs, populate_target=False)
            for proxy, obj in zip(proxies, objs, strict=True):
                got = extract(proxy)
                assert np.array_equal(got, obj) if isinstance(obj, np.ndarray) else got == obj


def test_redis_batch_is_one_round_trip_from_the_arrays_memory(redis_connector: Any) -> None:
    from tether.connectors.redis import RedisConnector

    connector = RedisConnector(
        redis_connector.hostname, redis_connector.port, prefix=redis_connector.prefix
    )
    # Counts the requests sent and keeps the buffers of each (a real server).
    sent: list[list[Any]] = []
    round_trip = connector._raw.round_trip

    def counting(pool: Any, packer: Any, read: Any, **kwargs: Any) -> Any:
        sent.append(list(packer.finish()))
        return round_trip(pool, packer, read, **kwargs)

    connector._raw.round_trip = counting  # type: ignore[method-assign]
    arrays = [np.arange(50_000, dtype=np.int64) * i for i in range(4)]
    with Store('caps-redis-trips', connector, cache_size=0) as store:
        keys = store.put_batch(arrays)
        assert len(sent) == 1  # the four SETs went out as one request
        (command,) = sent
        for array in arrays:
            assert _shares(array, [c for c in command if isinstance(c, memoryview)])
        for key, array in zip(keys, arrays, strict=True):
            assert np.array_equal(store.get(key), array)


def test_store_core_has_no_type_ignores_or_connector_probing() -> None:
    core = pathlib.Path(__file__).resolve().parents[2] / 'src' / 'tether' / 'store'
    for path in sorted(core.glob('*.py')):
        text = path.read_text()
        assert 'type: ignore' not in text, f'{path.name} has a type: ignore'
        probe = re.search(r'getattr\(\s*(?:self\.|store\.)?connector\s*,[^)]*\)', text)
        assert probe is None, f'{path.name} probes its connector: {probe.group(0)}'
