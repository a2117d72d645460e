"""Many objects in one round trip: batch reads of a store and batch resolution of proxies.

A consumer that holds many proxies (a batch of task inputs, a window of a stream) would
resolve them one by one, one round trip each. :func:`resolve_batch` resolves them
together instead: the proxies of one store are fetched with one ``get_batch`` of its
connector (over Redis, one round trip per server; on a Redis Cluster, one per shard, the
shards in parallel), then each proxy is resolved to its object, as if its factory had run::

    from tether.store.batch import resolve_batch

    resolve_batch(proxies)        # one round trip
    total = sum(len(p) for p in proxies)   # no more round trips

Producers batch too: :meth:`Store.proxy_batch <tether.store.Store.proxy_batch>` and
:meth:`Store.put_batch <tether.store.Store.put_batch>` send all their objects in one
connector call.

What resolves together: proxies whose factory is a plain
:class:`~tether.store.StoreFactory` (made by ``Store.proxy``/``proxy_batch``, received
from another process or not). Already resolved proxies are left alone; proxies of other
factories (futures, polling factories, your own) are resolved one by one, as before;
objects that are not proxies are ignored. The store's cache is used and filled as
``Store.get`` does it, and a proxy made with ``evict=True`` evicts its object.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from tether._missing import MISSING
from tether.exceptions import ProxyResolveMissingKeyError
from tether.proxy import Proxy, get_factory, is_resolved, resolve, set_target
from tether.serialize import Deserializer
from tether.store._store import Store
from tether.store.factory import StoreFactory

__all__ = ['get_batch', 'resolve_batch']


def get_batch(
    store: Store[Any],
    keys: Sequence[Any],
    *,
    deserializer: Deserializer | None = None,
    default: Any = None,
) -> list[Any]:
    """The objects under ``keys`` (``default`` for a missing one): :meth:`Store.get_batch
    <tether.store.Store.get_batch>` (cached ones from the store's cache, the others in one
    ``get_batch`` of its connector)."""
    return store.get_batch(keys, deserializer=deserializer, default=default)


def resolve_batch(proxies: Iterable[Any]) -> None:
    """Resolve ``proxies``: those of one store in one round trip (see the module).

    Raises:
        ProxyResolveMissingKeyError: an object is no longer in its store (the other
            proxies of the batch are resolved all the same).
    """
    groups: dict[int, tuple[Store[Any], list[tuple[Proxy[Any], StoreFactory[Any]]]]] = {}
    singles: list[Proxy[Any]] = []
    for proxy in proxies:
        if not isinstance(proxy, Proxy) or is_resolved(proxy):
            continue
        factory = get_factory(proxy)
        if type(factory) is not StoreFactory:
            singles.append(proxy)
            continue
        store = factory.get_store()
        groups.setdefault(id(store), (store, []))[1].append((proxy, factory))
    missing: ProxyResolveMissingKeyError | None = None
    for store, members in groups.values():
        # One batch per deserializer (almost always one: the store's own).
        by_deserializer: dict[int, list[tuple[Proxy[Any], StoreFactory[Any]]]] = {}
        for member in members:
            by_deserializer.setdefault(id(member[1].deserializer), []).append(member)
        for batch in by_deserializer.values():
            keys = [f.key for _, f in batch]
            objs = get_batch(store, keys, deserializer=batch[0][1].deserializer, default=MISSING)
            for (proxy, factory), obj in zip(batch, objs, strict=True):
                if obj is MISSING:
                    missing = missing or ProxyResolveMissingKeyError(
                        factory.key, store.name, repr(store.connector)
                    )
                    continue
                set_target(proxy, obj)
                if factory.evict:
                    store.evict(factory.key)
    for proxy in singles:
        resolve(proxy)
    if missing is not None:
        raise missing
