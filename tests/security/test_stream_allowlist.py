"""The allowlist: store configs and keys rebuilt from data import nothing else.

Stream events, TOML files and JSON documents name connector, key and serializer types by
import path. Only tether's own and those the application registers are imported.
"""

from __future__ import annotations

import pickle
from collections.abc import Iterator
from pathlib import Path
from typing import Any, NamedTuple

import pytest

from tests.security._stream_forge import event_message, make_tattletale, queue_of
from tether.connectors.file import FileConnector
from tether.connectors.local import LocalConnector, LocalKey
from tether.connectors.multi import MultiConnector, Policy
from tether.exceptions import ConfigError, EventRefusedError, UntrustedTypeError
from tether.store import Store, StoreConfig, allowlist
from tether.stream import StreamConsumer
from tether.stream import events as ev


class AppKey(NamedTuple):
    name: str


class AppConnector(LocalConnector):
    """An application's own connector (a LocalConnector under another name)."""


class AppFileConnector(FileConnector):
    """Another one, whose objects outlive the connector."""


def app_serializer(obj: Any) -> bytes:
    return repr(obj).encode()


def app_deserializer(data: Any) -> Any:
    return bytes(data).decode()


@pytest.fixture
def registered_app_types() -> Iterator[None]:
    allowlist.register_connector(AppConnector, key_type=AppKey)
    allowlist.register_serializer(app_serializer)
    allowlist.register_serializer(app_deserializer)
    yield
    for obj in (AppConnector, AppKey, app_serializer, app_deserializer):
        allowlist.unregister(obj)


def test_tethers_own_types_are_allowlisted() -> None:
    connectors = allowlist.registered('connector')
    assert 'tether.connectors.redis.RedisConnector' in connectors
    assert 'tether.connectors.multi.MultiConnector' in connectors
    assert 'tether.connectors.file.FileKey' in allowlist.registered('key')
    assert allowlist.registered('serializer') == [
        'tether.serialize.deserialize',
        'tether.serialize.serialize',
    ]
    assert allowlist.resolve('key', 'tether.connectors.local.LocalKey') is LocalKey
    assert allowlist.key_type_of('tether.connectors.local.LocalConnector') == (
        'tether.connectors.local.LocalKey'
    )


@pytest.mark.parametrize(
    ('field', 'value'),
    [
        ('connector_type', 'os.system'),
        ('connector_type', 'subprocess.Popen'),
        ('serializer', 'builtins.eval'),
        ('deserializer', 'pickle.loads'),
    ],
)
def test_from_dict_refuses_what_is_not_allowlisted(field: str, value: str) -> None:
    data = Store('cfg', LocalConnector()).config().model_dump() | {field: value}
    with pytest.raises(UntrustedTypeError, match='not an allowlisted'):
        StoreConfig.from_dict(data)
    assert StoreConfig.from_dict(data, trusted=True).model_dump()[field] == value


