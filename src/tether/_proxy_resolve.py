"""Resolving proxies: the factory call (once, under a lock), in the background, traced;
and the answers a proxy gives about its class without resolving when it can.

Private to :mod:`tether.proxy` (whose docstring states what resolves and what does not).
"""

from __future__ import annotations

import concurrent.futures
import logging
import os
import threading
import traceback
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Final, TypeVar, cast

from tether._proxy_engine import asked_by_engine, skip_frames_of
from tether._proxy_slots import (
    MISSING_TARGET,
    SLOTS,
    set_slot,
    slot_class,
    slot_factory,
    slot_lock,
    slot_pending,
    slot_shown,
    slot_target,
    slot_trace,
)
from tether.exceptions import ProxyResolveError, TetherError

if TYPE_CHECKING:
    from tether._proxy_core import Proxy

__all__ = [
    'LOCAL_NAMES',
    'class_of',
    'extract',
    'get_factory',
    'is_resolved',
    'local_attribute',
    'resolve',
    'resolve_async',
    'resolve_now',
    'target_of',
    'trace_resolution',
    'where_resolved',
]

T = TypeVar('T')

logger = logging.getLogger('tether.proxy')

_trace_enabled = os.environ.get('TETHER_TRACE_RESOLVE', '') not in ('', '0')

_async_pool: concurrent.futures.ThreadPoolExecutor | None = None
_async_pool_lock = threading.Lock()

skip_frames_of(globals())


def trace_resolution(enabled: bool = True) -> None:
    """Turn on (or off) the logging of the stack at which each proxy resolves.

    When on, every resolution logs the resolving stack at ``INFO`` on the logger
    ``tether.proxy`` and keeps it on the proxy for :func:`where_resolved`. The
    environment variable ``TETHER_TRACE_RESOLVE=1`` turns it on at import.
    """
    global _trace_enabled
    _trace_enabled = enabled


LOCAL_NAMES: Final[frozenset[str]] = frozenset(
    (
        *SLOTS,
        '__class__',
        '__copy__',
        '__init__',
        '__deepcopy__',
        '__module__',
        '__reduce__',
        '__reduce_ex__',
        '__weakref__',
        # Dask probes task arguments for these; a proxy is plain data to Dask and must
        # not resolve (or be mistaken for a Dask collection or future) when probed.
        '__dask_tokenize__',
        '__dask_future__',
        '__dask_graph__',
        '__dask_keys__',
        '__dask_layers__',
        '__dask_optimize__',
        '__dask_postcompute__',
        '__dask_postpersist__',
        '__dask_scheduler__',
    ),
)
"""Names a proxy serves itself (never forwarded to the target, never resolving it).

A subclass that intercepts attribute access (``__getattribute__``) lets these through
untouched, as :class:`~tether.proxy.Proxy` does.
"""


def local_attribute(proxy: Any, name: str) -> Any:
    """One of :data:`LOCAL_NAMES` of ``proxy``, served by the proxy itself."""
    if name == '__class__':
        cls = slot_shown(proxy)
        if cls is not None:
            return cls
        return class_of(proxy)
    if name == '__module__':
        cls = slot_shown(proxy)
        return (cls if cls is not None else class_of(proxy)).__module__
    return object.__getattribute__(proxy, name)


# Where, counted from ``asked_by_engine``, the search for the asker starts: past itself,
# ``class_of`` and its caller (``local_attribute`` or the ``__class__`` getter), so at
# the ``__getattribute__`` that called ``local_attribute`` (skipped by the search) or at
# whoever called the getter. Starting there spares Python materializing the frames below.
_ASKER_START = 3


def class_of(proxy: Any) -> type:
    """``__class__`` of a proxy whose class is unknown or engine-special, by who asks.

    Engine code (see :func:`register_engine_module`) inspecting a task argument is told
    the proxy is a :class:`~tether.proxy.Proxy`, resolved or not: it then handles the
    proxy as opaque data and pickles it (its factory), instead of resolving it, waiting
    for a future's result, walking a container's items or sending a buffer raw. Anyone
    else is told
    the target's class: from the metadata if known, else by resolving (a future's proxy
    not set yet, in the process that made the future, answers
    :class:`~tether.proxy.Proxy` instead of waiting).
    """
    if asked_by_engine(_ASKER_START):
        return type(proxy)
    cls = slot_class(proxy)
    if cls is not None:
        return cast(type, cls)
    target = slot_target(proxy)
    if target is MISSING_TARGET:
        if _may_block(proxy):
            return type(proxy)
        target = resolve_now(proxy)
    return type(target)


