"""What engines and user code are told about an unresolved proxy's class.

Engine code (Dask, distributed, Ray, Parsl, cloudpickle, pickle, inspect ... and modules
registered with ``register_engine_module``) asking for the class of a proxy whose class
is unknown, or is a container an engine would walk, is told ``Proxy``, without resolving.
User code keeps the contract: the target's class, from the metadata or by resolving.
"""

from __future__ import annotations

import functools
import inspect
import pickle
import types
import uuid
from typing import Any

import pytest

from tether.proxy import Proxy, is_resolved, register_engine_module


class _Refuse:
    """A factory that fails the test when called."""

    def __call__(self) -> Any:
        raise AssertionError('the proxy was resolved')


class _Give:
    def __init__(self, value: Any) -> None:
        self.value = value

    def __call__(self) -> Any:
        return self.value


def _engine_module(source: str) -> types.ModuleType:
    """A module of a made-up engine, registered as one."""
    name = f'fake_engine_{uuid.uuid4().hex[:8]}'
    module = types.ModuleType(name)
    exec(source, module.__dict__)
    register_engine_module(name)
    return module


class OwnNames(Proxy[Any]):
    """A proxy subclass serving a name of its own (a __getattribute__ is installed)."""

    tag = 'own'


class OwnLookup(Proxy[Any]):
    """A proxy subclass with its own __getattribute__."""

    def __getattribute__(self, name: str) -> Any:
        return Proxy.__getattribute__(self, name)


@pytest.mark.parametrize('kind', [Proxy, OwnNames, OwnLookup])
@pytest.mark.parametrize('target_class', [None, dict, list, tuple, bytes])
def test_engine_code_is_told_proxy(kind: type[Proxy[Any]], target_class: type | None) -> None:
    engine = _engine_module(
        'def classify(x):\n    return isinstance(x, (dict, list, tuple, bytes))\n'
    )
    proxy = kind(_Refuse(), target_class=target_class)
    assert engine.classify(proxy) is False
    assert not is_resolved(proxy)


def test_user_code_keeps_the_contract() -> None:
    # Known class, a container included: answered from the metadata, unresolved.
    proxy: Proxy[Any] = Proxy(_Refuse(), target_class=dict)
    assert isinstance(proxy, dict)
    assert proxy.__class__ is dict
    assert proxy.__module__ == 'builtins'
    assert not is_resolved(proxy)
    # Unknown class: resolving tells.
    unknown: Proxy[Any] = Proxy(_Give([1, 2]))
    assert isinstance(unknown, list)
    assert is_resolved(unknown)
    # Once resolved, engines are still told Proxy for a container (they would walk it).
    engine = _engine_module('def cls(x):\n    return x.__class__\n')
    assert engine.cls(unknown) is Proxy


def test_singledispatch_asks_for_its_caller() -> None:
    @functools.singledispatch
    def kind(x: Any) -> str:
        return 'object'

    @kind.register
    def _(x: list) -> str:  # type: ignore[type-arg]
        return 'list'

    # Called by user code: dispatches on the target's class.
    assert kind(Proxy(_Give([1]))) == 'list'
    # Called by an engine: the proxy is a Proxy, unresolved.
    engine = _engine_module('def call(f, x):\n    return f(x)\n')
    proxy: Proxy[Any] = Proxy(_Refuse())
    assert engine.call(kind, proxy) == 'object'
    assert not is_resolved(proxy)


def test_dask_inspection_does_not_resolve() -> None:
    from dask._task_spec import parse_input
    from dask.tokenize import tokenize
    from distributed.protocol.pickle import dumps

    for target_class in (None, dict, str):
        proxy: Proxy[Any] = Proxy(_Refuse(), target_class=target_class)
        assert parse_input(proxy) is proxy
        tokenize(proxy)
        assert isinstance(pickle.loads(dumps(proxy)), Proxy)  # type: ignore[no-untyped-call]
        assert inspect.getmodule(proxy) is not None
        assert not is_resolved(proxy)


def test_cloudpickle_does_not_resolve() -> None:
    import cloudpickle

    proxy: Proxy[Any] = Proxy(_Refuse())
    assert isinstance(pickle.loads(cloudpickle.dumps(proxy)), Proxy)
    assert not is_resolved(proxy)
