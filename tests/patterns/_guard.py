"""Proxies whose resolution fails the test when it happens in the submitting process.

A :class:`SubmitterGuard` is a store deserializer that records (and refuses) every call
made in the process that built it, except inside a task running there (thread pools run
their tasks in the submitter). Engines' workers import this module by name.
"""

from __future__ import annotations

import os
import threading
import traceback
from typing import Any

from tether.proxy import Proxy, extract, metadata_of, set_metadata
from tether.serialize import deserialize

# Calls refused in this process: (what, stack). The tests assert it stays empty.
VIOLATIONS: list[tuple[str, str]] = []
_in_task = threading.local()


class SubmitterGuard:
    """Deserializer that fails in the process (pid) that made it, outside of a task."""

    def __init__(self, what: str = 'proxy') -> None:
        self.pid = os.getpid()
        self.what = what

    def __repr__(self) -> str:
        return f'SubmitterGuard({self.what!r}, pid={self.pid})'

    def __call__(self, data: Any) -> Any:
        if os.getpid() == self.pid and not getattr(_in_task, 'active', False):
            VIOLATIONS.append((self.what, ''.join(traceback.format_stack())))
            raise AssertionError(f'{self.what} resolved in the submitting process')
        return deserialize(data)


def store_proxy(store: Any, obj: Any, *, known: bool = True, what: str = 'proxy') -> Proxy[Any]:
    """``store.proxy(obj)``, unresolved, whose resolution is refused in this process.

    With ``known`` the proxy carries the metadata a store gives its proxies (the target's
    class and hash); without, its class is unknown (as with any custom deserializer).
    """
    proxy: Proxy[Any] = store.proxy(obj, deserializer=SubmitterGuard(what), populate_target=False)
    if known:
        set_metadata(proxy, metadata_of(obj))
    return proxy


def future_of(store: Any, what: str = 'future') -> Any:
    """A future of ``store`` whose proxies refuse to resolve in this process."""
    return store.future(deserializer=SubmitterGuard(what), timeout=60)


def consume(data: Any) -> Any:
    """Consumer task: use the proxy (resolving it here) and return a plain copy."""
    _in_task.active = True
    try:
        value = extract(data) if isinstance(data, Proxy) else data
        return type(value).__name__, value, os.getpid()
    finally:
        _in_task.active = False


def set_result(future: Any, value: Any) -> int:
    """Producer task: set the future's result."""
    future.set_result(value)
    return os.getpid()


def make_proxies(store_config: Any, pid: int) -> list[Any]:
    """Task run in another process: proxies of a store there, refused in ``pid``.

    Returns proxies of a str and of a dict (classes known) and of a str of unknown class,
    then a proxy of a future made here, and that future (for the caller to set).
    """
    from tether.store._registry import get_or_create_store

    store = get_or_create_store(store_config)
    proxies: list[Any] = []
    for obj, known in (('received', True), ({'received': [1, 2]}, True), ('unknown', False)):
        guard = SubmitterGuard('received proxy')
        guard.pid = pid
        proxy = store.proxy(obj, deserializer=guard, populate_target=False)
        if known:
            set_metadata(proxy, metadata_of(obj))
        proxies.append(proxy)
    guard = SubmitterGuard('received future proxy')
    guard.pid = pid
    future: Any = store.future(deserializer=guard, timeout=60)
    proxies.append(future.proxy())
    return [*proxies, future]


class Engine:
    """How a test submits to one engine: ``submit(fn, *args)`` returns a handle, and
    ``result(handle)`` waits for it (a minute at most)."""

    def __init__(self, submit: Any, result: Any = None, *, threads: bool = False) -> None:
        self.submit = submit
        self.result = result or (lambda handle: handle.result(timeout=60))
        # Tasks run in the submitting process (a thread pool): they share its proxies.
        self.threads = threads


def check_passes_unresolved(engine: Engine, store: Any, make_remote: Any) -> None:
    """Submit proxies of every kind to ``engine``; none may resolve in this process.

    Proxies from ``store.proxy`` (class known: a str, a dict, bytes; class unknown), from a
    future whose consumer is submitted before its producer, and proxies (and a future)
    received from another process (``make_remote(store_config, pid)`` returns them).
    """
    from tether.proxy import is_resolved

    del VIOLATIONS[:]
    local = [
        store_proxy(store, 'text', what='store proxy of a str'),
        store_proxy(store, {'k': [1, 2]}, what='store proxy of a dict'),
        store_proxy(store, b'raw', what='store proxy of bytes'),
        store_proxy(store, 'unknown', known=False, what='store proxy of unknown class'),
    ]
    received = make_remote(store.config(), os.getpid())
    *remote, remote_proxy_of_future, remote_future = received
    proxies = [*local, *remote]
    handles = [engine.submit(consume, p) for p in proxies]
    results = [engine.result(h) for h in handles]
    assert [r[1] for r in results] == [
        'text',
        {'k': [1, 2]},
        b'raw',
        'unknown',
        'received',
        {'received': [1, 2]},
        'unknown',
    ]
    assert all(r[2] != os.getpid() for r in results) or engine.threads
    # Futures: the consumer first (submitting it must not wait for the result), then the
    # producer, one future at a time (a waiting consumer holds a worker).
    future = future_of(store)
    for proxy_of_future, fut in (
        (future.proxy(), future),
        (remote_proxy_of_future, remote_future),
    ):
        consumer = engine.submit(consume, proxy_of_future)
        producer = engine.submit(set_result, fut, 'later')
        engine.result(producer)
        assert engine.result(consumer)[1] == 'later'
        proxies.append(proxy_of_future)
    assert VIOLATIONS == [], VIOLATIONS[0][1]
    if not engine.threads:
        assert not any(is_resolved(p) for p in proxies)
