"""Lifetimes and configs in ProxyStore's shapes."""

from __future__ import annotations

import atexit
import datetime
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tether.connectors.file import FileConnector
from tether.connectors.local import LocalConnector
from tether.exceptions import (
    ConfigError,
    ConnectorConfigError,
    ConnectorKindError,
    LifetimeArgumentError,
    LifetimeError,
)
from tether.store import Store, get_store
from tether.store.config import ConnectorConfig, StoreConfig
from tether.store.lifetimes import (
    ContextLifetime,
    LeaseLifetime,
    StaticLifetime,
    register_lifetime_atexit,
)


@pytest.fixture
def store() -> Iterator[Store[LocalConnector]]:
    with Store('porting-lt', LocalConnector()) as s:
        yield s


def test_lease_takes_a_timedelta(store: Store[Any]) -> None:
    lease = LeaseLifetime(store, datetime.timedelta(hours=1))
    key = store.put(1, lifetime=lease)
    assert not lease.done()
    lease.extend(datetime.timedelta(minutes=5))
    lease.close()
    assert not store.exists(key)


def test_lease_takes_a_datetime(store: Store[Any]) -> None:
    later = datetime.datetime.now() + datetime.timedelta(hours=1)
    lease = LeaseLifetime(store, later)
    assert not lease.done()
    lease.extend(later + datetime.timedelta(hours=1))
    lease.close()
    aware = datetime.datetime.now(datetime.UTC) + datetime.timedelta(hours=1)
    lease2 = LeaseLifetime(store, aware)
    assert not lease2.done()
    lease2.close()


@pytest.mark.parametrize(
    'expiry',
    [-1, -0.5, datetime.timedelta(seconds=-3), datetime.datetime(2000, 1, 1)],
)
def test_a_lease_in_the_past_ends_at_once(store: Store[Any], expiry: Any) -> None:
    lease = LeaseLifetime(store, expiry)
    assert lease.done()
    with pytest.raises(RuntimeError):  # ProxyStore raised RuntimeError here
        store.put(1, lifetime=lease)


def test_lease_rejects_other_types(store: Store[Any]) -> None:
    with pytest.raises(LifetimeArgumentError) as info:
        LeaseLifetime(store, '10')  # type: ignore[arg-type]
    assert isinstance(info.value, ValueError)


def test_close_stores(tmp_path: Path) -> None:
    s = Store('porting-close', FileConnector(str(tmp_path / 'd')))
    lifetime = ContextLifetime(s)
    key = s.put('x', lifetime=lifetime)
    lifetime.close(close_stores=True)
    assert s.closed
    assert not FileConnector(str(tmp_path / 'd')).exists(key)


def test_lease_close_stores(store: Store[Any]) -> None:
    lease = LeaseLifetime(store, 60)
    store.put(1, lifetime=lease)
    lease.close(close_stores=True)
    assert store.closed


def test_static_lifetime_close_takes_close_stores() -> None:
    # The singleton must stay alive for the rest of the test session, so check in a child.
    code = textwrap.dedent(
        """
        from tether.connectors.local import LocalConnector
        from tether.store import Store
        from tether.store.lifetimes import StaticLifetime
        s = Store('static', LocalConnector())
        key = s.put(1, lifetime=StaticLifetime())
        StaticLifetime().close(close_stores=True)
        assert StaticLifetime().done()
        assert s.closed
        print('ok')
        """,
    )
    out = subprocess.run(
        [sys.executable, '-c', code], capture_output=True, text=True, timeout=60, check=True
    )
    assert out.stdout.strip() == 'ok'


def test_static_lifetime_without_store_is_a_value_error() -> None:
    with pytest.raises(ValueError, match='store='):
        StaticLifetime().add_key('k')
    with pytest.raises(LifetimeError):
        StaticLifetime().add_key('k')


def test_register_lifetime_atexit(store: Store[Any]) -> None:
    lifetime = ContextLifetime(store)
    key = store.put(1, lifetime=lifetime)
    callback = register_lifetime_atexit(lifetime, close_stores=False)
    try:
        callback()  # what atexit will call
        assert lifetime.done()
        assert not store.exists(key)
        assert not store.closed
    finally:
        atexit.unregister(callback)


