"""Behaviours a ProxyStore program relies on that tether once lacked (issue 29).

Each test states the ProxyStore behaviour in tether's terms; none is copied from
ProxyStore's suite.
"""

from __future__ import annotations

import operator
import pickle
from typing import Any

import pytest

from tether.connectors.local import LocalConnector
from tether.exceptions import ProxyResolveError, StoreError
from tether.factory import LambdaFactory, SimpleFactory
from tether.proxy import Proxy, ProxyLocker, is_resolved
from tether.store import Store, get_store


class _IntOnly:
    """Converts to int but is not an index (no ``__index__``)."""

    def __int__(self) -> int:
        return 7


def test_index_falls_back_to_int() -> None:
    p = Proxy(SimpleFactory(_IntOnly()))
    assert operator.index(p) == 7
    assert [10, 11, 12, 13, 14, 15, 16, 17][p] == 17
    # A real index still goes through __index__.
    assert operator.index(Proxy(SimpleFactory(3))) == 3


def test_index_of_a_non_number_still_raises_type_error() -> None:
    with pytest.raises(TypeError):
        operator.index(Proxy(SimpleFactory('text')))


@pytest.mark.parametrize('protocol', range(pickle.HIGHEST_PROTOCOL + 1))
def test_proxy_pickles_with_every_protocol(protocol: int) -> None:
    factories: list[Any] = [SimpleFactory([1, 2]), LambdaFactory(list, (1, 2))]
    for factory in factories:
        copy = pickle.loads(pickle.dumps(Proxy(factory), protocol=protocol))
        assert not is_resolved(copy)
        assert copy == [1, 2]


class _NotedFactory(SimpleFactory[int]):
    """A factory subclass with instance attributes of its own."""


def test_factory_subclass_state_survives_pickling() -> None:
    factory = _NotedFactory(5)
    factory.note = 'kept'  # type: ignore[attr-defined]
    copy = pickle.loads(pickle.dumps(factory, protocol=0))
    assert type(copy) is _NotedFactory
    assert copy() == 5
    assert copy.note == 'kept'  # type: ignore[attr-defined]


def test_class_attribute_added_after_definition_is_served_by_the_proxy() -> None:
    class Tagged(Proxy[Any]):
        pass

    p = Tagged(SimpleFactory([1, 2, 3]))
    Tagged.tag = 'mine'  # type: ignore[attr-defined]
    assert p.tag == 'mine'
    assert not is_resolved(p)  # served by the proxy, not the target
    assert p.count(2) == 1  # other names still reach the target


def test_subclass_new_may_call_init() -> None:
    class Built(Proxy[Any]):
        def __new__(cls, factory: Any) -> Built:
            self = super().__new__(cls)
            self.__init__(factory)  # type: ignore[misc]
            return self

        def __init__(self, factory: Any) -> None:
            super().__init__(factory)

    def answer() -> int:
        return 42

    p = Built(lambda: answer)
    assert p() == 42


def test_proxy_locker_takes_other_attributes_but_hides_its_proxy() -> None:
    locker = ProxyLocker(Proxy(SimpleFactory(1)))
    locker.label = 'batch-3'  # type: ignore[attr-defined]
    assert locker.label == 'batch-3'
    with pytest.raises(AttributeError):
        locker._proxy
    assert locker.unlock() == 1


def test_proxy_resolve_error_names_its_cause() -> None:
    def broken() -> None:
        raise KeyError('gone')

    with pytest.raises(ProxyResolveError) as info:
        str(Proxy(broken))
    assert isinstance(info.value.cause, KeyError)
    assert info.value.cause is info.value.__cause__


def test_store_operations_on_a_proxy_not_made_by_a_store_raise() -> None:
    from tether.exceptions import NotAStoreProxyError
    from tether.store.lifetimes import StaticLifetime
    from tether.store.ref import into_owned
    from tether.store.utils import get_key

    plain = Proxy(SimpleFactory(1))
    for operation in (get_store, get_key, into_owned, StaticLifetime().add_proxy):
        with pytest.raises(NotAStoreProxyError, match='store prox') as info:
            operation(plain)
        # ProxyStore's ProxyStoreFactoryError is a StoreError; tether's get_key raised
        # TypeError before: both still catch it.
        assert isinstance(info.value, StoreError)
        assert isinstance(info.value, TypeError)
    with Store('differences-get-store', LocalConnector(), register=True) as store:
        assert get_store(store.proxy([1])) is store


def test_owned_proxy_takes_target_and_cache_defaults(tmp_path: Any) -> None:
    from tether.store.factory import StoreFactory
    from tether.store.ref import OwnedProxy, drop

    with Store('differences-owned', LocalConnector(), register=True) as store:
        key = store.put('value')
        owned: OwnedProxy[str] = OwnedProxy(
            StoreFactory(key, store.config()),
            target='value',
            cache_defaults=True,
        )
        assert is_resolved(owned)
        copy: OwnedProxy[str] = pickle.loads(pickle.dumps(owned))  # moves ownership
        assert not is_resolved(copy)
        target: Any = copy
        assert isinstance(target, str)
        assert hash(copy) == hash('value')
        assert not is_resolved(copy)  # answered from the cached class and hash
        drop(copy)
        assert not store.exists(key)


