"""Federated function as a service: a self-hostable service, endpoints and the SDK.

Register a Python function once and run it on any endpoint you can reach::

    from tether.faas import Executor

    with Executor(endpoint_id) as ex:          # endpoint_id: from `tether faas dev --json`
        assert ex.submit(sum, [1, 2, 3]).result() == 6

* :class:`Client` has the funcX SDK's calls (``register_function``, ``run``,
  ``get_result``, batches); :class:`Executor` is a ``concurrent.futures.Executor``.
* The Globus Compute SDK's names port by changing the import (``docs/porting.md``):
  :class:`ShellFunction`, :class:`MPIFunction`, :class:`ComputeFuture`, the
  serialization strategies (:class:`ComputeSerializer`, :class:`JSONData` ...),
  :func:`compare_versions`.
* ``tether faas dev`` runs a service and one endpoint on this machine with nothing to
  configure; ``tether faas serve --config service.toml`` runs the service over
  PostgreSQL and RabbitMQ; ``tether faas endpoint ...`` manages endpoints.

See ``docs/faas.md``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from tether.faas._batch import Batch, as_optional_uuid
    from tether.faas._client import Client
    from tether.faas._config import ComputeEndpointConfig, EndpointConfig, ServiceConfig
    from tether.faas._executor import Executor
    from tether.faas._future import ComputeFuture, TaskFuture
    from tether.faas._home import ensure_compute_dir, get_compute_dir
    from tether.faas._serde import (
        AllowlistWildcard,
        ComputeSerializer,
        ValidatedStrategylike,
        validate_strategylike,
    )
    from tether.faas._server import ServiceThread
    from tether.faas._shell import MPIFunction, ShellFunction, ShellResult
    from tether.faas._strategies import (
        DEFAULT_STRATEGY_CODE,
        DEFAULT_STRATEGY_DATA,
        SELECTABLE_STRATEGIES,
        AllCodeStrategies,
        AllDataStrategies,
        CombinedCode,
        ComboSerializationStrategy,
        DillCode,
        DillCodeSource,
        DillCodeTextInspect,
        DillDataBase64,
        JSONData,
        PureSourceDill,
        PureSourceTextInspect,
        SerializationStrategy,
    )
    from tether.faas._version import VersionMismatch, compare_versions

__all__ = [
    'AllCodeStrategies',
    'AllDataStrategies',
    'AllowlistWildcard',
    'Batch',
    'Client',
    'CombinedCode',
    'ComboSerializationStrategy',
    'ComputeEndpointConfig',
    'ComputeFuture',
    'ComputeSerializer',
    'DEFAULT_STRATEGY_CODE',
    'DEFAULT_STRATEGY_DATA',
    'DillCode',
    'DillCodeSource',
    'DillCodeTextInspect',
    'DillDataBase64',
    'EndpointConfig',
    'Executor',
    'JSONData',
    'MPIFunction',
    'PureSourceDill',
    'PureSourceTextInspect',
    'SELECTABLE_STRATEGIES',
    'SerializationStrategy',
    'ServiceConfig',
    'ServiceThread',
    'ShellFunction',
    'ShellResult',
    'TaskFuture',
    'ValidatedStrategylike',
    'VersionMismatch',
    'as_optional_uuid',
    'compare_versions',
    'ensure_compute_dir',
    'get_compute_dir',
    'validate_strategylike',
]

# Imported on first use: worker processes import this package (as the parent of
# tether.faas.endpoint._worker) and need none of the SDK's dependencies.
_HOMES = {
    'AllCodeStrategies': 'tether.faas._strategies',
    'AllDataStrategies': 'tether.faas._strategies',
    'AllowlistWildcard': 'tether.faas._serde',
    'Batch': 'tether.faas._batch',
    'Client': 'tether.faas._client',
    'CombinedCode': 'tether.faas._strategies',
    'ComboSerializationStrategy': 'tether.faas._strategies',
    'ComputeEndpointConfig': 'tether.faas._config',
    'ComputeFuture': 'tether.faas._future',
    'ComputeSerializer': 'tether.faas._serde',
    'DEFAULT_STRATEGY_CODE': 'tether.faas._strategies',
    'DEFAULT_STRATEGY_DATA': 'tether.faas._strategies',
    'DillCode': 'tether.faas._strategies',
    'DillCodeSource': 'tether.faas._strategies',
    'DillCodeTextInspect': 'tether.faas._strategies',
    'DillDataBase64': 'tether.faas._strategies',
    'EndpointConfig': 'tether.faas._config',
    'Executor': 'tether.faas._executor',
    'JSONData': 'tether.faas._strategies',
    'MPIFunction': 'tether.faas._shell',
    'PureSourceDill': 'tether.faas._strategies',
    'PureSourceTextInspect': 'tether.faas._strategies',
    'SELECTABLE_STRATEGIES': 'tether.faas._strategies',
    'SerializationStrategy': 'tether.faas._strategies',
    'ServiceConfig': 'tether.faas._config',
    'ServiceThread': 'tether.faas._server',
    'ShellFunction': 'tether.faas._shell',
    'ShellResult': 'tether.faas._shell',
    'TaskFuture': 'tether.faas._future',
    'ValidatedStrategylike': 'tether.faas._serde',
    'VersionMismatch': 'tether.faas._version',
    'as_optional_uuid': 'tether.faas._batch',
    'compare_versions': 'tether.faas._version',
    'ensure_compute_dir': 'tether.faas._home',
    'get_compute_dir': 'tether.faas._home',
    'validate_strategylike': 'tether.faas._serde',
}


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f'module {__name__!r} has no attribute {name!r}')
    import importlib

    value = getattr(importlib.import_module(home), name)
    globals()[name] = value
    return value
