"""The Proxy contract: lazy, once, transparent, cheap to pickle, and what resolves it."""

from __future__ import annotations

import asyncio
import copy
import logging
import operator
import pickle
import threading
import weakref
from typing import Any

import numpy as np
import pytest

from tether.exceptions import ProxyResolveError, ProxyResolveMissingKeyError
from tether.proxy import (
    Proxy,
    extract,
    get_factory,
    is_resolved,
    resolve,
    resolve_async,
    trace_resolution,
    where_resolved,
)
from tether.testing import hammer


class CountingFactory:
    """A picklable factory that counts its calls."""

    def __init__(self, obj: Any) -> None:
        self.obj = obj
        self.calls = 0

    def __call__(self) -> Any:
        self.calls += 1
        return self.obj


class BytesFactory:
    """A picklable factory that builds its target (so pickling it is small)."""

    def __init__(self, n: int) -> None:
        self.n = n
        self.calls = 0

    def __call__(self) -> bytes:
        self.calls += 1
        return bytes(self.n)


def make_list() -> list[int]:
    return [1, 2, 3]


class Point:
    def __init__(self, x: int, y: int) -> None:
        self.x = x
        self.y = y

    def norm1(self) -> int:
        return abs(self.x) + abs(self.y)


def test_seed_figure_3_2() -> None:
    # Figure 3.2 of the dissertation, imports changed.
    def factory_function() -> list[int]:
        return [1, 2, 3]

    p = Proxy(factory_function)
    assert p == [1, 2, 3]

    class ClassFactory:
        def __init__(self, obj: Any) -> None:
            self.obj = obj

        def __call__(self) -> Any:
            return self.obj

    x = np.array([1, 2, 3])
    p = Proxy(ClassFactory(x))
    assert isinstance(p, Proxy)
    assert isinstance(p, np.ndarray)
    assert np.array_equal(p, [1, 2, 3])
    assert np.sum(p) == 6
    y = x + p
    assert np.array_equal(y, [2, 4, 6])


def test_lazy_until_first_use() -> None:
    f = CountingFactory([1, 2])
    p = Proxy(f)
    assert f.calls == 0
    assert not is_resolved(p)
    assert len(p) == 2
    assert f.calls == 1
    assert is_resolved(p)


def test_factory_runs_once_under_threads() -> None:
    f = CountingFactory(list(range(100)))
    p = Proxy(f)
    results: list[int] = []
    hammer(lambda thread, call: results.append(sum(p)), threads=8, calls=1)
    assert f.calls == 1
    assert results == [4950] * 8


def test_factory_must_be_callable() -> None:
    with pytest.raises(TypeError, match='callable'):
        Proxy(42)  # type: ignore[arg-type]


def test_attribute_and_method_forwarding() -> None:
    p = Proxy(lambda: Point(3, -4))
    assert p.x == 3
    assert p.norm1() == 7
    p.x = 10
    assert extract(p).x == 10
    del p.y
    assert not hasattr(extract(p), 'y')


def test_missing_attribute_is_attribute_error() -> None:
    p = Proxy(lambda: Point(1, 2))
    with pytest.raises(AttributeError):
        _ = p.nonexistent


@pytest.mark.parametrize(
    ('op', 'a', 'b'),
    [
        (operator.add, 5, 3),
        (operator.sub, 5, 3),
        (operator.mul, 5, 3),
        (operator.truediv, 5, 3),
        (operator.floordiv, 5, 3),
        (operator.mod, 5, 3),
        (operator.pow, 5, 3),
        (operator.lshift, 5, 3),
        (operator.rshift, 5, 3),
        (operator.and_, 5, 3),
        (operator.or_, 5, 3),
        (operator.xor, 5, 3),
        (divmod, 5, 3),
        (operator.lt, 5, 3),
        (operator.le, 5, 3),
        (operator.gt, 5, 3),
        (operator.ge, 5, 3),
        (operator.eq, 5, 3),
        (operator.ne, 5, 3),
    ],
)
def test_binary_operators_both_sides(op: Any, a: int, b: int) -> None:
    assert op(Proxy(lambda: a), b) == op(a, b)
    assert op(a, Proxy(lambda: b)) == op(a, b)
    assert op(Proxy(lambda: a), Proxy(lambda: b)) == op(a, b)


def test_matmul() -> None:
    m = np.eye(2)
    p = Proxy(lambda: np.array([[1.0, 2.0], [3.0, 4.0]]))
    assert np.array_equal(p @ m, extract(p))
    assert np.array_equal(m @ p, extract(p))


