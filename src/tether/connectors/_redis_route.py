"""Where a key lives, for the Redis connector's raw path: one server, or a cluster's shards.

:class:`Router` hands the connector the :class:`~tether.connectors._redis_conn.RawPool`
of the server that holds a key. On one server there is one pool. On a Redis Cluster the
shard comes from the key's hash slot, through the slot map of the connector's redis-py
``RedisCluster`` client, with one pool per shard; a batch is split by shard
(:meth:`Router.group`) and its parts sent to their shards in parallel (:meth:`Router.map`).
A ``MOVED`` reply or a shard that stopped answering (a failed-over master) refreshes the
slot map (:meth:`Router.refresh`); an ``ASK`` reply names the shard to ask once
(:func:`redirect`).
"""

from __future__ import annotations

import contextlib
import os
import threading
import weakref
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

from tether.connectors._redis_conn import RawPool

__all__ = ['Router', 'redirect']

_T = TypeVar('_T')
_R = TypeVar('_R')


def redirect(error: BaseException) -> tuple[str, str, int] | None:
    """``('MOVED' or 'ASK', host, port)`` if ``error`` is a cluster redirection reply."""
    words = str(error).split()
    if len(words) == 3 and words[0] in ('MOVED', 'ASK'):
        host, _, port = words[2].rpartition(':')
        if port.isdigit():
            return words[0], host, int(port)
    return None


class Router:
    """Raw pools by server (see the module's documentation).

    Args:
        client: The connector's redis-py client (a ``RedisCluster`` if ``cluster``).
        cluster: Whether the server is a Redis Cluster.
        make_pool: Builds the pool of one server from its host and port.
    """

    def __init__(
        self,
        client: Any,
        cluster: bool,
        make_pool: Callable[[str, int], RawPool],
        host: str,
        port: int,
    ) -> None:
        self.cluster = cluster
        self._client = client
        self._make_pool = make_pool
        self._pools: dict[tuple[str, int], RawPool] = {}
        self._lock = threading.Lock()
        self._executor: ThreadPoolExecutor | None = None
        self._single = None if cluster else self.pool(host, port)
        _ROUTERS.add(self)

    def _after_fork(self) -> None:
        # The child has only the forking thread: a lock another thread held at the fork
        # would stay held for good, and the parent's batch threads are not there.
        self._lock = threading.Lock()
        self._executor = None

    def pool(self, host: str, port: int) -> RawPool:
        """The pool of the server at ``host:port``."""
        with self._lock:
            pool = self._pools.get((host, port))
            if pool is None:
                pool = self._pools[(host, port)] = self._make_pool(host, port)
            return pool

    def pool_for(self, name: str) -> RawPool:
        """The pool of the server that holds key ``name``."""
        if self._single is not None:
            return self._single
        node = self._client.get_node_from_key(name)
        return self.pool(node.host, int(node.port))

    def group(self, names: Sequence[str]) -> list[tuple[RawPool, list[int]]]:
        """The indexes of ``names``, grouped by the server that holds them."""
        if self._single is not None:
            return [(self._single, list(range(len(names))))]
        groups: dict[int, tuple[RawPool, list[int]]] = {}
        for i, name in enumerate(names):
            pool = self.pool_for(name)
            groups.setdefault(id(pool), (pool, []))[1].append(i)
        return list(groups.values())

    def map(self, fn: Callable[[_T], _R], items: Sequence[_T]) -> list[_R]:
        """``fn`` of each item, the items in parallel (one thread each) if more than one."""
        if len(items) <= 1:
            return [fn(item) for item in items]
        with self._lock:
            if self._executor is None:
                self._executor = ThreadPoolExecutor(16, thread_name_prefix='tether-redis')
            executor = self._executor
        return list(executor.map(fn, items))

    def refresh(self) -> None:
        """Read the cluster's slot map again (after ``MOVED`` or a shard that went away)."""
        if self.cluster:
            self._client.nodes_manager.initialize()

    def refresh_after_error(self) -> None:
        """:meth:`refresh`, if the cluster still answers (a failover may be under way)."""
        if self.cluster:
            with contextlib.suppress(Exception):
                self.refresh()

    def close(self) -> None:
        """Close every pool and the batch threads."""
        with self._lock:
            pools, self._pools = list(self._pools.values()), {}
            executor, self._executor = self._executor, None
        for pool in pools:
            pool.close()
        if executor is not None:
            executor.shutdown(wait=False)


_ROUTERS: weakref.WeakSet[Router] = weakref.WeakSet()


def _reset_routers_after_fork() -> None:
    for router in list(_ROUTERS):
        router._after_fork()


os.register_at_fork(after_in_child=_reset_routers_after_fork)
