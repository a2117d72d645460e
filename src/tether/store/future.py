"""Distributed futures whose proxies block until the result is set (ProxyFutures).

A :class:`Future` names a key in a store before the object exists. Any process that holds
the future (it pickles in a few hundred bytes) can :meth:`~Future.set_result`; any process
can wait on :meth:`~Future.result` or use a proxy from :meth:`~Future.proxy`, which blocks
on first use until the result is set. Futures work across execution engines: set it in a
Dask task, consume its proxy in a Parsl task::

    future = store.future()
    client.submit(producer, future)            # calls future.set_result(value)
    client.submit(consumer, future.proxy())    # first use of the proxy waits for value

Waiting does not hammer the backend: connectors that can block in the server (Redis:
:meth:`~tether.connectors.redis.RedisConnector.wait`) are used that way; others are
polled with bounded exponential backoff. A wait that runs out of time raises
:class:`~tether.exceptions.FutureTimeoutError` naming the store and key.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any, Generic, TypeVar, cast

from tether._clock import SYSTEM_CLOCK, Clock
from tether._missing import MISSING as _MISSING
from tether.exceptions import FutureAlreadySetError, FutureTimeoutError
from tether.proxy import Proxy
from tether.store.factory import StoreFactory

if TYPE_CHECKING:
    from tether.serialize import Deserializer, Serializer
    from tether.store._store import Store
    from tether.store.config import StoreConfig

__all__ = ['Future', 'FutureFactory']

T = TypeVar('T')

_POLL_START = 0.001
_POLL_MAX = 0.5


class FutureFactory(StoreFactory[T]):
    """Factory of a future's proxies: waits for the key, then fetches the object.

    Args:
        key: Connector key the result will be stored under.
        store_config: Config of the store.
        evict: Evict the result after the first resolve.
        deserializer: Deserializer to use instead of the store's.
        timeout: Seconds to wait for the result (``None``: no limit).
        poll_interval: First polling interval for connectors that cannot block.
        poll_max: Largest polling interval (the backoff doubles up to it).
        clock: The clock waits are measured on (not pickled: a copy uses the system
            clock).
    """

    __slots__ = ('clock', 'poll_interval', 'poll_max', 'resolve_may_block', 'timeout')

    def __init__(
        self,
        key: Any,
        store_config: StoreConfig,
        *,
        evict: bool = False,
        deserializer: Deserializer | None = None,
        timeout: float | None = None,
        poll_interval: float = _POLL_START,
        poll_max: float = _POLL_MAX,
        store: Store[Any] | None = None,
        clock: Clock = SYSTEM_CLOCK,
    ) -> None:
        super().__init__(key, store_config, evict=evict, deserializer=deserializer, store=store)
        self.clock = clock
        self.timeout = timeout
        self.poll_interval = poll_interval
        self.poll_max = poll_max
        # In the process that made the future (where engines inspect task arguments at
        # submission), metadata queries on its unresolved proxies must not wait for the
        # result (see tether.proxy). A copy that arrived by pickling is a consumer's:
        # there, isinstance waits for the result as for any proxy of unknown class.
        self.resolve_may_block = store is not None

    def ready(self) -> bool:
        """Return whether the result is set, so resolving would not wait (never raises)."""
        try:
            return bool(self.get_store().exists(self.key))
        except Exception:
            return False

    def __reduce__(self) -> tuple[Any, ...]:
        return self._reduce_with(
            {
                'timeout': self.timeout,
                'poll_interval': self.poll_interval,
                'poll_max': self.poll_max,
            }
        )

    def wait(self, timeout: float | None = _MISSING) -> None:
        """Block until the result is set.

        Raises:
            FutureTimeoutError: if it is not set within ``timeout`` seconds (default: the
                factory's ``timeout``).
        """
        if timeout is _MISSING:
            timeout = self.timeout
        store = self.get_store()
        if self.key in store.cache:
            return
        connector = store.connector
        waiting = store.capabilities.waiting
        clock = self.clock
        start = clock.monotonic()
        if waiting is not None:
            if waiting.wait(self.key, timeout):
                return
        else:
            interval = self.poll_interval
            while not connector.exists(self.key):
                elapsed = clock.monotonic() - start
                if timeout is not None and elapsed >= timeout:
                    break
                step = interval if timeout is None else min(interval, timeout - elapsed)
                clock.sleep(max(step, 0.0))
                interval = min(interval * 2, self.poll_max)
            else:
                return
        raise FutureTimeoutError(
            f'no result was set for the future with key {self.key!r} in store '
            f'{store.name!r} within {timeout} s: the producer may have died or not '
            'started; pass a larger timeout or check the producer task',
        )

    def __call__(self) -> T:
        self.wait()
        return super().__call__()


class Future(Generic[T]):
    """A distributed future backed by a store (create it with :meth:`Store.future`).

    Picklable: send it to the process that will set the result, and its proxies (or the
    future itself) to the processes that will use it.

    Args:
        factory: The factory naming the key, the store and the waiting policy.
        serializer: Serializer :meth:`set_result` uses instead of the store's.
    """

    def __init__(self, factory: FutureFactory[T], *, serializer: Serializer | None = None):
        self._factory = factory
        self._serializer = serializer

    def __repr__(self) -> str:
        state = 'done' if self.done() else 'pending'
        return f'Future({self._factory.store_config.name!r}, key={self._factory.key!r}, {state})'

    def __reduce__(self) -> tuple[Any, ...]:
        return (Future, (self._factory,), {'_serializer': self._serializer})

    @property
    def key(self) -> Any:
        """The connector key the result is stored under."""
        return self._factory.key

    def done(self) -> bool:
        """Return whether the result has been set."""
        return bool(self._factory.get_store().exists(self._factory.key))

    def set_result(self, obj: T) -> None:
        """Store ``obj`` as the result and wake every waiter.

        Raises:
            FutureAlreadySetError: if the result was set before.
            MissingCapabilityError: if the store's connector cannot hand out keys (not
                deferrable; also a :class:`~tether.exceptions.StoreError`).
        """
        store = self._factory.get_store()
        key = self._factory.key
        deferrable = store.capabilities.require_deferrable('back futures', f'store {store.name!r}')
        if store.exists(key):
            raise FutureAlreadySetError(
                f'the future with key {key!r} in store {store.name!r} already has a result; '
                'a future is set once (create another with store.future())',
            )
        start = time.perf_counter_ns()
        data = store.serialize(obj, self._serializer)
        deferrable.set(key, data)
        if store.metrics is not None:
            elapsed_ms = (time.perf_counter_ns() - start) / 1e6
            store.metrics.add_time(
                'store.future.set_result', key, elapsed_ms, memoryview(data).nbytes
            )

    def result(self, timeout: float | None = _MISSING) -> T:
        """Wait for the result and return it.

        Args:
            timeout: Seconds to wait (default: the future's timeout, ``None`` for no limit).

        Raises:
            FutureTimeoutError: if the result is not set in time.
        """
        self._factory.wait(timeout)
        store = self._factory.get_store()
        obj = store.get(
            self._factory.key,
            deserializer=self._factory.deserializer,
            default=_MISSING,
        )
        if obj is _MISSING:
            raise FutureTimeoutError(
                f'the result of the future with key {self._factory.key!r} in store '
                f'{store.name!r} was set but is gone (evicted)',
            )
        return cast(T, obj)

    def proxy(self, *, target_class: type | None = None) -> Proxy[T]:
        """Return a proxy that, on first use, waits for the result and becomes it.

        Args:
            target_class: The class the result will have, if known, so that
                ``isinstance`` answers for it before the result is set. Without it, in
                this process, ``isinstance`` never waits for the result: before the
                result is set an unresolved proxy answers for a
                :class:`~tether.proxy.Proxy` (false for the result's class), after it
                is set for the result. Engines that inspect task arguments at
                submission (Dask, Parsl, Ray ...) are told it is a ``Proxy`` in any
                process, so submitting a consumer before the producer never blocks. A
                copy unpickled elsewhere (the consumer's) waits when user code asks, as
                any proxy of unknown class does.
        """
        return Proxy(self._factory, target_class=target_class)