def test_inplace_operators_rebind_target() -> None:
    p = Proxy(lambda: 1)
    q = p
    p += 2
    assert p is q
    assert p == 3
    lst = Proxy(lambda: [1])
    lst += [2]
    assert extract(lst) == [1, 2]


def test_unary_and_conversions() -> None:
    p = Proxy(lambda: -2.5)
    assert -p == 2.5
    assert +p == -2.5
    assert abs(p) == 2.5
    assert int(p) == -2
    assert float(p) == -2.5
    assert complex(p) == complex(-2.5)
    assert round(p) == -2
    import math

    assert math.floor(p) == -3
    assert math.ceil(p) == -2
    assert math.trunc(p) == -2
    i = Proxy(lambda: 5)
    assert ~i == -6
    assert [0, 1, 2, 3, 4, 5][i] == 5
    assert bool(Proxy(lambda: 0)) is False
    assert str(p) == '-2.5'
    assert f'{p:.1f}' == '-2.5'
    assert bytes(Proxy(lambda: b'ab')) == b'ab'


def test_containers() -> None:
    d = Proxy(lambda: {'a': 1})
    assert d['a'] == 1
    d['b'] = 2
    assert 'b' in d
    del d['a']
    assert list(d) == ['b']
    assert len(d) == 1
    lst = Proxy(lambda: [1, 2, 3])
    assert list(reversed(lst)) == [3, 2, 1]
    assert operator.length_hint(lst) == 3


def test_callable_and_context_manager() -> None:
    f = Proxy(lambda: lambda x: x * 2)
    assert f(21) == 42

    class Ctx:
        entered = False

        def __enter__(self) -> str:
            self.entered = True
            return 'inside'

        def __exit__(self, *args: object) -> None:
            self.entered = False

    c = Proxy(Ctx)
    with c as value:
        assert value == 'inside'
        assert c.entered
    assert not c.entered


def test_async_protocols() -> None:
    class AsyncCtx:
        async def __aenter__(self) -> int:
            return 1

        async def __aexit__(self, *args: object) -> None:
            return None

    class AsyncIter:
        def __init__(self) -> None:
            self.n = 0

        def __aiter__(self) -> AsyncIter:
            return self

        async def __anext__(self) -> int:
            self.n += 1
            if self.n > 2:
                raise StopAsyncIteration
            return self.n

    async def coro() -> int:
        return 7

    async def main() -> tuple[int, list[int], int]:
        async with Proxy(AsyncCtx) as v:
            pass
        items = [i async for i in Proxy(AsyncIter)]
        awaited = await Proxy(coro)
        return v, items, awaited

    assert asyncio.run(main()) == (1, [1, 2], 7)


def test_fspath() -> None:
    import os

    assert os.fspath(Proxy(lambda: '/tmp/x')) == '/tmp/x'


def test_dir_resolves_and_lists_target_attributes() -> None:
    p = Proxy(lambda: Point(1, 2))
    assert 'norm1' in dir(p)


def test_weakref_to_proxy() -> None:
    p = Proxy(make_list)
    r = weakref.ref(p)
    assert r() is p


# What does and does not resolve -------------------------------------------------------


def test_pickle_does_not_resolve_and_does_not_carry_target() -> None:
    f = BytesFactory(1_000_000)
    p = Proxy(f)
    data = pickle.dumps(p)
    assert f.calls == 0
    assert len(data) < 1_000
    q = pickle.loads(data)
    assert not is_resolved(q)
    assert len(q) == 1_000_000


def test_pickle_of_resolved_proxy_sends_factory_only() -> None:
    p = Proxy(BytesFactory(1_000_000))
    resolve(p)
    assert len(pickle.dumps(p)) < 1_000


def test_copy_does_not_resolve() -> None:
    f = CountingFactory([1])
    p = Proxy(f)
    c = copy.copy(p)
    d = copy.deepcopy(p)
    assert f.calls == 0
    assert isinstance(c, Proxy)
    assert isinstance(d, Proxy)


def test_type_and_isinstance_of_proxy_do_not_resolve() -> None:
    f = CountingFactory([1])
    p = Proxy(f)
    assert type(p) is Proxy
    assert isinstance(p, Proxy)
    assert f.calls == 0


def test_isinstance_with_known_class_does_not_resolve() -> None:
    f = CountingFactory(np.zeros(3))
    p = Proxy(f, target_class=np.ndarray)
    assert isinstance(p, np.ndarray)
    assert not isinstance(p, list)
    assert p.__class__ is np.ndarray
    assert p.__module__ == 'numpy'
    assert f.calls == 0