def _may_block(proxy: Any) -> bool:
    """Whether resolving ``proxy`` now would wait on another task (a future not set yet).

    Factories say that resolving may wait with a true ``resolve_may_block`` attribute,
    and may offer ``ready()`` (true once resolving would not wait). The factories of
    :meth:`tether.store.future.Future.proxy` do, in the process that made the future.
    Metadata queries (``__class__``, ``isinstance``, ``__module__``) on such an
    unresolved proxy of unknown class answer for the proxy itself instead of waiting.
    """
    factory = slot_factory(proxy)
    if not getattr(factory, 'resolve_may_block', False):
        return False
    ready = getattr(factory, 'ready', None)
    return ready is None or not ready()


def target_of(proxy: Any) -> Any:
    """The target of ``proxy``, resolving it first if needed."""
    target = slot_target(proxy)
    if target is MISSING_TARGET:
        return resolve_now(proxy)
    return target


def resolve_now(proxy: Any) -> Any:
    """Call the factory of ``proxy`` (once, under its lock) and keep the target."""
    with slot_lock(proxy):
        target = slot_target(proxy)
        if target is not MISSING_TARGET:
            return target
        pending = slot_pending(proxy)
        factory = slot_factory(proxy)
        try:
            target = pending.result() if pending is not None else factory()
        except TetherError as e:
            # Our own errors (missing key, corrupt bytes, server down) keep their type.
            e.add_note(f'while resolving a proxy with factory {factory!r}')
            raise
        except Exception as e:
            raise ProxyResolveError(
                f'factory {factory!r} of a proxy raised {type(e).__name__}: {e}',
            ) from e
        finally:
            set_slot(proxy, '__proxy_pending__', None)
        set_slot(proxy, '__proxy_target__', target)
        if _trace_enabled:
            stack = ''.join(traceback.format_stack()[:-2])
            set_slot(proxy, '__proxy_trace__', stack)
            logger.info(
                'proxy of %s resolved by factory %r at:\n%s',
                type(target).__qualname__,
                factory,
                stack,
            )
        return target


def extract(proxy: Proxy[T]) -> T:
    """Return the target of ``proxy``, resolving it first if needed."""
    return cast(T, target_of(proxy))


def get_factory(proxy: Proxy[T]) -> Callable[[], T]:
    """Return the factory of ``proxy`` (does not resolve)."""
    return cast(Callable[[], T], slot_factory(proxy))


def is_resolved(proxy: Proxy[Any]) -> bool:
    """Return ``True`` when the target of ``proxy`` is already resolved (does not resolve)."""
    return slot_target(proxy) is not MISSING_TARGET


def resolve(proxy: Proxy[Any]) -> None:
    """Resolve ``proxy`` in place, now, if it is not resolved yet."""
    target_of(proxy)


def _forget_pool_after_fork() -> None:
    # A forked child inherits the pool object but none of its threads; worse, the pool's
    # idle-thread count says a thread is waiting, so it would never start one, and every
    # resolve_async in the child (a task server's worker forked from a process that had
    # resolved a proxy in the background) would wait forever. The child starts afresh.
    global _async_pool, _async_pool_lock
    _async_pool = None
    _async_pool_lock = threading.Lock()


os.register_at_fork(after_in_child=_forget_pool_after_fork)


def _pool() -> concurrent.futures.ThreadPoolExecutor:
    global _async_pool
    with _async_pool_lock:
        if _async_pool is None:
            _async_pool = concurrent.futures.ThreadPoolExecutor(
                max_workers=min(32, (os.cpu_count() or 1) + 4),
                thread_name_prefix='tether-resolve',
            )
        return _async_pool


def resolve_async(proxy: Proxy[Any]) -> None:
    """Start resolving ``proxy`` in the background and return at once.

    The fetch overlaps with whatever the caller does next; the first use of the proxy
    waits for it to finish. The work runs on a small shared thread pool, not a thread per
    proxy. Calling it on a resolved (or already resolving) proxy does nothing.
    """
    if slot_target(proxy) is not MISSING_TARGET:
        return
    with slot_lock(proxy):
        if slot_target(proxy) is not MISSING_TARGET or slot_pending(proxy) is not None:
            return
        factory = slot_factory(proxy)
        set_slot(proxy, '__proxy_pending__', _pool().submit(factory))


def where_resolved(proxy: Proxy[Any]) -> str | None:
    """Return the stack at which ``proxy`` resolved, if tracing was on at that moment."""
    return cast(str | None, slot_trace(proxy))
