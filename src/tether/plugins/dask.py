"""A drop-in ``dask.distributed.Client`` that passes large task data by proxy.

::

    from tether.plugins.dask import Client

    with Store('example', RedisConnector()) as store:
        client = Client(ps_store=store, ps_threshold=1000)
        future = client.submit(sum, [1, 2, 3])
        assert future.result() == 6

Arguments of :meth:`Client.submit` and :meth:`Client.map` whose serialized size is at least
``ps_threshold`` bytes are stored in ``ps_store`` and sent as proxies; so are results of at
least that size, which come back (and go to dependent tasks) as proxies. Sizes are
measured without serializing anything twice (buffers by their length; other objects are
serialized once and, when large, those bytes are what gets stored). Argument objects are
evicted when the task's future completes; result objects when the client closes.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from distributed import Client as _DaskClient

from tether.store.executor import ProxySize, TaskWrapper, decide
from tether.store.lifetimes import ContextLifetime

if TYPE_CHECKING:
    from tether.store import Store

__all__ = ['Client']

logger = logging.getLogger(__name__)

_DASK_OPTIONS = frozenset(
    {
        'actor',
        'actors',
        'allow_other_workers',
        'fifo_timeout',
        'key',
        'priority',
        'pure',
        'resources',
        'retries',
        'workers',
    },
)


class _DaskTask(TaskWrapper):
    """The store executor's task wrapper, with a Dask token of its own per submission."""

    def __dask_tokenize__(self) -> tuple[str, int, str]:
        return (self.__name__, id(self), repr(self.result_key))


class Client(_DaskClient):
    """``dask.distributed.Client`` with pass-by-proxy for large task inputs and results.

    Args:
        args: Passed to ``dask.distributed.Client``.
        ps_store: The store for proxied objects; ``None`` behaves as a plain Dask client.
        ps_threshold: Objects of at least this many (serialized) bytes are proxied.
        kwargs: Passed to ``dask.distributed.Client``.
    """

    def __init__(
        self,
        *args: Any,
        ps_store: Store[Any] | None = None,
        ps_threshold: int = 100_000,
        **kwargs: Any,
    ) -> None:
        self._ps_store = ps_store
        self._ps_threshold = ps_threshold
        self._ps_policy = ProxySize(ps_threshold)
        self._ps_results = None if ps_store is None else ContextLifetime(ps_store)
        super().__init__(*args, **kwargs)  # type: ignore[no-untyped-call]

    def _ps_proxy(self, obj: Any, lifetime: ContextLifetime) -> Any:
        assert self._ps_store is not None
        proxy, parts = decide(self._ps_policy, obj)
        if not proxy:
            return obj
        if parts is not None and self._ps_store.serializer is None:
            return self._ps_store.proxy_serialized(
                obj,
                parts,
                lifetime=lifetime,
                populate_target=False,
            )
        # Unpopulated: the task runs elsewhere; the client keeps no copy of the object.
        return self._ps_store.proxy(obj, lifetime=lifetime, populate_target=False)

    def submit(self, func: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        """Submit ``func(*args, **kwargs)`` like Dask, proxying large inputs and results."""
        store = self._ps_store
        if store is None or kwargs.get('actor') or kwargs.get('actors'):
            return super().submit(func, *args, **kwargs)
        options = {k: kwargs.pop(k) for k in list(kwargs) if k in _DASK_OPTIONS}
        lifetime = ContextLifetime(store)
        try:
            new_args = [self._ps_proxy(a, lifetime) for a in args]
            new_kwargs = {k: self._ps_proxy(v, lifetime) for k, v in kwargs.items()}
            deferrable = store.capabilities.deferrable
            result_key = None if deferrable is None else deferrable.new_key()
            if result_key is not None and self._ps_results is not None:
                self._ps_results.add_key(result_key, store=store)
            wrapped = _DaskTask(
                func, store.config(), self._ps_policy, ownership=False, result_key=result_key
            )
            future = super().submit(wrapped, *new_args, **options, **new_kwargs)
        except BaseException:
            lifetime.close()
            raise
        future.add_done_callback(lambda _: lifetime.close())  # type: ignore[no-untyped-call]
        return future

    def map(self, func: Callable[..., Any], *iterables: Any, **kwargs: Any) -> Any:
        """Map like Dask (one :meth:`submit` per item), proxying large inputs and results."""
        if self._ps_store is None:
            return super().map(func, *iterables, **kwargs)
        key = kwargs.pop('key', None)
        batch_size = kwargs.pop('batch_size', None)
        del batch_size
        items = list(zip(*iterables, strict=False))
        keys: list[Any] = list(key) if isinstance(key, list | tuple) else [None] * len(items)
        futures = []
        for i, item in enumerate(items):
            opts = dict(kwargs)
            if keys[i] is not None:
                opts['key'] = keys[i]
            elif isinstance(key, str):
                opts['key'] = f'{key}-{i}'
            futures.append(self.submit(func, *item, **opts))
        return futures

    def close(self, *args: Any, **kwargs: Any) -> Any:
        """Close the client and evict the result objects it proxied."""
        results = getattr(self, '_ps_results', None)
        if results is not None:
            results.close()
        return super().close(*args, **kwargs)  # type: ignore[no-untyped-call]
