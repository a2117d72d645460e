"""Federated function as a service: a self-hostable service, endpoints and the SDK.

Register a Python function once and run it on any endpoint you can reach::

    from tether.faas import Executor

    with Executor(endpoint_id) as ex:          # endpoint_id: from `tether faas dev --json`
        assert ex.submit(sum, [1, 2, 3]).result() == 6

* :class:`Client` has the funcX SDK's calls (``register_function``, ``run``,
  ``get_result``, batches); :class:`Executor` is a ``concurrent.futures.Executor``.
* ``tether faas dev`` runs a service and one endpoint on this machine with nothing to
  configure; ``tether faas serve --config service.toml`` runs the service over
  PostgreSQL and RabbitMQ; ``tether faas endpoint ...`` manages endpoints.

See ``docs/faas.md``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from tether.faas._client import Batch, Client
    from tether.faas._config import ComputeEndpointConfig, EndpointConfig, ServiceConfig
    from tether.faas._executor import Executor, TaskFuture
    from tether.faas._server import ServiceThread

__all__ = [
    'Batch',
    'Client',
    'ComputeEndpointConfig',
    'EndpointConfig',
    'Executor',
    'ServiceConfig',
    'ServiceThread',
    'TaskFuture',
]

# Imported on first use: worker processes import this package (as the parent of
# tether.faas.endpoint._worker) and need none of the SDK's dependencies.
_HOMES = {
    'Batch': 'tether.faas._client',
    'Client': 'tether.faas._client',
    'ComputeEndpointConfig': 'tether.faas._config',
    'EndpointConfig': 'tether.faas._config',
    'Executor': 'tether.faas._executor',
    'ServiceConfig': 'tether.faas._config',
    'ServiceThread': 'tether.faas._server',
    'TaskFuture': 'tether.faas._executor',
}


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f'module {__name__!r} has no attribute {name!r}')
    import importlib

    value = getattr(importlib.import_module(home), name)
    globals()[name] = value
    return value
