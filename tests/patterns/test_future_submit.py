"""Issue 8 item 13: nothing an engine does at submit time blocks on a future's proxy.

Dask's ``tokenize`` (an ``isinstance`` on each argument), ``type()``, ``sizeof`` and
pickling must not wait for a result that a task not yet submitted would set. Decision: in
the process that made the future, an unresolved proxy whose class was not given answers
``isinstance`` for what it is, a ``Proxy``, while the result is not set, and for the
result once it is; a copy unpickled elsewhere (a consumer's) waits for the result, as any
proxy of unknown class does (docs/patterns/futures.md).
"""

from __future__ import annotations

import pickle
import sys
from typing import Any

import pytest

from tests.patterns import _tasks
from tether.proxy import Proxy, is_resolved
from tether.store import Store


def test_metadata_queries_do_not_wait(store: Store[Any]) -> None:
    from dask.base import tokenize
    from dask.sizeof import sizeof

    # A short timeout only bounds how long a regression takes to fail.
    future = store.future(timeout=1)
    proxy = future.proxy()
    assert type(proxy) is Proxy
    assert isinstance(proxy, Proxy)
    assert not isinstance(proxy, str)
    assert proxy.__class__ is Proxy
    assert proxy.__module__ == 'tether.proxy'
    assert tokenize(proxy) == tokenize(proxy)
    assert sizeof(proxy) > 0
    assert sys.getsizeof(proxy) > 0
    assert 'unresolved' in repr(proxy)
    data = pickle.dumps(proxy)
    assert not is_resolved(proxy)
    future.set_result('value')
    # Resolving no longer waits: the proxy answers for the result.
    assert isinstance(proxy, str)
    assert proxy.__class__ is str
    assert proxy == 'value'
    # A consumer's copy resolves to answer (it would wait if the result were not set).
    received = pickle.loads(data)
    assert isinstance(received, str)
    assert received.upper() == 'VALUE'


def test_a_consumer_copy_waits_for_isinstance(store: Store[Any]) -> None:
    from tether.exceptions import FutureTimeoutError

    future = store.future(timeout=0.2)
    received = pickle.loads(pickle.dumps(future.proxy()))
    with pytest.raises(FutureTimeoutError):
        isinstance(received, str)


def test_consumer_submitted_before_producer_on_dask(store: Store[Any], dask_client: Any) -> None:
    future = store.future(timeout=60)
    proxy = future.proxy()  # no target_class
    t2 = dask_client.submit(_tasks.consume, proxy)
    assert not is_resolved(proxy)
    t1 = dask_client.submit(_tasks.set_later, future, 'value')
    assert t2.result(timeout=60)[0] == 'value'
    t1.result(timeout=60)


def test_container_result_without_hint_on_dask(store: Store[Any], dask_client: Any) -> None:
    # A list result: without a hint Dask does not walk the proxy as a list at submit.
    future = store.future(timeout=60)
    t2 = dask_client.submit(_tasks.length, future.proxy())
    t1 = dask_client.submit(_tasks.set_later, future, [1, 2, 3])
    assert t2.result(timeout=60) == 3
    t1.result(timeout=60)
