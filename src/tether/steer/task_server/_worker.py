"""What runs on a worker: unpack the inputs, run the method, pack the value."""

from __future__ import annotations

import functools
import inspect
import os
import pickle
import socket
import time
from collections.abc import Callable
from typing import Any

from tether.steer import _pack
from tether.steer.models import Result

__all__ = ['run_pickled_task', 'run_task']


def _store(config: Any) -> Any:
    if config is None:
        return None
    from tether.store import get_or_create_store

    return get_or_create_store(config)


def _forget_proxied(packed: _pack.Packed) -> None:
    """Drop the inputs the Thinker proxied for this task from this worker's store cache.

    They are unique to the task and the Thinker deletes them when its result arrives, so
    a cached copy would never be read again: it would only hold memory (up to the
    store's ``cache_size`` large inputs per worker), and keep the allocator from reusing
    it for the next input, which then faults in fresh pages. A resolve still running
    caches nothing once its key is dropped (see ``LRUCache.set``'s ``generation``).
    """
    from tether.proxy import get_factory
    from tether.store.factory import StoreFactory

    for index in packed.proxied:
        factory = get_factory(packed.items[index])
        if isinstance(factory, StoreFactory):
            store = factory.current_store()
            if store is not None:
                store.cache.evict(factory.key)


@functools.lru_cache(maxsize=256)
def _parameters(method: Callable[..., Any]) -> frozenset[str]:
    try:
        return frozenset(inspect.signature(method).parameters)
    except (TypeError, ValueError):
        return frozenset()


def _takes(method: Callable[..., Any], name: str) -> bool:
    """Whether ``method`` declares a parameter ``name`` (Colmena passes ``_resources``
    to the functions that do)."""
    try:
        return name in _parameters(method)
    except TypeError:  # unhashable callable
        return False


def run_task(method: Callable[..., Any], result: Result, options: Any = None) -> Result:
    """Run ``method`` on ``result``'s inputs in this worker and record the outcome.

    Proxied inputs start resolving in the background before the method is called, so
    their transfer overlaps the method's start. The value is serialized once and proxied
    into the topic's store if it is over the topic's threshold. Never raises for an error
    of the method: the failure is recorded in the result. ``options`` is the object
    whose ``wants_resources``/``wants_result`` say what extra keywords ``method`` takes
    (``method`` itself by default).
    """
    options = method if options is None else options
    result.timestamp.compute_started = time.time()
    result.worker_info = {'hostname': socket.gethostname(), 'pid': os.getpid()}
    packed = result.inputs
    runtime = None
    try:
        start = time.perf_counter()
        if isinstance(packed, _pack.Packed):
            packed.resolve_async(result.time.proxy)
            result.time.async_resolve_proxies = time.perf_counter() - start
            start = time.perf_counter()
            args, kwargs = packed.unpack()
            _pack.resolve_nested_async(args, kwargs, result.time.proxy)
        else:
            args, kwargs = packed
        result.time.deserialize_inputs = time.perf_counter() - start
        start = time.perf_counter()
        try:
            if getattr(options, 'wants_resources', False) or _takes(method, '_resources'):
                kwargs = {**kwargs, '_resources': result.resources}
            if getattr(options, 'wants_result', False):
                kwargs = {**kwargs, '_result': result}
            value = method(*args, **kwargs)
        finally:
            runtime = time.perf_counter() - start
        start = time.perf_counter()
        packed_value = _pack.pack_value(
            value,
            _store(result.proxystore_config),
            result.proxystore_threshold,
            result.time.proxy,
            fmt=result.serialization_method,
        )
        result.time.serialize_results = time.perf_counter() - start
        result.set_result(packed_value, runtime)
    except Exception as e:
        result.set_failure(e, runtime)
    if isinstance(packed, _pack.Packed):
        _forget_proxied(packed)
    # Inputs go back exactly as they came (no second serialization), or not at all.
    result.inputs = packed if result.keep_inputs else _pack.Packed([], ())
    return result


def run_pickled_task(method: Callable[..., Any], message: bytes) -> bytes:
    """:func:`run_task` on a pickled request; return the pickled finished result.

    For executors that serialize a task's arguments and return value themselves, and
    slowly (Parsl's, with dill): handed bytes, they have one string to copy each way.
    """
    result = run_task(method, pickle.loads(message))
    return pickle.dumps(result, protocol=5)