def test_from_dict_imports_nothing_it_refuses(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    tattle = make_tattletale(tmp_path, monkeypatch)
    data = {'name': 'x', 'connector_type': tattle.connector_type}
    with pytest.raises(UntrustedTypeError):
        StoreConfig.from_dict(data)
    assert not tattle.imported


def test_toml_config_is_checked(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    tattle = make_tattletale(tmp_path, monkeypatch)
    path = tmp_path / 'store.toml'
    path.write_text(f'name = "x"\nconnector_type = "{tattle.connector_type}"\n')
    with pytest.raises(UntrustedTypeError, match=r'store\.toml'):
        StoreConfig.read_toml(path)
    assert not tattle.imported
    good = Store('good', LocalConnector()).config()
    good.write_toml(path)
    assert StoreConfig.read_toml(path) == good


def test_multi_connector_configs_are_checked_inside(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    tattle = make_tattletale(tmp_path, monkeypatch)
    multi = MultiConnector({'a': (LocalConnector(), Policy())})
    config = Store('multi', multi).config().model_dump()
    StoreConfig.from_dict(config)  # tether's own connectors inside: fine
    specs = config['connector_config']['connectors']
    specs['evil'] = {'type': tattle.connector_type, 'config': {}, 'policy': {}}
    with pytest.raises(UntrustedTypeError):
        StoreConfig.from_dict(config)
    assert not tattle.imported
    config['connector_config'] = {'connectors': 'nonsense'}
    with pytest.raises(ConfigError):
        StoreConfig.from_dict(config)


def test_registered_application_types_are_accepted(registered_app_types: None) -> None:
    store = Store(
        'app',
        AppConnector(),
        serializer=app_serializer,
        deserializer=app_deserializer,
        register=True,
    )
    config = StoreConfig.from_dict(store.config().model_dump())
    assert config == store.config()
    assert 'tests.security.test_stream_allowlist.AppKey' in allowlist.registered('key')
    # A stream event with the application's key type decodes, and must match the store.
    key = store.put('item')
    message = event_message(
        config.model_dump(),
        {'type': 'tether.connectors.local.LocalKey', 'fields': list(key)},
    )
    with pytest.raises(EventRefusedError, match='AppKey'):
        StreamConsumer(queue_of(message), key=False, timeout=1).next()
    path = 'tests.security.test_stream_allowlist.AppKey'
    assert ev.decode_key({'type': path, 'fields': ['n']}) == AppKey('n')


def test_unregister_keeps_the_builtins(registered_app_types: None) -> None:
    allowlist.unregister(AppConnector)
    with pytest.raises(UntrustedTypeError):
        allowlist.resolve('connector', 'tests.security.test_stream_allowlist.AppConnector')
    allowlist.unregister('tether.connectors.local.LocalConnector')
    assert allowlist.resolve('connector', 'tether.connectors.local.LocalConnector') is (
        LocalConnector
    )


def test_registration_checks_what_it_is_given() -> None:
    with pytest.raises(ConfigError, match='NamedTuple'):
        allowlist.register_key(dict)
    with pytest.raises(ConfigError, match='from_config'):
        allowlist.register_connector(dict)
    with pytest.raises(ConfigError, match='no import path'):
        allowlist.register_serializer(lambda b: b)
    with pytest.raises(UntrustedTypeError, match='import path'):
        allowlist.resolve('key', ['not', 'a', 'path'])


def test_pickle_is_the_trusted_path(tmp_path: Path) -> None:
    """Unpickling a proxy rebuilds its store without the allowlist: pickle trusts its maker."""
    store = Store('pickled', AppFileConnector(tmp_path))
    data = pickle.dumps(store.proxy('value'))
    store.close()  # this process no longer has the store: the proxy rebuilds it
    assert pickle.loads(data) == 'value'
    path = 'tests.security.test_stream_allowlist.AppFileConnector'
    assert path not in allowlist.registered('connector')


def test_every_tether_connector_is_allowlisted() -> None:
    """A new connector in tether must add itself (and its key type) to the builtins."""
    import importlib
    import inspect

    from tests.meta.test_public_api import OPTIONAL, public_modules

    methods = ('from_config', 'config', 'put', 'get', 'evict', 'exists', 'close')
    found = []
    homes = ('tether.connectors', 'tether.endpoint', 'tether.relay')  # where connectors live
    for name in public_modules():
        if name in OPTIONAL or not name.startswith(homes):
            continue
        module = importlib.import_module(name)
        for _, cls in inspect.getmembers(module, inspect.isclass):
            if (
                cls.__module__ == name
                and not getattr(cls, '_is_protocol', False)
                and not inspect.isabstract(cls)
                and cls.__name__ != 'ConnectorBase'  # the base class, not a connector
                and not cls.__name__.startswith('_')  # private adapters
                and all(callable(getattr(cls, m, None)) for m in methods)
            ):
                found.append(f'{name}.{cls.__qualname__}')
    assert 'tether.connectors.redis.RedisConnector' in found
    assert sorted(found) == sorted(allowlist.BUILTIN_CONNECTORS)
