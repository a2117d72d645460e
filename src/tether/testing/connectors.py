"""The connector conformance suite: the tests every connector passes (needs pytest).

Subclass :class:`ConnectorConformance` in a test module (its name must start with
``Test``) and give it a fixture named ``connector`` that yields a fresh connector and
cleans up after it; pytest then runs every test of the suite against that connector.
Connectors that reserve keys before they write (``new_key``/``set``, what distributed
futures need) also pass :class:`DeferrableConformance`::

    import pytest

    from tether.testing.connectors import ConnectorConformance, DeferrableConformance


    class TestMyConnector(ConnectorConformance, DeferrableConformance):
        @pytest.fixture
        def connector(self, tmp_path):
            c = MyConnector(tmp_path)
            yield c
            c.close()

To run the suite over several connectors, parametrize the fixture
(``@pytest.fixture(params=[...])``). The ``connector`` fixture may also live in the
module or in a ``conftest.py`` instead of the class.
"""

from __future__ import annotations

import pickle
from typing import Any

import pytest

from tether.connectors.base import adapt
from tether.connectors.protocols import (
    Capabilities,
    Connector,
    DeferrableConnector,
    LendingConnector,
    VectoredBatchConnector,
)
from tether.serialize import BytesLike, deserialize, serialize, serialize_parts
from tether.store import Store
from tether.testing.threads import hammer

__all__ = ['ConnectorConformance', 'DeferrableConformance']


