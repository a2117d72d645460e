"""Endpoints of the function service: the agent, its engines and what tasks can use.

An endpoint turns a machine (a laptop, a cluster login node, a cloud instance) into a
place where the user's registered functions run. ``tether faas endpoint configure NAME``
registers it with a service; ``tether faas endpoint start NAME`` runs its agent, which
connects outbound to the service and runs tasks on an engine (a pool of worker processes,
or Parsl's HighThroughputExecutor).

Inside a task, :func:`get_redis_client` returns a client of the endpoint's Redis server
(``redis_url`` in its configuration) for data shared between tasks on this endpoint.

Its configuration is :class:`ComputeEndpointConfig` (``EndpointConfig`` is its former
name); its engines follow the contract of :mod:`tether.faas.endpoint.engine`.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from tether.faas._config import ComputeEndpointConfig, EndpointConfig
    from tether.faas.endpoint._agent import Agent

__all__ = ['Agent', 'ComputeEndpointConfig', 'EndpointConfig', 'get_redis_client']


def __getattr__(name: str) -> Any:
    # Lazy: worker processes import this package and need neither.
    if name == 'Agent':
        from tether.faas.endpoint._agent import Agent

        return Agent
    if name in ('ComputeEndpointConfig', 'EndpointConfig'):
        from tether.faas._config import ComputeEndpointConfig

        return ComputeEndpointConfig
    raise AttributeError(f'module {__name__!r} has no attribute {name!r}')


def get_redis_client() -> Any:
    """A ``redis.Redis`` client of this endpoint's Redis server (inside a task).

    The server is the endpoint's ``redis_url`` (default ``redis://127.0.0.1:6379/0``);
    outside an endpoint, ``$TETHER_FAAS_REDIS_URL`` or that default.
    """
    import redis

    url = os.environ.get('TETHER_FAAS_REDIS_URL', 'redis://127.0.0.1:6379/0')
    return redis.Redis.from_url(url)
