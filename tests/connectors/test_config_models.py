"""Each connector's configuration is one frozen, typed model: the single source of its
constructor's keywords, ``config()``, ``from_config()`` and TOML; secrets never dumped."""

from __future__ import annotations

import inspect
import pathlib
from typing import Any

import pydantic
import pytest

from tether.connectors.config import ConnectorConfigModel
from tether.connectors.endpoint import EndpointConnector, EndpointConnectorConfig
from tether.connectors.file import FileConnector, FileConnectorConfig
from tether.connectors.local import LocalConnector, LocalConnectorConfig
from tether.connectors.multi import MultiConnector, MultiConnectorConfig, Policy
from tether.connectors.node import NodeConnector, NodeConnectorConfig
from tether.connectors.redis import RedisConnector, RedisConnectorConfig
from tether.connectors.shared_memory import SharedMemoryConnector, SharedMemoryConnectorConfig
from tether.exceptions import ConfigError, ConnectorConfigError
from tether.store import StoreConfig

MODELS: list[tuple[type[Any], type[ConnectorConfigModel]]] = [
    (LocalConnector, LocalConnectorConfig),
    (FileConnector, FileConnectorConfig),
    (SharedMemoryConnector, SharedMemoryConnectorConfig),
    (RedisConnector, RedisConnectorConfig),
    (NodeConnector, NodeConnectorConfig),
    (EndpointConnector, EndpointConnectorConfig),
]


@pytest.mark.parametrize(('connector', 'model'), MODELS, ids=lambda c: c.__name__)
def test_constructor_keywords_are_the_model_fields(
    connector: type[Any],
    model: type[ConnectorConfigModel],
) -> None:
    assert connector.config_model is model
    params = {
        name: p
        for name, p in inspect.signature(connector.__init__).parameters.items()
        if name != 'self'
    }
    assert list(params) == list(model.model_fields)
    for name, p in params.items():
        field = model.model_fields[name]
        if p.default is inspect.Parameter.empty:
            assert field.is_required(), name
        else:
            assert field.get_default() == p.default, name


def test_multi_connector_config_is_its_specs() -> None:
    # The one exception to the constructor rule: a MultiConnector is made from live
    # connectors and rebuilt from their specs (its config model), taken as dormant.
    multi = MultiConnector({'local': (LocalConnector(), Policy())})
    config = multi.config()
    assert set(config) == set(MultiConnectorConfig.model_fields)
    rebuilt = MultiConnector.from_config(config)
    assert rebuilt.config() == config
    with pytest.raises(ConfigError, match='MultiConnectorConfig'):
        MultiConnector.from_config({'connectors': {}, 'extra': 1})


def test_models_are_frozen_and_validated() -> None:
    model = RedisConnectorConfig(hostname='h')
    with pytest.raises(pydantic.ValidationError):
        model.port = 1  # type: ignore[misc]
    with pytest.raises(ConnectorConfigError, match='RedisConnectorConfig') as info:
        RedisConnector.from_config({'hostname': 'h', 'no_such_option': 1})
    assert isinstance(info.value, ConfigError)
    assert isinstance(info.value, TypeError)  # what ProxyStore's from_config raised
    with pytest.raises(ConfigError, match='port'):
        RedisConnector.from_config({'port': 'not a port'})
    with pytest.raises(ConfigError, match='mapping'):
        RedisConnectorConfig.load(['hostname'])  # type: ignore[arg-type]


def test_secret_fields_are_never_dumped() -> None:
    secret = 'pw-never-shown'
    model = RedisConnectorConfig(password=secret)
    assert RedisConnectorConfig.secret_fields() == {'password'}
    assert NodeConnectorConfig.secret_fields() == {'secret'}
    assert 'password' not in model.dump()
    assert secret not in repr(model)
    assert model.arguments()['password'] == secret
    assert 'secret' not in NodeConnectorConfig(secret=secret).dump()
    for _, cls in MODELS:
        assert not cls.secret_fields() & set(cls.model_fields) - {'password', 'secret'}


@pytest.mark.parametrize(
    'make',
    [
        lambda tmp: LocalConnector(),
        lambda tmp: FileConnector(tmp / 'objects', clear=True),
        lambda tmp: SharedMemoryConnector('tether_test_cfg', clear=True),
    ],
    ids=['local', 'file', 'shared_memory'],
)
def test_config_round_trips_through_the_model_and_toml(
    make: Any,
    tmp_path: pathlib.Path,
) -> None:
    connector = make(tmp_path)
    try:
        config = connector.config()
        assert config == connector.config_model.load(config).dump()
        rebuilt = type(connector).from_config(config)
        assert rebuilt.config() == config
        store_config = StoreConfig.for_connector('cfg', connector)
        store_config.write_toml(tmp_path / 'store.toml')
        again = StoreConfig.read_toml(tmp_path / 'store.toml')
        assert again.make_connector().config() == config
    finally:
        connector.close()


def test_redis_config_round_trip(redis_connector: Any) -> None:
    config = redis_connector.config()
    assert config == RedisConnectorConfig.load(config).dump()
    assert 'password' not in config
    rebuilt = RedisConnector.from_config(config)
    try:
        assert rebuilt.config() == config
        assert rebuilt.settings == redis_connector.settings
    finally:
        rebuilt.close()
