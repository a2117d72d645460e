"""A ``concurrent.futures`` executor that runs tasks on Ray, for ``StoreExecutor``.

::

    import ray
    from tether.plugins.ray import RayExecutor
    from tether.store.executor import ProxySize, StoreExecutor

    ray.init(num_cpus=2, include_dashboard=False)
    with StoreExecutor(RayExecutor(), store, should_proxy=ProxySize(100_000)) as ex:
        assert ex.submit(sum, [1, 2, 3]).result() == 6

Arguments are pickled as one tuple, so Ray ``ObjectRef`` arguments are passed through as
references (call ``ray.get`` in the task) instead of being resolved by Ray.

Ray is imported when the first :class:`RayExecutor` is built (``pip install
"tether[ray]"``); ``ray.init`` is called then if it was not called before.
"""

from __future__ import annotations

import concurrent.futures
import weakref
from collections.abc import Callable
from typing import Any

from tether._extras import import_extra
from tether.plugins._boxes import unbox_into

__all__ = ['RayExecutor']


def _invoke(
    function: Callable[..., Any],
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
) -> list[Any]:
    # The result travels inside a list for the same reason as the arguments (emptied by
    # the caller, so that an owned result has one holder).
    return [function(*args, **kwargs)]


class RayExecutor(concurrent.futures.Executor):
    """Submit functions as Ray tasks; futures are ``concurrent.futures.Future``.

    Args:
        init_kwargs: Passed to ``ray.init`` if Ray is not initialised yet.
        shutdown_ray: Call ``ray.shutdown()`` on :meth:`shutdown`.
        remote_options: Passed to ``ray.remote`` (``num_cpus`` ...).
    """

    def __init__(
        self,
        *,
        init_kwargs: dict[str, Any] | None = None,
        shutdown_ray: bool = False,
        **remote_options: Any,
    ) -> None:
        ray = import_extra('ray', 'RayExecutor needs Ray', 'ray')
        self._ray = ray
        if not ray.is_initialized():
            ray.init(**(init_kwargs or {}))
        remote = ray.remote(**remote_options) if remote_options else ray.remote
        self._remote = remote(_invoke)
        self._shutdown_ray = shutdown_ray
        self._closed = False

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Any:
        """Run ``fn(*args, **kwargs)`` as a Ray task and return its future."""
        if self._closed:
            raise RuntimeError('cannot schedule new tasks after shutdown')
        # Arguments travel inside one tuple: Ray special-cases top-level arguments by type
        # (``isinstance(arg, bytes)``), which a proxy of bytes would pass without being bytes.
        inner = self._remote.remote(fn, args, kwargs).future()
        outer: concurrent.futures.Future[Any] = concurrent.futures.Future()
        outer.set_running_or_notify_cancel()
        # The engine may keep its own future (and its callbacks) for a while: hold ours
        # weakly so that an owned result has no second holder.
        ref = weakref.ref(outer)
        inner.add_done_callback(lambda f: unbox_into(f, ref))
        return outer

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        """Stop accepting tasks (and shut Ray down if ``shutdown_ray``)."""
        self._closed = True
        if self._shutdown_ray:
            self._ray.shutdown()