def test_register_lifetime_atexit_runs_at_exit(tmp_path: Path) -> None:
    code = textwrap.dedent(
        f"""
        from tether.connectors.file import FileConnector
        from tether.store import Store
        from tether.store.lifetimes import ContextLifetime, register_lifetime_atexit
        s = Store('atexit', FileConnector({str(tmp_path)!r}))
        lt = ContextLifetime(s)
        print(s.put('x', lifetime=lt).filename)
        register_lifetime_atexit(lt)
        """,
    )
    out = subprocess.run(
        [sys.executable, '-c', code], capture_output=True, text=True, timeout=60, check=True
    )
    name = out.stdout.strip()
    assert name
    assert not (tmp_path / name).exists()


def test_connector_config_and_store_config_connector_shape(tmp_path: Path) -> None:
    config = StoreConfig(
        name='porting-cfg',
        connector=ConnectorConfig(kind='file', options={'store_dir': str(tmp_path)}),
        cache_size=4,
    )  # type: ignore[call-arg]
    assert config.connector_type == 'tether.connectors.file.FileConnector'
    # tether's own connectors come back by their short name, as ProxyStore's config kept it.
    assert config.connector == ConnectorConfig(kind='file', options={'store_dir': str(tmp_path)})
    with Store.from_config(config) as s:
        assert isinstance(s.connector, FileConnector)
        assert s.get(s.put(1)) == 1
    # Short names, class names and paths; dict form; TOML round trip.
    for kind in ('local', 'LocalConnector', 'tether.connectors.local.LocalConnector'):
        assert ConnectorConfig(kind=kind).get_connector_type() is LocalConnector
    from_dict = StoreConfig.model_validate({'name': 'd', 'connector': {'kind': 'local'}})
    assert from_dict.connector_type.endswith('LocalConnector')
    assert isinstance(ConnectorConfig(kind='local').get_connector(), LocalConnector)
    path = tmp_path / 'store.toml'
    config.write_toml(path)
    assert StoreConfig.read_toml(path) == config


def test_connector_config_errors() -> None:
    with pytest.raises(ConfigError, match='unknown connector kind'):
        ConnectorConfig(kind='nosuch').get_connector_type()
    # An unknown kind is refused when the connector is built, not when the config is
    # made, as a ValueError too (ProxyStore's); options that do not fit, as a TypeError.
    config = StoreConfig.model_validate({'name': 'k', 'connector': {'kind': 'nosuch'}})
    for build in (config.make_connector, ConnectorConfig(kind='nosuch').get_connector):
        with pytest.raises(ConnectorKindError, match='nosuch') as info:
            build()
        assert isinstance(info.value, ValueError)
    with pytest.raises(ConnectorConfigError, match='wrong_arg') as bad:
        ConnectorConfig(kind='local', options={'wrong_arg': True}).get_connector()
    assert isinstance(bad.value, TypeError)


def test_store_config_from_toml_with_a_connector_table(tmp_path: Path) -> None:
    path = tmp_path / 'ps.toml'
    path.write_text(
        f'name = "ps-toml"\ncache_size = 0\npopulate_target = false\n\n'
        f'[connector]\nkind = "file"\noptions = {{ store_dir = "{tmp_path}" }}\n'
    )
    config = StoreConfig.from_toml(path)
    assert (config.name, config.cache_size, config.populate_target) == ('ps-toml', 0, False)
    assert config.connector.kind == 'file'
    assert config.connector.options == {'store_dir': str(tmp_path)}
    with pytest.raises(ConfigError, match='not both'):
        StoreConfig.model_validate(
            {'name': 'x', 'connector': {'kind': 'local'}, 'connector_type': 'a.B'}
        )


def test_auto_register() -> None:
    config = StoreConfig.model_validate(
        {'name': 'porting-auto', 'connector': {'kind': 'local'}, 'auto_register': True}
    )
    s = Store.from_config(config)
    assert get_store('porting-auto') is s
    s.close()
