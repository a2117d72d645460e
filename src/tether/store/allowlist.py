"""The types that data from another process may name: connectors, keys, serializers.

A store config or a connector key that arrives as data (a stream event, a TOML file, a
JSON document) names classes and functions by import path. Nothing is imported or called
from such data unless its path is on this allowlist: tether's own connectors, keys and
serializers are on it from the start, and an application adds its own::

    from tether.store import allowlist

    allowlist.register_connector(MyConnector, key_type=MyKey)
    allowlist.register_serializer(my_serializer)
    allowlist.register_serializer(my_deserializer)

Register in every process that reads such data (a stream consumer, a program that reads
store configs from TOML). A path that is not allowlisted raises
:class:`~tether.exceptions.UntrustedTypeError` before anything is imported.

Pickle is a different path: unpickling a proxy or a store factory imports whatever the
pickle names, as pickle always does, so it trusts the process that made the pickle (see
``docs/security.md``). The allowlist guards the paths that do not go through pickle.

An allowlisted connector type is code you trust, not a configuration you trust: a config
naming :class:`~tether.connectors.redis.RedisConnector` can still name any host. Stream
consumers therefore also pin the stores they accept (see ``docs/stream.md``).
"""

from __future__ import annotations

import os
import threading
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Literal

from tether.exceptions import ConfigError, UntrustedTypeError
from tether.store._paths import import_from_path, path_of

if TYPE_CHECKING:
    from tether.store.config import StoreConfig

__all__ = [
    'BUILTIN_CONNECTORS',
    'BUILTIN_SERIALIZERS',
    'Kind',
    'check_config',
    'key_type_of',
    'register_connector',
    'register_key',
    'register_serializer',
    'registered',
    'resolve',
    'unregister',
]

Kind = Literal['connector', 'key', 'serializer']

BUILTIN_CONNECTORS: Mapping[str, str] = {
    'tether.connectors.endpoint.EndpointConnector': 'tether.connectors.endpoint.EndpointKey',
    'tether.connectors.file.FileConnector': 'tether.connectors.file.FileKey',
    'tether.connectors.local.LocalConnector': 'tether.connectors.local.LocalKey',
    'tether.connectors.multi.MultiConnector': 'tether.connectors.multi.MultiKey',
    'tether.connectors.node.NodeConnector': 'tether.connectors.node.NodeKey',
    'tether.connectors.redis.RedisConnector': 'tether.connectors.redis.RedisKey',
    'tether.connectors.shared_memory.SharedMemoryConnector': (
        'tether.connectors.shared_memory.SharedMemoryKey'
    ),
}
"""tether's own connector types and the key type of each (a new connector adds itself)."""

BUILTIN_SERIALIZERS: tuple[str, ...] = (
    'tether.serialize.deserialize',
    'tether.serialize.serialize',
)
"""tether's own serializer and deserializer functions."""

_MULTI = 'tether.connectors.multi.MultiConnector'

_lock = threading.Lock()


def _new_lock_after_fork() -> None:
    # A child forked while another thread held the lock must not inherit it held.
    global _lock
    _lock = threading.Lock()


os.register_at_fork(after_in_child=_new_lock_after_fork)
# path -> the object itself (registered by the application) or None (builtin: import lazily)
_allowed: dict[Kind, dict[str, Any]] = {
    'connector': dict.fromkeys(BUILTIN_CONNECTORS),
    'key': dict.fromkeys(BUILTIN_CONNECTORS.values()),
    'serializer': dict.fromkeys(BUILTIN_SERIALIZERS),
}
_key_of: dict[str, str] = dict(BUILTIN_CONNECTORS)
_builtin: dict[Kind, frozenset[str]] = {kind: frozenset(t) for kind, t in _allowed.items()}


def _is_key_class(obj: Any) -> bool:
    return isinstance(obj, type) and issubclass(obj, tuple) and hasattr(obj, '_fields')


def register_key(key_type: type) -> None:
    """Allow ``key_type`` (a connector's ``NamedTuple`` key class) to be rebuilt from data.

    Raises:
        ConfigError: if it is not a NamedTuple class defined at module level.
    """
    if not _is_key_class(key_type):
        raise ConfigError(f'{key_type!r} is not a NamedTuple class; keys are NamedTuples')
    with _lock:
        _allowed['key'][path_of(key_type)] = key_type


