"""Cleanup deletes only its own data (issue 8 items 8 and 9).

Redis prefixes are literal and an empty one is refused; a MultiConnector never clears a
connector it sets aside, survives one that fails to build, and keeps its hostname.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import REDIS_HOST, REDIS_PORT
from tether.connectors._util import glob_escape
from tether.connectors.file import FileConnector, FileKey
from tether.connectors.local import LocalConnector
from tether.connectors.multi import MultiConnector, MultiKey, Policy
from tether.connectors.redis import RedisConnector
from tether.exceptions import ConfigError, ConnectorError, NoConnectorMatchError
from tether.store import StoreConfig


@pytest.fixture
def base(redis_client: Any) -> Iterator[str]:
    """A unique key namespace; every key under it is deleted afterwards."""
    name = f'tether-test-cleanup-{uuid.uuid4().hex[:12]}-'
    yield name
    for key in list(redis_client.scan_iter(match=f'{name}*')):
        redis_client.delete(key)


def test_glob_escape_makes_every_glob_character_literal() -> None:
    assert glob_escape('a*b?c[d]e\\f') == 'a\\*b\\?c\\[d\\]e\\\\f'
    assert glob_escape('plain:prefix') == 'plain:prefix'


@pytest.mark.parametrize('glob', ['app?', 'app*', 'app[X1]', 'app\\', 'ap[^]p'])
def test_clear_matches_the_prefix_literally(redis_client: Any, base: str, glob: str) -> None:
    connector = RedisConnector(REDIS_HOST, REDIS_PORT, prefix=f'{base}{glob}', clear=True)
    mine = connector.put(b'mine')
    others = [f'{base}appX:1', f'{base}app1:2', f'{base}app:3', f'{base}apple', f'{base}a\\pp']
    for name in others:
        redis_client.set(name, b'not yours')
    connector.close()
    assert not redis_client.exists(mine.redis_key)
    assert all(redis_client.get(name) == b'not yours' for name in others)


def test_clear_refuses_an_empty_prefix(redis_client: Any, base: str) -> None:
    redis_client.set(f'{base}other-app', b'keep me')
    with pytest.raises(ConfigError, match='non-empty prefix'):
        RedisConnector(REDIS_HOST, REDIS_PORT, prefix='', clear=True)
    connector = RedisConnector(REDIS_HOST, REDIS_PORT, prefix='')
    with pytest.raises(ConfigError, match='every key of the database'):
        connector.close(clear=True)
    assert redis_client.get(f'{base}other-app') == b'keep me'
    connector.close()  # without clear: fine


# MultiConnector: setting a connector aside never deletes anything -------------------------


def _files(path: Path) -> list[str]:
    return sorted(p.name for p in path.iterdir()) if path.exists() else []


def test_dormant_connectors_are_never_cleared(
    tmp_path: Path, redis_client: Any, base: str
) -> None:
    shared = tmp_path / 'shared'
    active_there = FileConnector(str(shared), clear=True)
    kept = active_there.put(b'data of the compute nodes')
    redis_there = RedisConnector(REDIS_HOST, REDIS_PORT, prefix=f'{base}cluster:', clear=True)
    redis_kept = redis_there.put(b'data of the compute nodes')

    # On a login node neither connector applies: they are set aside, never cleared.
    here = MultiConnector(
        {
            'shared': (FileConnector(str(shared), clear=True), Policy(host_pattern=['nid.*'])),
            'redis': (
                RedisConnector(REDIS_HOST, REDIS_PORT, prefix=f'{base}cluster:', clear=True),
                Policy(host_pattern=['nid.*']),
            ),
            'local': (LocalConnector(), Policy(priority=-1)),
        },
        hostname='login1',
    )
    assert sorted(here.dormant) == ['redis', 'shared']
    assert active_there.exists(kept)
    assert redis_client.exists(redis_kept.redis_key)

    # Rebuilt from its config on the login node, it reads the dormant connectors' keys
    # (building them just for that) and closing it clears none of them.
    again = MultiConnector.from_config(here.config())
    assert bytes(again.get(MultiKey('shared', kept))) == b'data of the compute nodes'  # type: ignore[arg-type]
    assert again.exists(MultiKey('redis', redis_kept))
    again.close()
    here.close()
    assert active_there.exists(kept)
    assert redis_client.exists(redis_kept.redis_key)
    assert _files(shared)

    # Where they do apply, close() does what their config says.
    there = MultiConnector.from_config({**here.config(), 'hostname': 'nid00042'})
    assert sorted(there.active) == ['local', 'redis', 'shared']
    there.close()
    assert not shared.exists()
    assert not redis_client.exists(redis_kept.redis_key)


def test_one_connector_failing_to_build_leaves_the_others_usable(tmp_path: Path) -> None:
    (tmp_path / 'a-file').write_text('a file where a directory is needed')
    config = {
        'connectors': {
            'local': {
                'type': 'tether.connectors.local.LocalConnector',
                'config': LocalConnector().config(),
                'policy': Policy().model_dump(),
            },
            'broken': {
                'type': 'tether.connectors.file.FileConnector',
                'config': {'store_dir': str(tmp_path / 'a-file' / 'sub')},
                'policy': {'priority': 5, 'subset_tags': ['big']},
            },
        },
    }
    rebuilt = MultiConnector.from_config(config)
    assert sorted(rebuilt.failed) == ['broken']
    assert sorted(rebuilt.active) == ['local']
    key = rebuilt.put(b'fine')
    assert key.connector_name == 'local'
    assert bytes(rebuilt.get(key)) == b'fine'  # type: ignore[arg-type]
    with pytest.raises(NoConnectorMatchError, match='broken: cannot be built on this host'):
        rebuilt.put(b'x', subset_tags=['big'])
    with pytest.raises(ConnectorError, match=r"'broken' .* could not be built on this host"):
        rebuilt.get(MultiKey('broken', FileKey('abc')))
    rebuilt.close()


def test_config_keeps_the_hostname_override() -> None:
    multi = MultiConnector(
        {
            'site': (LocalConnector(), Policy(host_pattern=['nid\\d+'])),
            'fallback': (LocalConnector(), Policy(priority=-1)),
        },
        hostname='nid0001',
    )
    config = multi.config()
    assert config['hostname'] == 'nid0001'
    rebuilt = MultiConnector.from_config(config)
    assert rebuilt.hostname == 'nid0001'
    assert sorted(rebuilt.active) == ['fallback', 'site']
    assert rebuilt.config() == config
    store_config = StoreConfig.for_connector('multi-host', multi)
    assert store_config.connector_config['hostname'] == 'nid0001'