def test_copying_an_owner_is_a_not_implemented_error() -> None:
    import copy

    from tether.exceptions import OwnershipError

    with Store('differences-copy', LocalConnector(), register=True) as store:
        owned = store.owned_proxy([1, 2])
        for fn in (copy.copy, copy.deepcopy):
            with pytest.raises(NotImplementedError) as info:
                fn(owned)
            assert isinstance(info.value, OwnershipError)


def test_a_sent_borrow_raises_reference_invalid_error() -> None:
    from tether.exceptions import ReferenceInvalidError
    from tether.store.ref import borrow

    with Store('differences-sent', LocalConnector(), register=True) as store:
        owned = store.owned_proxy('value')
        ref = borrow(owned)
        received = pickle.loads(pickle.dumps(ref))
        with pytest.raises(ReferenceInvalidError):
            str(ref)
        assert received == 'value'
        del ref, received


def test_local_connector_can_carry_its_data_in_its_config() -> None:
    with LocalConnector(include_data_in_config=True) as source:
        key = source.put(b'payload')
        config = source.config()
    # Another process has no dictionary under that id: simulate it with a fresh id.
    with LocalConnector.from_config({**config, 'store_id': 'elsewhere-0'}) as rebuilt:
        assert rebuilt.get(key) == b'payload'
    with LocalConnector() as plain:
        assert 'data' not in {k for k, v in plain.config().items() if v is not None}


def test_file_connector_accepts_buffering(tmp_path: Any) -> None:
    from tether.connectors.file import FileConnector

    with FileConnector(tmp_path, buffering=0) as connector:
        assert connector.get(connector.put(b'abc')) == b'abc'
        assert FileConnector.from_config(connector.config()).buffering == 0


def test_time_stats_take_milliseconds_and_add() -> None:
    from tether.store.metrics import TimeStats

    stats = TimeStats(count=2, avg_time_ms=3.0, min_time_ms=1.0, max_time_ms=5.0)
    assert (stats.total_s, stats.min_s, stats.max_s) == (0.006, 0.001, 0.005)
    assert TimeStats(**stats.as_dict()) == stats
    first, second = TimeStats(), TimeStats()
    first.add_time(1)
    second.add_time(3)
    both = first + second
    assert (both.count, both.avg_time_ms, both.min_time_ms, both.max_time_ms) == (2, 2, 1, 3)
    assert both.last_time_ms == 3
    assert both + TimeStats() == both


def test_store_records_proxystores_size_attributes_and_batch_times() -> None:
    from tether.serialize import serialize

    values = ['a', 'bb', 'ccc']
    with Store('differences-metrics', LocalConnector(), metrics=True) as store:
        assert store.metrics is not None
        keys = store.put_batch(values)
        batch = store.metrics.get_metrics(keys)
        assert batch is not None
        sizes = sum(len(serialize(v)) for v in values)
        assert batch.attributes['store.put_batch.object_sizes'] == sizes
        one = store.put('x')
        assert store.metrics.get_metrics(one).attributes['store.put.object_size'] > 0  # type: ignore[union-attr]
        proxies = store.proxy_batch(values)
        assert store.metrics.get_metrics(proxies).times['store.proxy_batch'].count == 1  # type: ignore[union-attr]


def test_clone_owns_a_copy() -> None:
    from tether.store.ref import clone

    with Store('differences-clone', LocalConnector(), register=True) as store:
        owned = store.owned_proxy([1, 2, 3])
        cloned = clone(owned)
        assert is_resolved(cloned)
        cloned.append(4)
        assert cloned == [1, 2, 3, 4]
        assert owned == [1, 2, 3]


def test_unimportable_path_is_an_import_error() -> None:
    from tether.exceptions import ConfigError
    from tether.store.config import import_from_path

    for path in ('FileConnector', 'tether.connectors.file.NoSuchConnector'):
        with pytest.raises(ImportError) as info:
            import_from_path(path)
        assert isinstance(info.value, ConfigError)


def test_populated_proxy_with_a_custom_deserializer_is_the_object_given() -> None:
    with Store('differences-populate', LocalConnector(), register=True) as store:
        payload = pickle.dumps([1, 2, 3])
        p = store.proxy(payload, serializer=bytes, deserializer=pickle.loads)
        assert is_resolved(p)
        assert p == payload  # the object given, as ProxyStore caches it
        q = store.proxy(
            payload, serializer=bytes, deserializer=pickle.loads, populate_target=False
        )
        assert not is_resolved(q)
        assert q == [1, 2, 3]  # resolved through the deserializer


