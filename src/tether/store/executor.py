"""StoreExecutor: pass-by-proxy for any ``concurrent.futures``-style executor.

:class:`StoreExecutor` wraps an executor (process or thread pool, ``dask.distributed
.Client``, ``parsl.concurrent.ParslPoolExecutor``, :class:`tether.plugins.ray.RayExecutor`
...) and a :class:`~tether.store.Store`. Task arguments and results that the policy
``should_proxy`` selects travel as proxies, and what the executor proxied is evicted once
no task needs it:

* ``ownership=True`` (default): each proxied argument becomes an
  :class:`~tether.store.ref.OwnedProxy` held by the executor; the task receives a shared
  borrow, and the object is evicted when the task's future completes. Results come back
  as owned proxies: the object is evicted when the caller drops the result.
* ``ownership=False``: arguments are evicted when the task's future completes; result
  objects are evicted when the executor shuts down.

Policies: :class:`ProxyAlways`, :class:`ProxyNever`, :class:`ProxyType` and
:class:`ProxySize`, or any ``Callable[[object], bool]``. :class:`ProxySize` measures an
object by serializing it and, when it is large enough, stores those same bytes: nothing
is serialized twice.

Results are proxied where the task runs, by :class:`TaskWrapper`, which the executor
submits in place of each function; integrations that submit to an engine themselves
(:class:`tether.plugins.dask.Client`) use it too.
"""

from __future__ import annotations

import concurrent.futures
import dataclasses
import logging
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar, cast

from tether.exceptions import NonProxiableTypeError, SerializationError
from tether.proxy import Proxy, extract, get_factory
from tether.serialize import BytesLike, serialize_parts
from tether.store._registry import get_or_create_store
from tether.store.factory import StoreFactory
from tether.store.lifetimes import ContextLifetime
from tether.store.ref import (
    OwnedProxy,
    RefMutProxy,
    RefProxy,
    borrow,
    drop,
    end_borrow,
    into_owned,
)

if TYPE_CHECKING:
    from tether.store._store import Store
    from tether.store.config import StoreConfig

__all__ = [
    'ProxyAlways',
    'ProxyNever',
    'ProxySize',
    'ProxyType',
    'StoreExecutor',
    'TaskWrapper',
    'decide',
]

logger = logging.getLogger(__name__)

T = TypeVar('T')

_NONPROXIABLE = (type(None), bool, type(NotImplemented), type(Ellipsis))


class _Constant:
    """A policy giving the same answer for every object."""

    answer: bool

    def __call__(self, obj: Any) -> bool:
        return self.answer


class ProxyAlways(_Constant):
    """Policy: proxy every object (except ``None``, bools, ``...`` and proxies)."""

    answer = True


class ProxyNever(_Constant):
    """Policy: proxy nothing."""

    answer = False


class ProxyType:
    """Policy: proxy objects of any of ``types`` (``isinstance``)."""

    def __init__(self, *types: type) -> None:
        self.types = types

    def __call__(self, obj: Any) -> bool:
        return isinstance(obj, self.types)


def _cheap_size(obj: Any) -> int | None:
    """Size of buffer-like objects, known without serializing; ``None`` otherwise."""
    if isinstance(obj, bytes | bytearray):
        return len(obj)
    if isinstance(obj, memoryview):
        return obj.nbytes
    if isinstance(obj, str):
        return len(obj)
    nbytes = getattr(type(obj), 'nbytes', None)
    if nbytes is not None and type(obj).__module__.startswith('numpy'):
        return int(obj.nbytes)
    return None


class ProxySize:
    """Policy: proxy objects whose serialized size is at least ``threshold`` bytes.

    Buffer-like objects (bytes, str, NumPy arrays) are measured without serializing.
    Others are serialized once; when they are large enough, the executor stores those
    same bytes (:meth:`measure` hands them over) instead of serializing again. Objects
    that cannot be serialized (a lock, a local function) are not proxied: they go to
    the executor as they are (a thread pool takes them; a process pool says why not).
    """

    def __init__(self, threshold: int) -> None:
        self.threshold = threshold

    def measure(self, obj: Any) -> tuple[bool, list[BytesLike] | None]:
        """Return whether to proxy ``obj`` and, if it was serialized to tell, its bytes."""
        size = _cheap_size(obj)
        if size is not None:
            return size >= self.threshold, None
        try:
            parts = serialize_parts(obj)
        except Exception:
            # Not serializable, so not proxiable either: pass it as it is.
            return False, None
        size = sum(memoryview(p).nbytes for p in parts)
        return size >= self.threshold, parts if size >= self.threshold else None

    def __call__(self, obj: Any) -> bool:
        return self.measure(obj)[0]


