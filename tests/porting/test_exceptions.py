"""Where ProxyStore raised a builtin, tether's exception is also that builtin."""

from __future__ import annotations

import gc
from collections.abc import Iterator
from typing import Any

import pytest

from tether import exceptions as ex
from tether.connectors.file import FileConnector
from tether.connectors.local import LocalConnector
from tether.store import Store, ref
from tether.store.lifetimes import ContextLifetime


class _NoDeferral:
    """A connector without new_key/set (what ProxyStore called non-deferrable)."""

    def __init__(self) -> None:
        self._inner = LocalConnector()

    def put(self, data: bytes) -> Any:
        return self._inner.put(data)

    def get(self, key: Any) -> Any:
        return self._inner.get(key)

    def exists(self, key: Any) -> bool:
        return self._inner.exists(key)

    def evict(self, key: Any) -> None:
        self._inner.evict(key)

    def put_batch(self, datas: Any) -> Any:
        return self._inner.put_batch(datas)

    def config(self) -> dict[str, Any]:
        return {}

    @classmethod
    def from_config(cls, config: dict[str, Any]) -> _NoDeferral:
        return cls()

    def close(self) -> None:
        self._inner.close()


@pytest.fixture
def store() -> Iterator[Store[Any]]:
    with Store('porting-exc', LocalConnector()) as s:
        yield s


@pytest.mark.parametrize(
    ('cls', 'builtin'),
    [
        (ex.InvalidArgumentError, ValueError),
        (ex.MissingCapabilityError, NotImplementedError),
        (ex.SerializerOutputError, TypeError),
        (ex.LifetimeError, RuntimeError),
        (ex.LifetimeArgumentError, ValueError),
        (ex.OwnershipError, RuntimeError),
        (ex.AlreadyOwnedError, ValueError),
        (ex.FutureTimeoutError, TimeoutError),
    ],
)
def test_classes_subclass_the_builtin(cls: type, builtin: type) -> None:
    assert issubclass(cls, builtin)
    assert issubclass(cls, ex.TetherError)


def test_ownership_errors_keep_proxystore_finer_classes() -> None:
    for name in ('MutableBorrowError', 'ReferenceNotOwnedError', 'ReferenceInvalidError'):
        cls = getattr(ref, name)
        assert cls is getattr(ex, name)
        assert issubclass(cls, ex.OwnershipError)
    assert ref.BaseRefProxyError is ex.OwnershipError


def test_future_without_deferral_is_not_implemented() -> None:
    with Store('porting-nodefer', _NoDeferral()) as s, pytest.raises(NotImplementedError):
        s.future()


def test_serializer_returning_text_is_a_type_error(store: Store[Any]) -> None:
    with pytest.raises(TypeError):
        store.put('x', serializer=str)  # type: ignore[arg-type]
    with pytest.raises(ex.SerializationError):
        store.put('x', serializer=str)  # type: ignore[arg-type]


def test_evict_and_lifetime_is_a_value_error(store: Store[Any]) -> None:
    with pytest.raises(ValueError, match='lifetime'), ContextLifetime(store) as lt:
        store.proxy(1, evict=True, lifetime=lt)


def test_ended_lifetime_is_a_runtime_error(store: Store[Any]) -> None:
    lt = ContextLifetime(store)
    lt.close()
    with pytest.raises(RuntimeError):
        lt.add_key(store.put(1))


def test_borrow_errors(store: Store[Any]) -> None:
    owned = store.owned_proxy([1])
    mut = ref.mut_borrow(owned)
    with pytest.raises(ref.MutableBorrowError):
        ref.borrow(owned)
    with pytest.raises(ref.MutableBorrowError):
        ref.mut_borrow(owned)
    with pytest.raises(ref.ReferenceNotOwnedError):
        ref.borrow(mut)  # type: ignore[arg-type]
    with pytest.raises(ref.ReferenceNotOwnedError):
        ref.clone(store.proxy([2]))  # type: ignore[arg-type]
    shared_owner = store.owned_proxy([3])
    shared = ref.borrow(shared_owner)
    with pytest.raises(ref.ReferenceNotOwnedError):
        ref.update(shared)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match='into_owned'):
        ref.into_owned(owned)
    del mut, shared
    gc.collect()


def test_dropped_owner_is_invalid(store: Store[Any]) -> None:
    owned = store.owned_proxy([1])
    ref.drop(owned)
    with pytest.raises(ref.ReferenceInvalidError):
        ref.borrow(owned)


def test_update_without_set_is_not_implemented() -> None:
    with Store('porting-noset', _NoDeferral()) as s:
        owned = s.owned_proxy([1])
        owned.append(2)
        with pytest.raises(NotImplementedError):
            ref.update(owned)
        ref.drop(owned)


def test_file_connector_store_exception_sanity(tmp_path: Any) -> None:
    # Errors the porting guide says stay as they were: a closed store is a StoreError.
    s = Store('porting-closed', FileConnector(str(tmp_path)))
    s.close()
    with pytest.raises(ex.StoreError):
        s.put(1)
