"""Store configuration: what a process needs to rebuild a store (and its connector).

A :class:`StoreConfig` travels inside every store proxy's factory so that a process that
has never seen the store can rebuild it. It round-trips through dictionaries
(pydantic's ``model_dump`` / ``model_validate``) and TOML files
(:meth:`~StoreConfig.write_toml` / :meth:`~StoreConfig.read_toml`)::

    name = "my-store"
    connector_type = "tether.connectors.redis.RedisConnector"
    cache_size = 16

    [connector_config]
    hostname = "127.0.0.1"
    port = 6379

A config that arrives as data (a TOML file, a JSON document, a message) names classes and
functions by import path; :meth:`StoreConfig.from_dict` and :meth:`StoreConfig.read_toml`
check every such path against :mod:`tether.store.allowlist` before anything is imported.
(``StoreConfig.model_validate`` validates the shape only: use it for data you made.)
"""

from __future__ import annotations

import inspect
import os
import tomllib
from collections.abc import Callable
from typing import Any

import pydantic

from tether.exceptions import ConfigError, ConnectorConfigError, ConnectorKindError
from tether.store._paths import import_from_path, path_of
from tether.store.allowlist import check_config

__all__ = ['ConnectorConfig', 'StoreConfig', 'import_from_path', 'path_of']


def _drop_defaults(cls: type, config: dict[str, Any]) -> dict[str, Any]:
    """Drop the entries of ``config`` equal to the defaults of ``cls.__init__``."""
    try:
        params = inspect.signature(cls).parameters
    except (TypeError, ValueError):  # pragma: no cover - builtins without signatures
        return dict(config)
    out = {}
    for k, v in config.items():
        p = params.get(k)
        if p is None or p.default is inspect.Parameter.empty or p.default != v:
            out[k] = v
    return out


_SECRET_FIELDS = frozenset({'password', 'passwd', 'secret', 'token', 'api_key', 'credentials'})
"""Connector config fields that hold secrets: a config with one set is refused."""


def _refuse_secrets(config: Any, where: str, depth: int = 0) -> None:
    """Raise if a (nested) connector config holds a value under a secret's field name."""
    if depth > 8:
        return
    if isinstance(config, dict):
        for k, v in config.items():
            if isinstance(k, str) and k.lower() in _SECRET_FIELDS and v not in (None, ''):
                raise ConfigError(
                    f'the config of {where} holds a secret ({k!r}): secrets are never '
                    'serialized into store configs, proxies or messages. The connector '
                    'must keep it in the process and resolve it when rebuilt (environment, '
                    'secret file, or a connector of this process)',
                )
            _refuse_secrets(v, where, depth + 1)
    elif isinstance(config, list | tuple):
        for v in config:
            _refuse_secrets(v, where, depth + 1)


# Short names ConnectorConfig accepts for tether's own connectors (as ProxyStore's did).
_CONNECTOR_KINDS = {
    'endpoint': 'tether.connectors.endpoint.EndpointConnector',
    'file': 'tether.connectors.file.FileConnector',
    'local': 'tether.connectors.local.LocalConnector',
    'multi': 'tether.connectors.multi.MultiConnector',
    'node': 'tether.connectors.node.NodeConnector',
    'redis': 'tether.connectors.redis.RedisConnector',
    'shared_memory': 'tether.connectors.shared_memory.SharedMemoryConnector',
    'sharedmemory': 'tether.connectors.shared_memory.SharedMemoryConnector',
}


def _connector_path(kind: str) -> str:
    """The import path of a connector named by path, short name or class name.

    An unknown short name is kept as it is: as in ProxyStore, a config may name a kind
    that is checked only when the connector is built (:func:`_resolve_kind`).
    """
    if '.' in kind:
        return kind
    return _CONNECTOR_KINDS.get(kind.lower().removesuffix('connector'), kind)


def _resolve_kind(kind: str) -> str:
    """The import path of ``kind``; raise ``ConnectorKindError`` for an unknown name."""
    path = _connector_path(kind)
    if '.' not in path:
        known = ', '.join(sorted(_CONNECTOR_KINDS))
        raise ConnectorKindError(
            f'unknown connector kind {kind!r}: give an import path or one of {known}',
        )
    return path


def _short_kind(path: str) -> str:
    """The short name of one of tether's connectors (``'file'``), else ``path``."""
    for short, known in _CONNECTOR_KINDS.items():
        if known == path:
            return short
    return path


def _build_connector(path: str, options: dict[str, Any]) -> Any:
    ctype = import_from_path(_resolve_kind(path))
    try:
        return ctype.from_config(dict(options))
    except ConnectorConfigError:
        raise
    except TypeError as e:
        raise ConnectorConfigError(f'cannot build {path} from {options!r}: {e}') from e


class ConnectorConfig(pydantic.BaseModel):
    """A connector named by ``kind`` and built from ``options`` (ProxyStore's shape).

    ``kind`` is an import path or, for tether's connectors, a short name (``'redis'``,
    ``'file'``, ``'LocalConnector'`` ...). Inside a :class:`StoreConfig` it becomes
    ``connector_type`` and ``connector_config``; ``StoreConfig(connector=...)`` accepts it.
    """

    model_config = pydantic.ConfigDict(frozen=True, extra='forbid')

    kind: str
    options: dict[str, Any] = pydantic.Field(default_factory=dict)

    def get_connector_type(self) -> type:
        """Import and return the connector class ``kind`` names.

        Raises:
            ConnectorKindError: if ``kind`` is neither a known short name nor a path
                (a :class:`ValueError` too).
            ConfigError: if ``kind`` does not import.
        """
        cls = import_from_path(_resolve_kind(self.kind))
        if not isinstance(cls, type):
            raise ConfigError(f'connector kind {self.kind!r} is not a class')
        return cls

    def get_connector(self) -> Any:
        """Build the connector (``from_config(options)``).

        Raises:
            ConnectorKindError: for an unknown ``kind`` (a :class:`ValueError` too).
            ConnectorConfigError: if ``options`` do not fit the connector (a
                :class:`TypeError` too).
        """
        return _build_connector(self.kind, self.options)