Policy = Callable[[Any], bool]
Measure = Callable[[Any], tuple[bool, list[BytesLike] | None]]


def decide(policy: Policy, obj: Any) -> tuple[bool, list[BytesLike] | None]:
    """Apply ``policy`` to ``obj``: whether to proxy it, and its serialized parts if the
    policy serialized it to measure it (so they are stored instead of serializing again).

    ``None``, bools, ``...`` and proxies are never proxied.
    """
    # Proxy first: a proxy matches it by its type alone (``isinstance`` tries the classes
    # in order), so a proxy passing through is never asked for its target's class.
    if isinstance(obj, (Proxy, *_NONPROXIABLE)):
        return False, None
    # A policy may serialize to measure (ProxySize.measure) and hand the bytes over.
    measure = cast(Measure | None, getattr(policy, 'measure', None))
    if measure is not None:
        return measure(obj)
    return bool(policy(obj)), None


def _make_proxy(
    store: Store[Any],
    obj: Any,
    parts: list[BytesLike] | None,
    *,
    owned: bool,
    lifetime: Any = None,
    populate_target: bool | None = None,
) -> Proxy[Any]:
    if parts is not None and store.serializer is None:
        proxy: Proxy[Any] = store.proxy_serialized(
            obj,
            parts,
            lifetime=None if owned else lifetime,
            populate_target=populate_target,
        )
        return into_owned(proxy) if owned else proxy
    if owned:
        return store.owned_proxy(obj, populate_target=populate_target)
    return store.proxy(obj, lifetime=lifetime, populate_target=populate_target)


def _walk(obj: Any, nested: bool, visit: Callable[[Any], Any]) -> Any:
    if nested:
        kind = type(obj)
        if kind is list:
            return [_walk(x, nested, visit) for x in obj]
        if kind is tuple:
            return tuple(_walk(x, nested, visit) for x in obj)
        if kind is dict:
            return {k: _walk(v, nested, visit) for k, v in obj.items()}
    return visit(obj)


@dataclasses.dataclass(eq=False, repr=False)
class TaskWrapper:
    """A task that proxies its result by policy where it runs (picklable).

    What :class:`StoreExecutor` submits in place of each function; an integration that
    submits to an engine itself (:class:`tether.plugins.dask.Client`) submits it too. Called
    with the task's arguments, it runs ``function``, reopens the store of ``store_config``
    (:func:`~tether.store.get_or_create_store`, once per process) and returns the result,
    proxied if ``should_proxy`` selects it (see :func:`decide`). A result the store cannot
    serialize is returned as it is.

    Args:
        function: The task.
        store_config: The configuration of the store results go to.
        should_proxy: The policy.
        ownership: Return an :class:`~tether.store.ref.OwnedProxy` (evicted when the
            caller drops it); borrows of arguments inside the result become owned copies.
            Else a plain proxy, evicted by whoever keeps the result's key.
        nested: Apply the policy to the items of a list, tuple or dict result.
        result_key: Store a proxied result under this key, made beforehand by the store's
            connector (``store.capabilities.deferrable.new_key()``: the caller can then
            evict it without waiting for the result); needs ``ownership`` and ``nested``
            off (one key holds one object).
    """

    function: Callable[..., Any]
    store_config: StoreConfig
    should_proxy: Policy
    ownership: bool = True
    nested: bool = False
    result_key: Any = None

    def __post_init__(self) -> None:
        if self.result_key is not None and (self.ownership or self.nested):
            raise ValueError('result_key needs ownership=False and nested=False')
        self.__name__ = getattr(self.function, '__name__', 'task')
        self.__qualname__ = getattr(self.function, '__qualname__', self.__name__)

    def __repr__(self) -> str:
        return f'StoreExecutorTask({self.function!r})'

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        result = self.function(*args, **kwargs)
        # Opened when needed only: a task whose result stays small never opens the store.
        store = get_or_create_store(self.store_config) if self.ownership else None
        populate: bool | None = None
        if store is not None:
            # A borrow of an argument in the result would outlive its object (evicted
            # when the task completes): hand back an owned copy instead.
            owned = _own_borrows(result, store)
            if owned is not result:
                # Storing a result that holds those owners moves them into the store:
                # the local object then holds moved owners, so it must not be the
                # proxy's target; the proxy resolves from the store.
                result, populate = owned, False

        def visit(obj: Any) -> Any:
            nonlocal store
            proxy, parts = decide(self.should_proxy, obj)
            if not proxy:
                return obj
            if store is None:
                store = get_or_create_store(self.store_config)
            try:
                if self.result_key is not None:
                    return _proxy_under_key(store, obj, parts, self.result_key)
                return _make_proxy(
                    store, obj, parts, owned=self.ownership, populate_target=populate
                )
            except SerializationError:
                return obj  # not proxiable: returned as it is, as for arguments

        return _walk(result, self.nested, visit)