class ConnectorConformance:
    """What every connector does: bytes in, a small picklable key out, and back.

    Needs a fixture ``connector`` that yields the connector under test.
    """

    def test_is_a_connector(self, connector: Any) -> None:
        assert isinstance(connector, Connector)

    def test_is_a_context_manager(self, connector: Any) -> None:
        # ``with connector:`` returns the connector (leaving the block closes it, which
        # the fixture's own cleanup must then tolerate, so only entering is checked).
        assert callable(getattr(type(connector), '__exit__', None))
        assert connector.__enter__() is connector

    def test_put_get_roundtrip(self, connector: Any) -> None:
        key = connector.put(b'hello')
        assert bytes(connector.get(key)) == b'hello'

    def test_empty_value(self, connector: Any) -> None:
        key = connector.put(b'')
        assert connector.exists(key)
        assert bytes(connector.get(key)) == b''

    def test_binary_value_with_all_byte_values(self, connector: Any) -> None:
        data = bytes(range(256)) * 1000
        key = connector.put(data)
        assert bytes(connector.get(key)) == data

    def test_accepts_bytearray_and_memoryview(self, connector: Any) -> None:
        k1 = connector.put(bytearray(b'abc'))
        k2 = connector.put(memoryview(b'xyz'))
        assert bytes(connector.get(k1)) == b'abc'
        assert bytes(connector.get(k2)) == b'xyz'

    def test_missing_key_gets_none(self, connector: Any) -> None:
        key = connector.put(b'x')
        connector.evict(key)
        assert connector.get(key) is None
        assert not connector.exists(key)

    def test_evict_missing_is_not_an_error(self, connector: Any) -> None:
        key = connector.put(b'x')
        connector.evict(key)
        connector.evict(key)

    def test_keys_are_unique(self, connector: Any) -> None:
        keys = [connector.put(b'same') for _ in range(20)]
        assert len(set(keys)) == 20

    def test_keys_are_small_picklable_tuples(self, connector: Any) -> None:
        key = connector.put(b'x')
        assert isinstance(key, tuple)
        assert pickle.loads(pickle.dumps(key)) == key
        assert len(pickle.dumps(key)) < 200

    def test_batch(self, connector: Any) -> None:
        datas = [f'item-{i}'.encode() for i in range(10)]
        keys = connector.put_batch(datas)
        assert len(keys) == 10
        got = connector.get_batch(keys)
        assert [bytes(g) for g in got] == datas
        connector.evict(keys[3])
        got = connector.get_batch(keys)
        assert got[3] is None
        assert bytes(got[4]) == datas[4]

    def test_empty_batch(self, connector: Any) -> None:
        assert connector.put_batch([]) == []
        assert connector.get_batch([]) == []

    def test_vectored_batch(self, connector: Any) -> None:
        # A batch of objects as lists of parts: each list is one object, an empty list an
        # empty object. Through the connector's own put_parts_batch when it has one
        # (VectoredBatchConnector), else through the default a Store uses for it (adapt:
        # each list joined, the batch put with put_batch).
        writer = connector if isinstance(connector, VectoredBatchConnector) else adapt(connector)
        batch: list[list[BytesLike]] = [
            [b'ab', memoryview(b'cd'), bytearray(b'e')],
            [],
            [b'x' * 100_000, b'y'],
        ]
        keys = writer.put_parts_batch(batch)
        assert len(keys) == 3
        got = connector.get_batch(keys)
        assert [None if g is None else bytes(g) for g in got] == [
            b'abcde',
            b'',
            b'x' * 100_000 + b'y',
        ]
        assert writer.put_parts_batch([]) == []

    def test_lent_reads(self, connector: Any) -> None:
        # Connectors that lend an object's bytes for one call (LendingConnector) pass them
        # read-only, with keep() giving what get() would; a missing key gets the default.
        if not isinstance(connector, LendingConnector):
            # Not one: stores read it through get(), and say so in their capabilities.
            assert Capabilities.of(connector).lending is None
            key = connector.put(b'read through get')
            assert bytes(connector.get(key)) == b'read through get'
            return
        assert Capabilities.of(connector).lending is connector
        seen: list[tuple[bool, bytes, bytes]] = []

        def use(view: memoryview, keep: Any) -> str:
            seen.append((view.readonly, bytes(view), bytes(keep())))
            return 'used'

        for data in (b'', b'small', bytes(range(256)) * 4096):
            seen.clear()
            key = connector.put(data)
            assert connector.get_lent(key, use, None) == 'used'
            assert seen == [(True, data, data)]
            connector.evict(key)
            assert connector.get_lent(key, use, 'missing') == 'missing'
            assert len(seen) == 1

    def test_base_methods(self, connector: Any) -> None:
        # The methods a Store uses (tether.connectors.base.ConnectorBase): the
        # connector's own, or the base class's defaults (a connector that does not
        # derive from it is adapted, as a Store adapts it).
        io = adapt(connector)
        key = io.put_parts([b'ab', memoryview(b'cd'), bytearray(b'e')])
        assert bytes(connector.get(key)) == b'abcde'
        assert bytes(connector.get(io.put_parts([]))) == b''
        keys = io.put_parts_batch([[b'x', b'y'], [b'z']])
        assert [bytes(g) for g in connector.get_batch(keys)] == [b'xy', b'z']
        key, written = io.put_parts_background([b'p' * 300_000, b'q'])
        written.result(timeout=60)
        assert bytes(connector.get(key)) == b'p' * 300_000 + b'q'
        obj = ['an', 'object']
        key = io.put_parts(serialize_parts(obj))
        assert io.get_object(key, deserialize, True) == (obj, len(serialize(obj)))
        assert io.get_object(key, bytes, False) == (
            serialize(obj),
            len(serialize(obj)),
        )
        big = b'b' * 1_000_000  # large bytes: connectors may build it as they read
        key = io.put_parts(serialize_parts(big))
        got = io.get_object(key, deserialize, True)
        assert got is not None
        assert got[0] == big
        connector.evict(key)
        assert io.get_object(key, deserialize, True) is None
        assert io.get_object(key, deserialize, False) is None

    def test_large_value(self, connector: Any) -> None:
        data = bytes(8 * 1024 * 1024) + b'end'
        key = connector.put(data)
        assert bytes(connector.get(key)) == data

    def test_config_roundtrip(self, connector: Any) -> None:
        config = connector.config()
        assert isinstance(config, dict)
        other = type(connector).from_config(config)
        assert other.config() == config
        key = connector.put(b'shared')
        assert bytes(other.get(key)) == b'shared'

    def test_concurrent_puts_and_gets(self, connector: Any) -> None:
        def work(thread: int, call: int) -> None:
            data = f'{thread}-{call}'.encode() * 100
            key = connector.put(data)
            assert bytes(connector.get(key)) == data

        hammer(work, threads=4, calls=20)

    def test_store_roundtrip_over_connector(self, connector: Any) -> None:
        store = Store('conformance', connector, cache_size=0)
        obj = {'a': [1, 2, 3], 'b': 'text'}
        key = store.put(obj)
        assert store.get(key) == obj
        proxy = store.proxy(obj, populate_target=False)
        assert proxy == obj


class DeferrableConformance:
    """What a deferrable connector adds: reserve a key now, write its value later.

    Needs a fixture ``connector`` that yields the connector under test.
    """

    def test_deferrable(self, connector: Any) -> None:
        if not isinstance(connector, DeferrableConnector):
            pytest.fail(f'{type(connector).__name__} should be deferrable')
        key = connector.new_key()
        assert not connector.exists(key)
        connector.set(key, b'later')
        later = connector.get(key)
        assert later is not None
        assert bytes(later) == b'later'
        key2 = connector.new_key(b'now')
        assert not connector.exists(key2), 'new_key(data) must reserve the key, not store data'
        assert connector.get(key2) is None
        connector.set(key2, b'now')
        now = connector.get(key2)
        assert now is not None
        assert bytes(now) == b'now'
