"""Proxy-level names a ProxyStore program uses: factories, ProxyLocker, Proxy keywords."""

from __future__ import annotations

import pickle
from typing import Any

import pytest

from tether.factory import Factory, LambdaFactory, SimpleFactory
from tether.proxy import Proxy, ProxyLocker, extract, is_resolved


def _fetch(n: int, *, scale: int = 1) -> list[int]:
    return [i * scale for i in range(n)]


def test_simple_factory_returns_its_object_and_pickles() -> None:
    factory = SimpleFactory([1, 2, 3])
    assert factory() == [1, 2, 3]
    assert factory.resolve() == [1, 2, 3]
    p = Proxy(pickle.loads(pickle.dumps(factory)))
    assert p == [1, 2, 3]


def test_lambda_factory_calls_with_arguments_and_pickles() -> None:
    factory: LambdaFactory[list[int]] = LambdaFactory(_fetch, 3, scale=2)
    assert factory() == [0, 2, 4]
    p = pickle.loads(pickle.dumps(Proxy(factory)))
    assert not is_resolved(p)
    assert p == [0, 2, 4]


def test_lambda_factory_refuses_a_non_callable() -> None:
    with pytest.raises(TypeError):
        LambdaFactory(42)  # type: ignore[arg-type]


def test_factory_base_needs_resolve() -> None:
    with pytest.raises(NotImplementedError):
        Factory()()


def test_proxy_with_preset_target_starts_resolved() -> None:
    calls: list[int] = []

    def factory() -> list[int]:
        calls.append(1)
        return [9]

    p = Proxy(factory, target=[1, 2])
    assert is_resolved(p)
    assert p == [1, 2]
    assert calls == []


def test_proxy_cache_defaults_survive_pickling_unresolved() -> None:
    p = Proxy(SimpleFactory((1, 2)), target=(1, 2), cache_defaults=True)
    q = pickle.loads(pickle.dumps(p))
    assert not is_resolved(q)
    assert isinstance(q, tuple)
    assert hash(q) == hash((1, 2))
    assert not is_resolved(q)
    # Without cache_defaults tether still sends the class of a resolved target, but
    # not its hash: hashing the copy resolves it.
    without = pickle.loads(pickle.dumps(Proxy(SimpleFactory((1, 2)), target=(1, 2))))
    assert isinstance(without, tuple)
    assert not is_resolved(without)
    assert hash(without) == hash((1, 2))
    assert is_resolved(without)


def test_proxy_locker_hides_the_proxy_until_unlocked() -> None:
    p: Proxy[list[int]] = Proxy(SimpleFactory([1]))
    locker = ProxyLocker(p)
    with pytest.raises(AttributeError):
        locker._proxy
    assert locker.unlock() is p
    assert not is_resolved(p)
    again = pickle.loads(pickle.dumps(locker))
    assert not is_resolved(again.unlock())
    assert again.unlock() == [1]


class _Tagged(Proxy[Any]):
    __slots__ = ('tag',)
    kind = 'tagged'

    def describe(self) -> str:
        return f'{self.tag}: {len(self)} items'

    @property
    def size(self) -> int:
        return len(extract(self))


def test_proxy_subclass_serves_its_own_attributes_and_methods() -> None:
    p = _Tagged(SimpleFactory([1, 2, 3]))
    p.tag = 'mine'
    assert not is_resolved(p)  # setting the subclass's slot did not resolve
    assert p.tag == 'mine'
    assert p.kind == 'tagged'
    assert not is_resolved(p)
    assert p.describe() == 'mine: 3 items'
    assert p.size == 3
    assert p.count(2) == 1  # everything else is forwarded to the target
    p.append(4)
    assert extract(p) == [1, 2, 3, 4]
    del p.tag
    with pytest.raises(AttributeError):
        p.tag


def test_index_uses_the_target() -> None:
    p = Proxy(SimpleFactory(2))
    assert [10, 20, 30][p] == 30
    assert 'abc'[:p] == 'ab'
    assert hex(p) == '0x2'