def test_isinstance_with_unknown_class_resolves() -> None:
    f = CountingFactory([1])
    p = Proxy(f)
    assert isinstance(p, list)
    assert f.calls == 1


def test_class_survives_pickling_without_resolving() -> None:
    f = CountingFactory(np.zeros(3))
    p = Proxy(f, target_class=np.ndarray, target_hash=None)
    q = pickle.loads(pickle.dumps(p))
    assert isinstance(q, np.ndarray)
    assert not is_resolved(q)


def test_hash_known_does_not_resolve() -> None:
    f = CountingFactory('abc')
    p = Proxy(f, target_class=str, target_hash=hash('abc'))
    assert hash(p) == hash('abc')
    assert f.calls == 0
    q = pickle.loads(pickle.dumps(p))
    assert hash(q) == hash('abc')


def test_hash_unknown_resolves() -> None:
    f = CountingFactory('abc')
    p = Proxy(f)
    assert hash(p) == hash('abc')
    assert f.calls == 1


def test_unhashable_target_raises_type_error() -> None:
    p = Proxy(lambda: [1])
    with pytest.raises(TypeError):
        hash(p)


def test_repr_does_not_resolve() -> None:
    f = CountingFactory([1, 2])
    p = Proxy(f, target_class=list)
    text = repr(p)
    assert 'unresolved' in text
    assert 'list' in text
    assert f.calls == 0
    resolve(p)
    assert repr(p) == '[1, 2]'


def test_get_factory_does_not_resolve() -> None:
    f = CountingFactory(1)
    p = Proxy(f)
    assert get_factory(p) is f
    assert f.calls == 0


def test_helpers() -> None:
    p = Proxy(make_list)
    assert not is_resolved(p)
    resolve(p)
    assert is_resolved(p)
    assert extract(p) == [1, 2, 3]
    assert type(extract(p)) is list


# Failures -----------------------------------------------------------------------------


def broken_factory() -> Any:
    raise KeyError('no such thing')


def test_factory_failure_is_proxy_resolve_error_naming_factory() -> None:
    p = Proxy(broken_factory)
    with pytest.raises(ProxyResolveError, match='broken_factory') as info:
        _ = p.anything
    assert isinstance(info.value.__cause__, KeyError)
    assert not is_resolved(p)


def test_factory_failure_retries_on_next_use() -> None:
    calls = []

    def flaky() -> int:
        calls.append(1)
        if len(calls) == 1:
            raise OSError('transient')
        return 5

    p = Proxy(flaky)
    with pytest.raises(ProxyResolveError):
        int(p)
    assert int(p) == 5


def test_tether_errors_keep_their_type() -> None:
    def missing() -> Any:
        raise ProxyResolveMissingKeyError(('k',), 'store-x')

    p = Proxy(missing)
    with pytest.raises(ProxyResolveMissingKeyError, match='store-x') as info:
        len(p)
    assert any('missing' in note for note in info.value.__notes__)


# resolve_async and tracing ------------------------------------------------------------


def test_resolve_async_overlaps_and_is_used() -> None:
    started = threading.Event()
    release = threading.Event()

    def slow() -> list[int]:
        started.set()
        release.wait(10)
        return [1]

    p = Proxy(slow)
    resolve_async(p)
    assert started.wait(10)
    assert not is_resolved(p)
    resolve_async(p)  # second call is a no-op
    release.set()
    assert p == [1]
    assert is_resolved(p)


def test_resolve_async_on_resolved_proxy_is_noop() -> None:
    p = Proxy(make_list)
    resolve(p)
    resolve_async(p)
    assert p == [1, 2, 3]


def test_resolve_async_failure_surfaces_on_use() -> None:
    p = Proxy(broken_factory)
    resolve_async(p)
    with pytest.raises(ProxyResolveError):
        len(p)


def test_trace_resolution_records_stack(caplog: pytest.LogCaptureFixture) -> None:
    trace_resolution(True)
    try:
        p = Proxy(make_list)
        with caplog.at_level(logging.INFO, logger='tether.proxy'):
            len(p)
        stack = where_resolved(p)
        assert stack is not None
        assert 'test_trace_resolution_records_stack' in stack
        assert any('resolved' in r.message for r in caplog.records)
    finally:
        trace_resolution(False)
    q = Proxy(make_list)
    len(q)
    assert where_resolved(q) is None