def test_missing_key_error_is_its_own_cause() -> None:
    from tether.exceptions import ProxyResolveMissingKeyError
    from tether.store.utils import get_key

    with Store('differences-missing', LocalConnector(), register=True) as store:
        p = store.proxy([1], populate_target=False)
        store.evict(get_key(p))
        with pytest.raises(ProxyResolveError) as info:
            str(p)
        assert isinstance(info.value.cause, ProxyResolveMissingKeyError)


def test_mark_refs_out_of_scope_ends_borrows_and_drops_owners() -> None:
    from concurrent.futures import Future

    from tether.store.ref import borrow, mut_borrow
    from tether.store.scopes import FutureWithCallback, mark_refs_out_of_scope

    assert isinstance(Future(), FutureWithCallback)
    with Store('differences-scope', LocalConnector(), register=True) as store:
        first, second = store.owned_proxy('one'), store.owned_proxy('two')
        shared, mutable = borrow(first), mut_borrow(second)
        mark_refs_out_of_scope(shared, shared, mutable)  # duplicates count once
        mut_borrow(first)  # the shared borrow ended, so this is allowed
        key = store.put('three')
        third = into_owned_of(store, key)
        mark_refs_out_of_scope(third)
        assert not store.exists(key)


def into_owned_of(store: Store[Any], key: Any) -> Any:
    from tether.store.ref import into_owned

    return into_owned(store.proxy_from_key(key))


def test_store_factory_takes_proxystores_two_type_parameters() -> None:
    from tether.store.factory import PollingStoreFactory, StoreFactory

    assert StoreFactory[Any, int] == StoreFactory[int]  # type: ignore[misc]
    assert PollingStoreFactory[Any, str] == PollingStoreFactory[str]  # type: ignore[misc]


def test_new_object_key_event_from_key() -> None:
    from tether.stream.events import NewObjectKeyEvent

    with Store('differences-event', LocalConnector()) as store:
        key = store.put(1)
        event = NewObjectKeyEvent.from_key(
            key, evict=True, metadata={'i': 1}, store_config=store.config(), topic='t'
        )
        assert (event.topic, event.key, event.evict) == ('t', key, True)
        assert event.get_key() == key
        assert event.store_config == store.config().model_dump()


def test_store_factory_resolve() -> None:
    from tether.store.factory import PollingStoreFactory, StoreFactory

    with Store('differences-resolve', LocalConnector()) as store:
        key = store.put([1, 2])
        assert StoreFactory(key, store.config()).resolve() == [1, 2]
        assert PollingStoreFactory(key, store.config()).resolve() == [1, 2]


def test_policy_takes_proxystores_field_names() -> None:
    from tether.connectors.multi import Policy

    # As StoreConfig(connector=...), the keywords type-check through model_validate.
    policy = Policy.model_validate(
        {'min_size_bytes': 1, 'max_size_bytes': 100, 'host_pattern': '.*'}
    )
    assert (policy.min_size, policy.max_size) == (1, 100)
    assert (policy.min_size_bytes, policy.max_size_bytes) == (1, 100)
    assert policy.is_valid(size_bytes=100)
    assert not policy.is_valid(size_bytes=101)
    assert policy.is_valid_on_host()
    assert policy.as_dict()['min_size_bytes'] == 1
    assert Policy(**policy.as_dict()) == policy
    with pytest.raises(ValueError, match='not both'):
        Policy.model_validate({'min_size': 1, 'min_size_bytes': 2})


def test_an_owner_dropped_after_its_store_closed_registers_no_store() -> None:
    import gc

    store = Store('differences-late-owner', LocalConnector(), register=True)
    owned = store.owned_proxy([1])
    store.close()
    assert get_store('differences-late-owner') is None
    del owned
    gc.collect()
    assert get_store('differences-late-owner') is None


def test_multi_connector_key_of_an_unknown_connector() -> None:
    from tether.connectors.multi import MultiConnector, Policy
    from tether.exceptions import ConnectorError, NoConnectorMatchError

    with MultiConnector({'only': (LocalConnector(), Policy())}) as multi:
        key = multi.put(b'x')._replace(connector_name='missing')
        with pytest.raises(NoConnectorMatchError, match='does not exist') as info:
            multi.exists(key)
        assert isinstance(info.value, ConnectorError)


def test_polling_factory_records_its_resolve() -> None:
    from tether.store.factory import PollingStoreFactory

    with Store('differences-polling', LocalConnector(), metrics=True) as store:
        key = store.put(1)
        assert PollingStoreFactory(key, store.config(), store=store)() == 1
        assert store.metrics is not None
        times = store.metrics.get_metrics(key).times  # type: ignore[union-attr]
        assert times['factory.polling_resolve'].count == 1


def test_local_connectors_given_one_dict_share_it() -> None:
    shared: dict[Any, Any] = {}
    with LocalConnector(shared) as first, LocalConnector(shared) as second:
        key = first.put(b'value')
        assert second.get(key) == b'value'
        with LocalConnector() as other:
            assert other.get(key) is None