def _proxy_under_key(store: Store[Any], obj: Any, parts: list[BytesLike] | None, key: Any) -> Any:
    data = b''.join(parts) if parts is not None else store.serialize(obj)
    deferrable = store.capabilities.require_deferrable('set results', f'store {store.name!r}')
    deferrable.set(key, data)
    return store.proxy_from_key(key, target_class=type(obj))


def _own_borrows(obj: Any, store: Store[Any], depth: int = 0) -> Any:
    """Replace the borrows in ``obj`` (also in lists, tuples, sets, dicts) by owners."""
    kind = type(obj)
    if kind is RefProxy or kind is RefMutProxy:
        return store.owned_proxy(extract(obj))
    if depth > 4:
        return obj
    if kind is list or kind is tuple or kind is set or kind is frozenset:
        items = [_own_borrows(x, store, depth + 1) for x in obj]
        if all(a is b for a, b in zip(items, obj, strict=True)):
            return obj
        return kind(items)
    if kind is dict:
        values = {k: _own_borrows(v, store, depth + 1) for k, v in obj.items()}
        if all(values[k] is v for k, v in obj.items()):
            return obj
        return values
    return obj


def _keep_out_of(lifetime: ContextLifetime, keys: list[Any]) -> None:
    """Detach ``keys`` from ``lifetime`` (it will not evict them when it ends)."""
    lifetime.remove_key(*keys)


class _Task:
    """What the executor keeps for one task until its future completes."""

    __slots__ = ('__weakref__', 'borrows', 'lifetime', 'owners')

    def __init__(self, lifetime: ContextLifetime | None) -> None:
        self.owners: list[OwnedProxy[Any]] = []
        self.borrows: list[RefProxy[Any]] = []
        self.lifetime = lifetime

    def finish(self) -> None:
        # Swap the lists out first: finish may run twice at once (a late callback and a
        # waited shutdown), and each object must be released once.
        borrows, self.borrows = self.borrows, []
        owners, self.owners = self.owners, []
        for ref in borrows:
            end_borrow(ref)
        for owner in owners:
            try:
                drop(owner)
            except Exception:  # pragma: no cover - store closed under us
                logger.exception('could not evict a task argument')
        if self.lifetime is not None:
            self.lifetime.close()


