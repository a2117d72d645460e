"""Cleanup deletes only its own data: Redis prefixes are literal, an empty one is refused."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from tests.conftest import REDIS_HOST, REDIS_PORT
from tether.connectors._util import glob_escape
from tether.connectors.redis import RedisConnector
from tether.exceptions import ConfigError


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
