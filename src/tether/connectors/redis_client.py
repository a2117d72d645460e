"""The one place where tether chooses its redis-py client: one server, or a Redis Cluster.

The Redis connector, the Redis stream shims, the Redis agent exchange and the steering
Redis queues all build their client with :func:`make_client`, so each of them works on a
Redis Cluster when given ``cluster=True``: redis-py's ``RedisCluster`` then routes every
command to the shard that owns its key's hash slot, follows ``MOVED``/``ASK`` replies and
finds the new master after a failover.
"""

from __future__ import annotations

from typing import Any

from tether._extras import import_extra

__all__ = ['import_redis', 'make_client', 'retry_options']


def import_redis(user: str) -> Any:
    """The ``redis`` module, or an :class:`ImportError` saying what needs it."""
    return import_extra('redis', f'{user} needs redis-py', 'redis')


def retry_options(redis: Any, retries: int) -> dict[str, Any]:
    """redis-py's connection options for ``retries`` attempts after a connection error or
    timeout (backing off from 50 ms to 1 s), without health checks.

    ``redis`` is the module (:func:`import_redis`).
    """
    from redis.backoff import ExponentialBackoff
    from redis.retry import Retry

    return {
        'retry': Retry(ExponentialBackoff(cap=1.0, base=0.05), retries),
        'retry_on_error': [redis.ConnectionError, redis.TimeoutError],
        'health_check_interval': 0,
    }


def make_client(
    host: str = 'localhost',
    port: int = 6379,
    *,
    cluster: bool = False,
    db: int = 0,
    **kwargs: Any,
) -> Any:
    """A ``redis.Redis`` for the server at ``host:port``, or with ``cluster`` a
    ``redis.cluster.RedisCluster`` that discovers every shard from that one node.

    ``kwargs`` are redis-py's connection options (``password``, ``socket_timeout``,
    ``retry`` ...); ``connection_pool`` is for one server only.

    Raises:
        ConfigError: ``cluster`` with a database other than 0 (a cluster has only 0).
    """
    redis = import_redis('tether (Redis)')
    if not cluster:
        if 'connection_pool' in kwargs:
            return redis.Redis(**kwargs)
        return redis.Redis(host=host, port=port, db=db, **kwargs)
    if db:
        from tether.exceptions import ConfigError

        raise ConfigError(f'a Redis Cluster has only database 0 (got db={db})')
    from redis.cluster import RedisCluster

    kwargs.pop('max_connections', None)
    kwargs.pop('health_check_interval', None)
    return RedisCluster(host=host, port=port, **kwargs)