class StoreConfig(pydantic.BaseModel):
    """Everything needed to rebuild a :class:`~tether.store.Store` in another process.

    Callables (the serializer and deserializer) are kept as import paths so the config
    can be written to TOML; they must be module-level functions.
    """

    model_config = pydantic.ConfigDict(frozen=True, extra='forbid')

    name: str
    connector_type: str
    connector_config: dict[str, Any] = pydantic.Field(default_factory=dict)
    serializer: str | None = None
    deserializer: str | None = None
    cache_size: int = pydantic.Field(default=16, ge=0)
    metrics: bool = False
    populate_target: bool = True
    auto_register: bool = False

    @pydantic.model_validator(mode='before')
    @classmethod
    def _connector_shape(cls, data: Any) -> Any:
        """Accept ProxyStore's ``connector=ConnectorConfig(kind=..., options=...)``."""
        if not isinstance(data, dict) or 'connector' not in data:
            return data
        data = dict(data)
        connector = data.pop('connector')
        if isinstance(connector, dict):
            connector = ConnectorConfig.model_validate(connector)
        if not isinstance(connector, ConnectorConfig):
            raise ConfigError(
                f'connector= takes a ConnectorConfig, not {type(connector).__name__}',
            )
        if 'connector_type' in data or 'connector_config' in data:
            raise ConfigError('give connector= or connector_type/connector_config, not both')
        data['connector_type'] = _connector_path(connector.kind)
        data['connector_config'] = dict(connector.options)
        return data

    @property
    def connector(self) -> ConnectorConfig:
        """The connector part of this config, in ProxyStore's shape (tether's connectors
        by their short name, ``'file'``; others by import path)."""
        return ConnectorConfig(
            kind=_short_kind(self.connector_type),
            options=dict(self.connector_config),
        )

    @classmethod
    def for_connector(
        cls,
        name: str,
        connector: Any,
        *,
        serializer: Callable[..., Any] | None = None,
        deserializer: Callable[..., Any] | None = None,
        cache_size: int = 16,
        metrics: bool = False,
        populate_target: bool = True,
    ) -> StoreConfig:
        """Build the config of a store over ``connector``."""
        ctype = type(connector)
        connector_config = connector.config()
        _refuse_secrets(connector_config, path_of(ctype))
        return cls(
            name=name,
            connector_type=path_of(ctype),
            connector_config=_drop_defaults(ctype, connector_config),
            serializer=None if serializer is None else path_of(serializer),
            deserializer=None if deserializer is None else path_of(deserializer),
            cache_size=cache_size,
            metrics=metrics,
            populate_target=populate_target,
        )

    @classmethod
    def from_dict(cls, data: Any, *, trusted: bool = False) -> StoreConfig:
        """Validate a config that arrived as data (JSON, a message, a file).

        Args:
            data: The ``model_dump()`` form of a config.
            trusted: Skip the allowlist (only for data as trusted as your own code).

        Raises:
            ConfigError: if ``data`` is not a valid config.
            UntrustedTypeError: if it names a connector, serializer or deserializer that
                is not allowlisted (see :mod:`tether.store.allowlist`).
        """
        try:
            config = cls.model_validate(data)
        except pydantic.ValidationError as e:
            raise ConfigError(f'invalid store config: {e}') from e
        if not trusted:
            check_config(config)
        return config

    def make_connector(self) -> Any:
        """Build the connector this config describes (importing its type: see from_dict).

        Raises:
            ConnectorKindError: if ``connector_type`` names no connector (``ValueError``).
            ConnectorConfigError: if the options do not fit it (``TypeError``).
        """
        return _build_connector(self.connector_type, self.connector_config)

    def write_toml(self, path: str | os.PathLike[str]) -> None:
        """Write this config to a TOML file."""
        import tomli_w

        data = self.model_dump(exclude_none=True)
        with open(path, 'wb') as f:
            tomli_w.dump(data, f)

    @classmethod
    def from_toml(cls, path: str | os.PathLike[str], *, trusted: bool = False) -> StoreConfig:
        """ProxyStore's name for :meth:`read_toml` (its ``[connector]`` table is accepted)."""
        return cls.read_toml(path, trusted=trusted)

    @classmethod
    def read_toml(cls, path: str | os.PathLike[str], *, trusted: bool = False) -> StoreConfig:
        """Read a config from a TOML file (its types checked as :meth:`from_dict` does).

        Raises:
            ConfigError: if the file cannot be read or is not a valid config.
            UntrustedTypeError: if it names a type that is not allowlisted.
        """
        try:
            with open(path, 'rb') as f:
                data = tomllib.load(f)
        except (OSError, tomllib.TOMLDecodeError) as e:
            raise ConfigError(f'cannot read store config {os.fspath(path)!r}: {e}') from e
        try:
            return cls.from_dict(data, trusted=trusted)
        except ConfigError as e:
            raise type(e)(f'store config {os.fspath(path)!r}: {e}') from e
