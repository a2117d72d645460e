"""Typed, frozen configuration models of connectors.

Each connector's configuration is one :class:`ConnectorConfigModel` subclass (for
example :class:`~tether.connectors.redis.RedisConnectorConfig`), the single source of:

* the constructor's keywords (a test checks that the constructor's parameters are the
  model's fields, with the same defaults);
* :meth:`config() <tether.connectors.protocols.Connector.config>`: the model dumped,
  without its secret fields;
* :meth:`from_config() <tether.connectors.protocols.Connector.from_config>`: the dict
  validated by the model (unknown fields and wrong types raise
  :class:`~tether.exceptions.ConnectorConfigError`), then passed to the constructor;
* TOML: a :class:`~tether.store.StoreConfig` holds that dict as ``connector_config``.

Secret fields (:func:`secret_field`: passwords, node secrets, tokens) are accepted as
keywords but never dumped: a connector resolves its secret where it runs (environment,
secret file, or a connector of the same process), so none travels in a proxy, a store
config or a message.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar, Self

import pydantic

from tether.exceptions import ConnectorConfigError

__all__ = ['ConfiguredConnector', 'ConnectorConfigModel', 'secret_field']


def secret_field(default: Any = None) -> Any:
    """A model field holding a secret: accepted, never dumped, never shown in ``repr``."""
    return pydantic.Field(default, exclude=True, repr=False, json_schema_extra={'secret': True})


class ConnectorConfigModel(pydantic.BaseModel):
    """Base of the connectors' configuration models (frozen; unknown fields refused)."""

    model_config = pydantic.ConfigDict(frozen=True, extra='forbid', arbitrary_types_allowed=True)

    @classmethod
    def secret_fields(cls) -> frozenset[str]:
        """The names of the fields that are never dumped."""
        return frozenset(
            name
            for name, field in cls.model_fields.items()
            if isinstance(field.json_schema_extra, dict) and field.json_schema_extra.get('secret')
        )

    @classmethod
    def load(cls, config: Mapping[str, Any]) -> Self:
        """Validate a ``config()`` dict (secrets allowed: a process's own config).

        Raises:
            ConnectorConfigError: for unknown fields or values of the wrong type (a
                :class:`~tether.exceptions.ConfigError` and a :class:`TypeError`).
        """
        if not isinstance(config, Mapping):
            raise ConnectorConfigError(
                f'a {cls.__name__} is built from a mapping, not {type(config).__name__}',
            )
        try:
            return cls.model_validate(dict(config))
        except pydantic.ValidationError as e:
            raise ConnectorConfigError(f'invalid {cls.__name__}: {e}') from e

    def dump(self) -> dict[str, Any]:
        """Return the config dict: every field but the secret ones."""
        return self.model_dump()

    def arguments(self) -> dict[str, Any]:
        """Return the constructor's keyword arguments (secret fields included)."""
        return {name: getattr(self, name) for name in type(self).model_fields}


class ConfiguredConnector:
    """Mixin: :meth:`config` and :meth:`from_config` through the class's ``config_model``.

    A connector sets ``config_model`` (its :class:`ConnectorConfigModel`) and, in its
    constructor, ``self.settings`` (that model, with the values it resolved and without
    its secrets).
    """

    config_model: ClassVar[type[ConnectorConfigModel]]
    settings: ConnectorConfigModel

    def config(self) -> dict[str, Any]:
        """Return the configuration of this connector (never a secret)."""
        return self.settings.dump()

    def _settle(self) -> None:
        """Set ``settings`` from this connector's attributes named after the model's fields
        (the values it resolved), its secret fields left at their defaults."""
        model = self.config_model
        secrets = model.secret_fields()
        self.settings = model(
            **{name: getattr(self, name) for name in model.model_fields if name not in secrets},
        )

    @classmethod
    def from_config(cls, config: Mapping[str, Any]) -> Self:
        """Rebuild a connector from :meth:`config` (validated by ``config_model``).

        Raises:
            ConnectorConfigError: for unknown fields or values of the wrong type.
        """
        return cls(**cls.config_model.load(config).arguments())