def register_connector(connector_type: type, *, key_type: type | None = None) -> None:
    """Allow ``connector_type`` to be built from a store config that arrived as data.

    Args:
        connector_type: The connector class (it must have ``from_config``).
        key_type: Its key class, allowlisted too. Given, a stream consumer also checks
            that every event's key for a store of this connector is of this type.

    Raises:
        ConfigError: if the class has no ``from_config`` or no import path.
    """
    if not isinstance(connector_type, type) or not callable(
        getattr(connector_type, 'from_config', None)
    ):
        raise ConfigError(f'{connector_type!r} is not a connector class (no from_config)')
    path = path_of(connector_type)
    if key_type is not None:
        register_key(key_type)
    with _lock:
        _allowed['connector'][path] = connector_type
        if key_type is not None:
            _key_of[path] = path_of(key_type)


def register_serializer(function: Any) -> None:
    """Allow a serializer or deserializer function to be named by a store config.

    Raises:
        ConfigError: if it is not callable or has no import path (a lambda, a local).
    """
    if not callable(function):
        raise ConfigError(f'{function!r} is not callable')
    with _lock:
        _allowed['serializer'][path_of(function)] = function


def unregister(obj_or_path: Any) -> None:
    """Remove a type or function the application registered (builtins stay)."""
    path = obj_or_path if isinstance(obj_or_path, str) else path_of(obj_or_path)
    with _lock:
        for kind, table in _allowed.items():
            if path not in _builtin[kind]:
                table.pop(path, None)
        if path not in BUILTIN_CONNECTORS:
            _key_of.pop(path, None)


def registered(kind: Kind) -> list[str]:
    """The allowlisted import paths of ``kind``, sorted."""
    with _lock:
        return sorted(_allowed[kind])


def key_type_of(connector_type: str) -> str | None:
    """The key type path of an allowlisted connector type, when it is known."""
    with _lock:
        return _key_of.get(connector_type)


def resolve(kind: Kind, path: Any) -> Any:
    """Return the allowlisted object of ``kind`` at ``path``.

    Only allowlisted paths are imported (tether's own modules for the builtins); any other
    path raises before anything is imported.

    Raises:
        UntrustedTypeError: if ``path`` is not an allowlisted ``kind``.
        ConfigError: if an allowlisted builtin cannot be imported.
    """
    if not isinstance(path, str):
        raise UntrustedTypeError(f'a {kind} must be named by an import path, not {path!r}')
    with _lock:
        table = _allowed[kind]
        if path not in table:
            raise UntrustedTypeError(
                f'{path!r} is not an allowlisted {kind} type: nothing named by data from '
                f'another process is imported unless allowlisted. If you trust it, call '
                f'tether.store.allowlist.register_{kind}() with it in this process first',
            )
        obj = table[path]
    if obj is None:
        obj = import_from_path(path)
        with _lock:
            if path in table:
                table[path] = obj
    return obj


def _check_connector(path: Any, config: Any, depth: int = 0) -> None:
    resolve('connector', path)
    if path != _MULTI:
        return
    if depth > 4:
        raise UntrustedTypeError('MultiConnector configs nested more than 4 deep are refused')
    specs = config.get('connectors') if isinstance(config, Mapping) else None
    if not isinstance(specs, Mapping):
        raise ConfigError(f'MultiConnector config {config!r} has no "connectors" mapping')
    for name, spec in specs.items():
        if not isinstance(spec, Mapping) or 'type' not in spec:
            raise ConfigError(f'connector {name!r} of a MultiConnector config: bad spec {spec!r}')
        _check_connector(spec['type'], spec.get('config', {}), depth + 1)


def check_config(config: StoreConfig) -> StoreConfig:
    """Check that every type and function ``config`` names is allowlisted; return it.

    Covers the connector type (and, for a :class:`~tether.connectors.multi.MultiConnector`,
    the type of each connector in it), the serializer and the deserializer.

    Raises:
        UntrustedTypeError: naming the first path that is not allowlisted.
    """
    _check_connector(config.connector_type, config.connector_config)
    for fn in (config.serializer, config.deserializer):
        if fn is not None:
            resolve('serializer', fn)
    return config