class StoreExecutor(concurrent.futures.Executor):
    """An executor that passes large arguments and results by proxy.

    Args:
        executor: The executor to wrap: anything with ``submit(fn, *args, **kwargs)``
            returning a future with ``add_done_callback`` (concurrent, Dask, Parsl
            ``ParslPoolExecutor``, :class:`tether.plugins.ray.RayExecutor`).
        store: The store objects go through.
        should_proxy: Policy choosing what to proxy (default :class:`ProxyNever`).
        ownership: Manage proxied objects with the ownership model (see module doc).
        close_store: Close ``store`` on :meth:`shutdown`.
        close_executor: Shut the wrapped executor down on :meth:`shutdown` (for a Dask
            ``Client`` that is ``client.shutdown()``, which stops its cluster).
        proxy_nested: Also look inside lists, tuples and dicts (arguments and results).
        proxy_results: Apply the policy to task results too.
    """

    def __init__(
        self,
        executor: Any,
        store: Store[Any],
        should_proxy: Policy | None = None,
        *,
        ownership: bool = True,
        close_store: bool = True,
        close_executor: bool = True,
        proxy_nested: bool = False,
        proxy_results: bool = True,
    ) -> None:
        self.executor = executor
        self.store = store
        self.should_proxy: Policy = ProxyNever() if should_proxy is None else should_proxy
        self.ownership = ownership
        self.close_store = close_store
        self.close_executor = close_executor
        self.proxy_nested = proxy_nested
        self.proxy_results = proxy_results
        self._results = ContextLifetime(store, name='store-executor-results')
        self._lock = threading.Lock()
        self._shutdown = False
        self._finalized = False
        # Tasks whose futures have not completed: what they hold is evicted when they do,
        # and the store is closed only after the last of them (shutdown(wait=False)).
        self._pending: set[_Task] = set()

    def __repr__(self) -> str:
        return f'StoreExecutor({self.executor!r}, {self.store!r})'

    def _proxy_argument(self, obj: Any, task: _Task) -> Any:
        proxy, parts = decide(self.should_proxy, obj)
        if not proxy:
            return obj
        try:
            if self.ownership:
                owner = cast(OwnedProxy[Any], _make_proxy(self.store, obj, parts, owned=True))
                task.owners.append(owner)
                # Unpopulated: the task runs elsewhere anyway, and engines that inspect
                # arguments (Dask's tokenize hashes a proxy of bytes as bytes) stay cheap.
                ref = borrow(owner, populate_target=False)
                task.borrows.append(ref)
                return ref
            return _make_proxy(self.store, obj, parts, owned=False, lifetime=task.lifetime)
        except (NonProxiableTypeError, SerializationError):
            # Not proxiable (cannot be serialized): pass it as it is; a thread pool takes
            # it, an engine that must pickle it says why it cannot.
            return obj

    def submit(self, function: Callable[..., T], /, *args: Any, **kwargs: Any) -> Any:
        """Schedule ``function(*args, **kwargs)``; return the wrapped executor's future.

        Raises:
            RuntimeError: after :meth:`shutdown`.
        """
        with self._lock:
            if self._shutdown:
                raise RuntimeError('cannot schedule new tasks after shutdown')
            task = _Task(None if self.ownership else ContextLifetime(self.store))
            self._pending.add(task)

        def visit(obj: Any) -> Any:
            return self._proxy_argument(obj, task)

        try:
            new_args = tuple(_walk(a, self.proxy_nested, visit) for a in args)
            new_kwargs = {k: _walk(v, self.proxy_nested, visit) for k, v in kwargs.items()}
            fn: Callable[..., Any] = function
            if self.proxy_results:
                fn = TaskWrapper(
                    function,
                    self.store.config(),
                    self.should_proxy,
                    self.ownership,
                    self.proxy_nested,
                )
            future = self.executor.submit(fn, *new_args, **new_kwargs)
        except BaseException:
            self._finish(task)
            raise
        future.add_done_callback(lambda f: self._done(f, task))
        return future

    def _finish(self, task: _Task) -> None:
        task.finish()
        with self._lock:
            self._pending.discard(task)
            last = self._shutdown and not self._pending
        if last:
            self._finalize()

    def _done(self, future: Any, task: _Task) -> None:
        try:
            self._record_results(future, task)
        finally:
            self._finish(task)

    def _record_results(self, future: Any, task: _Task) -> None:
        if self.ownership or not self.proxy_results:
            return
        try:
            if future.cancelled() or future.exception() is not None:
                return
            result = future.result()
        except Exception:  # pragma: no cover - engine-specific failure
            return

        keys: list[Any] = []

        def visit(obj: Any) -> Any:
            if isinstance(obj, Proxy):
                factory = get_factory(obj)
                if (
                    isinstance(factory, StoreFactory)
                    and factory.store_config.name == self.store.name
                ):
                    keys.append(factory.key)
            return obj

        _walk(result, self.proxy_nested, visit)
        if not keys:
            return
        if task.lifetime is not None:
            # A task that returned its argument: the object is a result now, evicted with
            # the results (at shutdown), not when the task completes.
            _keep_out_of(task.lifetime, keys)
        try:
            self._results.add_key(*keys, store=self.store)
        except Exception:  # pragma: no cover - lifetime already closed at shutdown
            logger.debug('result of %r arrived after shutdown', future)

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        """Shut down the wrapped executor, evict what is left, and close the store.

        With ``wait=False`` it returns at once; what the running tasks hold is evicted as
        each completes, and the results are evicted and the store closed when the last
        one does (never before, so nothing is left in the store).
        """
        with self._lock:
            if self._shutdown:
                return
            self._shutdown = True
        shutdown = getattr(self.executor, 'shutdown', None) if self.close_executor else None
        if shutdown is not None:
            try:
                shutdown(wait=wait, cancel_futures=cancel_futures)
            except TypeError:
                shutdown()
        with self._lock:
            pending = list(self._pending) if wait else []
            idle = not self._pending
        # After a waited shutdown every task is done: end what a callback that has not
        # run (or never will, as with a closed Dask client) would have ended.
        for task in pending:
            self._finish(task)
        if idle:
            self._finalize()
        else:
            logger.debug('%r: store closes when the running tasks complete', self)

    def _finalize(self) -> None:
        with self._lock:
            if self._finalized:
                return
            self._finalized = True
        self._results.close()
        if self.close_store:
            self.store.close()
