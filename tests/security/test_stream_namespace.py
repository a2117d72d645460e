"""A signed stream event belongs to its stream, and key files live in private folders.

Two streams of one user share the stream key and a topic name but differ in their key
prefix (Redis queues): an event copied from one into the other is refused, because the
stream's namespace is under the MAC. A key file in a folder that others can write is
refused, as one that others can read or write already is.
"""

from __future__ import annotations

import secrets
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import redis

from tests.conftest import service_up
from tether.connectors.redis import RedisConnector
from tether.exceptions import ConfigError, EventReplayError
from tether.steer._auth import ENV_KEY as STEER_ENV_KEY
from tether.steer._auth import ENV_KEY_FILE as STEER_ENV_KEY_FILE
from tether.steer._auth import resolve_secret
from tether.store import Store
from tether.stream import StreamConsumer, StreamProducer
from tether.stream.auth import ENV_KEY, ENV_KEY_FILE, default_key_file, resolve_key
from tether.stream.shims.amqp import AMQPPublisher
from tether.stream.shims.redis import RedisQueuePublisher, RedisQueueSubscriber

KEY = secrets.token_hex(32)


@pytest.fixture
def client(unique_prefix: str) -> Iterator[Any]:
    if not service_up(6379):
        pytest.fail('Redis is not running on 6379: run `make services`')
    c = redis.Redis('127.0.0.1', 6379)
    yield c
    for k in c.scan_iter(f'{unique_prefix}*'):
        c.delete(k)
    c.close()


def test_an_event_copied_into_another_stream_of_the_same_topic_is_refused(
    client: Any, unique_prefix: str
) -> None:
    a, b = f'{unique_prefix}a:', f'{unique_prefix}b:'
    store = Store(
        f'ns-{unique_prefix}',
        RedisConnector('127.0.0.1', 6379, prefix=f'{unique_prefix}data:'),
        register=True,
    )
    try:
        with StreamProducer(RedisQueuePublisher('127.0.0.1', 6379, prefix=a), store, key=KEY) as p:
            assert p.namespace == a
            p.send('t', 'secret of stream A', evict=False)
        # What anyone who can write to the broker (or a careless script) does: copy A's
        # first message, signed with the key both streams share, into B's stream.
        (_, fields), *_ = client.xrange(f'{a}t')
        client.xadd(f'{b}t', {'m': fields[b'm']})
        with StreamProducer(RedisQueuePublisher('127.0.0.1', 6379, prefix=b), store, key=KEY) as p:
            p.send('t', 'item of stream B', evict=False)

        subscriber = RedisQueueSubscriber('127.0.0.1', 6379, 't', prefix=b, group='g')
        with StreamConsumer(subscriber, key=KEY, timeout=10) as consumer:
            assert consumer.namespace == b
            with pytest.raises(EventReplayError, match='signed for namespace') as info:
                consumer.next_object()
            assert repr(a) in str(info.value)
            assert repr(b) in str(info.value)
            assert list(consumer.iter_objects()) == ['item of stream B']

        # Stream A's own consumer still takes it.
        subscriber = RedisQueueSubscriber('127.0.0.1', 6379, 't', prefix=a, group='g')
        with StreamConsumer(subscriber, key=KEY, timeout=10) as consumer:
            assert list(consumer.iter_objects()) == ['secret of stream A']
    finally:
        store.close()


def test_a_namespace_given_to_both_sides_names_the_stream(client: Any, unique_prefix: str) -> None:
    store = Store(f'ns2-{unique_prefix}', RedisConnector('127.0.0.1', 6379), register=True)
    try:
        publisher = RedisQueuePublisher('127.0.0.1', 6379, prefix=unique_prefix)
        with StreamProducer(publisher, store, key=KEY, namespace='campaign-1') as p:
            p.send('t', 'x', evict=True)
        sub = RedisQueueSubscriber('127.0.0.1', 6379, 't', prefix=unique_prefix)
        consumer = StreamConsumer(sub, key=KEY, timeout=10, namespace='campaign-2')
        with consumer, pytest.raises(EventReplayError, match="'campaign-1'"):
            consumer.next()
        sub = RedisQueueSubscriber('127.0.0.1', 6379, 't', prefix=unique_prefix, group='h')
        with StreamConsumer(sub, key=KEY, timeout=10, namespace='campaign-1') as consumer:
            assert list(consumer.iter_objects()) == ['x']
    finally:
        store.close()


def test_namespaces_of_the_shims() -> None:
    assert RedisQueuePublisher('127.0.0.1', 6379, prefix='p:', db=2).namespace == 'p: (db 2)'
    pub = AMQPPublisher.__new__(AMQPPublisher)  # no connection needed to read the URL
    for url, namespace in [
        ('amqp://guest:guest@127.0.0.1:5672/', ''),
        ('amqp://127.0.0.1', ''),
        ('amqp://127.0.0.1/%2F', ''),
        ('amqp://127.0.0.1/site-a', 'vhost site-a'),
    ]:
        pub.url = url
        assert pub.namespace == namespace


# Key files in folders others can write ----------------------------------------------------


@pytest.fixture
def config_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    home = tmp_path / 'xdg'
    monkeypatch.setenv('XDG_CONFIG_HOME', str(home))
    for name in (ENV_KEY, ENV_KEY_FILE, STEER_ENV_KEY, STEER_ENV_KEY_FILE):
        monkeypatch.delenv(name, raising=False)
    return home


@pytest.mark.parametrize('mode', [0o777, 0o770, 0o1777])
def test_a_user_key_file_in_a_folder_others_can_write_is_refused(
    config_home: Path, mode: int
) -> None:
    assert resolve_key(None) is not None  # created private, in a private folder
    assert resolve_secret(None) is not None
    folder = default_key_file().parent
    folder.chmod(mode)
    with pytest.raises(ConfigError, match='can be written by others'):
        resolve_key(None)
    with pytest.raises(ConfigError, match='can be written by others'):
        resolve_secret(None)
    folder.chmod(0o700)
    assert resolve_key(None) is not None
    assert resolve_secret(None) is not None


def test_no_key_is_created_in_a_folder_others_can_write(config_home: Path) -> None:
    folder = config_home / 'tether'
    folder.mkdir(parents=True)
    folder.chmod(0o777)
    with pytest.raises(ConfigError, match='can be written by others'):
        resolve_key(None)
    assert list(folder.iterdir()) == []


def test_a_named_key_file_others_can_replace_is_refused(
    config_home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = tmp_path / 'shared'
    folder.mkdir()
    path = folder / 'key'
    path.write_text(KEY + '\n')
    path.chmod(0o640)  # readable by a group: a key shared between users is fine
    for env in (ENV_KEY_FILE, STEER_ENV_KEY_FILE):
        monkeypatch.setenv(env, str(path))
    assert resolve_key(None) is not None
    assert resolve_secret(None) is not None
    folder.chmod(0o777)
    with pytest.raises(ConfigError, match='can be written by others'):
        resolve_key(None)
    with pytest.raises(ConfigError, match='can be written by others'):
        resolve_secret(None)
    folder.chmod(0o755)
    path.chmod(0o666)
    with pytest.raises(ConfigError, match='others can write it'):
        resolve_key(None)
    with pytest.raises(ConfigError, match=STEER_ENV_KEY_FILE):
        resolve_secret(None)
