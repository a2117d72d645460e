"""Each line of the resolution contract documented in docs/concepts.md holds.

The contract is copied from the docstring of :mod:`tether.proxy`; this test checks every
operation it lists, on a plain proxy (no metadata) and on a store proxy (class and hash
known), so that the page cannot drift from the code.
"""

from __future__ import annotations

import copy
import functools
import pickle
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from tether.proxy import Proxy, get_factory, is_resolved
from tether.store import Store


def _make(value: Any) -> Any:
    return value


def plain(value: Any) -> Proxy[Any]:
    return Proxy(functools.partial(_make, value))


@pytest.fixture
def store() -> Iterator[Store[Any]]:
    with Store('contract-test') as s:
        yield s


def _unhashable(p: Any) -> None:
    with pytest.raises(TypeError):
        hash(p)


NEVER: dict[str, Callable[[Any], Any]] = {
    'pickle.dumps': pickle.dumps,
    'copy.copy': copy.copy,
    'copy.deepcopy': copy.deepcopy,
    'type': type,
    'isinstance(p, Proxy)': lambda p: isinstance(p, Proxy),
    'id': id,
    'is_resolved': is_resolved,
    'get_factory': get_factory,
    'repr': repr,
}

METADATA: dict[str, Callable[[Any], Any]] = {
    'isinstance(p, C)': lambda p: isinstance(p, tuple),
    '__class__': lambda p: p.__class__,
    '__module__': lambda p: getattr(p, '__module__', None),  # tuples have none
    'hash': hash,
}

ALWAYS: dict[str, Callable[[Any], Any]] = {
    'attribute': lambda p: p.count,
    'method call': lambda p: p.count(1),
    'operator': lambda p: p * 2,
    'str': str,
    'format': lambda p: format(p, ''),
    'bool': bool,
    'len': len,
    'iteration': iter,
    'comparison': lambda p: p == (1, 2, 3),
    'dir': dir,
}


@pytest.mark.parametrize('op', NEVER.values(), ids=NEVER.keys())
def test_never_resolves(op: Callable[[Any], Any], store: Store[Any]) -> None:
    for p in (plain((1, 2, 3)), store.proxy((1, 2, 3), populate_target=False)):
        op(p)
        assert not is_resolved(p)


def test_repr_of_unresolved_and_resolved(store: Store[Any]) -> None:
    p = store.proxy((1, 2, 3), populate_target=False)
    assert repr(p).startswith('<Proxy of builtins.tuple (unresolved)')
    len(p)
    assert repr(p) == '(1, 2, 3)'
    assert repr(plain(1)).startswith('<Proxy of unknown (unresolved)')


@pytest.mark.parametrize('op', METADATA.values(), ids=METADATA.keys())
def test_metadata_resolves_only_when_unknown(op: Callable[[Any], Any], store: Store[Any]) -> None:
    known = store.proxy((1, 2, 3), populate_target=False)
    op(known)
    assert not is_resolved(known)
    unknown = plain((1, 2, 3))
    op(unknown)
    assert is_resolved(unknown)


def test_unhashable_target_raises_without_resolving(store: Store[Any]) -> None:
    p = store.proxy([1, 2, 3], populate_target=False)
    _unhashable(p)
    assert not is_resolved(p)


def test_metadata_survives_pickling(store: Store[Any]) -> None:
    p = pickle.loads(pickle.dumps(store.proxy((1, 2, 3), populate_target=False)))
    assert isinstance(p, tuple)
    assert hash(p) == hash((1, 2, 3))
    assert not is_resolved(p)


@pytest.mark.parametrize('op', ALWAYS.values(), ids=ALWAYS.keys())
def test_always_resolves(op: Callable[[Any], Any], store: Store[Any]) -> None:
    for p in (plain((1, 2, 3)), store.proxy((1, 2, 3), populate_target=False)):
        op(p)
        assert is_resolved(p)


def test_deepcopy_returns_an_unresolved_proxy() -> None:
    p = plain((1, 2, 3))
    q = copy.deepcopy(p)
    assert type(q) is Proxy
    assert not is_resolved(q)
    assert q == (1, 2, 3)
