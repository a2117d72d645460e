"""A Parsl executor that returns proxies intact, for ``StoreExecutor``.

Parsl serializes a task's result with its *code* serializers when ``callable(result)``
is true, and those hash the object. Every proxy is callable (it forwards ``__call__``), so
a proxy of an unhashable object (a list, an array) cannot come back from a plain Parsl
task. :class:`ParslPoolExecutor` is ``parsl.concurrent.ParslPoolExecutor`` with results
carried in a small box and unpacked in the caller::

    from tether.plugins.parsl import ParslPoolExecutor
    from tether.store.executor import ProxySize, StoreExecutor

    with StoreExecutor(ParslPoolExecutor(config), store, should_proxy=ProxySize(100_000)) as ex:
        assert ex.submit(sum, [1, 2, 3]).result() == 6

Futures are ``concurrent.futures.Future`` objects (not Parsl ``AppFuture``).
"""

from __future__ import annotations

import concurrent.futures
import weakref
from collections.abc import Callable
from typing import Any

from parsl.concurrent import ParslPoolExecutor as _ParslPoolExecutor

from tether.plugins._boxes import unbox_into

__all__ = ['ParslPoolExecutor']


class _Boxed:
    """Calls the function and returns its result inside a list (emptied by the caller)."""

    def __init__(self, function: Callable[..., Any]) -> None:
        self.function = function
        self.__name__ = getattr(function, '__name__', 'task')

    def __call__(self, *args: Any, **kwargs: Any) -> list[Any]:
        return [self.function(*args, **kwargs)]


class ParslPoolExecutor(_ParslPoolExecutor):
    """``parsl.concurrent.ParslPoolExecutor`` whose tasks can return proxies."""

    def submit(  # type: ignore[override]
        self,
        fn: Callable[..., Any],
        /,
        *args: Any,
        **kwargs: Any,
    ) -> Any:
        """Run ``fn(*args, **kwargs)`` as a Parsl app; return a concurrent future."""
        inner = super().submit(_Boxed(fn), *args, **kwargs)  # type: ignore[no-untyped-call]
        outer: concurrent.futures.Future[Any] = concurrent.futures.Future()
        outer.set_running_or_notify_cancel()
        # The engine may keep its own future (and its callbacks) for a while: hold ours
        # weakly so that an owned result has no second holder.
        ref = weakref.ref(outer)
        inner.add_done_callback(lambda f: unbox_into(f, ref))
        return outer
