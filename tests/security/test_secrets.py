"""Secrets are never serialized (issue 8 item 2).

For each connector with a secret (a Redis password, given directly or in a URL; a node
secret; an endpoint's client token), the secret's bytes appear in none of: a pickled
proxy, the store config's dump, its TOML file, the broker messages of a stream (Redis
streams, read raw from the server). Rebuilt connectors resolve the secret where they run:
environment variable, secret file, or a connector of the same process.
"""

from __future__ import annotations

import json
import os
import pickle
import secrets
import subprocess
import sys
import textwrap
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import REDIS_HOST, REDIS_PORT
from tether.connectors.endpoint import EndpointConnector, EndpointKey
from tether.connectors.local import LocalConnector
from tether.connectors.multi import MultiConnector, Policy
from tether.connectors.node import NodeConnector, NodeKey
from tether.connectors.redis import RedisConnector
from tether.exceptions import ConfigError
from tether.store import Store, StoreConfig
from tether.stream import StreamConsumer, StreamProducer
from tether.stream import events as ev
from tether.stream.shims.redis import RedisQueuePublisher, RedisQueueSubscriber
from tether.testing import RedisServer

PASSWORD = 'pw-' + secrets.token_hex(16)
STREAM_KEY = secrets.token_hex(32)


@pytest.fixture(scope='module')
def auth_redis() -> Iterator[RedisServer]:
    """A Redis server whose data only user ``app`` (with PASSWORD) may touch."""
    acl = ['--user', 'default', 'on', 'nopass', '-@all', '+ping']
    acl += ['--user', 'app', 'on', f'>{PASSWORD}', '~*', '&*', '+@all']
    with RedisServer(args=acl) as server:
        yield server


@pytest.fixture
def broker_prefix(redis_client: Any) -> Iterator[str]:
    prefix = f'tether-test-secrets-{uuid.uuid4().hex[:12]}:'
    yield prefix
    for key in list(redis_client.scan_iter(match=f'{prefix}*')):
        redis_client.delete(key)


def _serialized(
    store: Store[Any], key: Any, tmp_path: Path, prefix: str, redis_client: Any
) -> dict[str, bytes]:
    """Every serialized form of ``store``'s config and of a proxy of ``key``."""
    config = store.config()
    toml = tmp_path / f'{store.name}.toml'
    config.write_toml(toml)
    publisher = RedisQueuePublisher(REDIS_HOST, REDIS_PORT, prefix=prefix)
    topic = f'topic-{store.name}'
    event = ev.NewObjectEvent(topic, config.model_dump(), key, {'step': 1}, evict=False)
    publisher.send_message(topic, ev.encode([event]))
    publisher.close()
    broker = b''.join(
        value for _, fields in redis_client.xrange(f'{prefix}{topic}') for value in fields.values()
    )
    assert broker, 'the event did not reach Redis'
    return {
        'pickled proxy': pickle.dumps(store.proxy_from_key(key)),
        'config repr': repr(config).encode(),
        'config dump': json.dumps(config.model_dump()).encode(),
        'TOML': toml.read_bytes(),
        'broker message': broker,
    }


def _assert_absent(secret: str, forms: dict[str, bytes]) -> None:
    needle = secret.encode()
    leaked = [name for name, data in forms.items() if needle in data]
    assert not leaked, f'the secret is serialized in: {leaked}'


def _redis(auth_redis: RedisServer, **kwargs: Any) -> RedisConnector:
    return RedisConnector(
        auth_redis.host, auth_redis.port, username='app', prefix='secrets:', **kwargs
    )


def test_redis_password_is_never_serialized(
    auth_redis: RedisServer, tmp_path: Path, broker_prefix: str, redis_client: Any
) -> None:
    store = Store(f'redis-pw-{uuid.uuid4().hex[:8]}', _redis(auth_redis, password=PASSWORD))
    key = store.put([1, 2, 3])
    forms = _serialized(store, key, tmp_path, broker_prefix, redis_client)
    forms['pickled proxy of a put object'] = pickle.dumps(store.proxy([4, 5]))
    _assert_absent(PASSWORD, forms)
    # A connector rebuilt from the config in this process finds the password again.
    rebuilt = RedisConnector.from_config(store.connector.config())
    assert rebuilt.exists(key)
    rebuilt.close()
    store.close()


def test_redis_url_credentials_are_never_serialized(
    auth_redis: RedisServer, tmp_path: Path, broker_prefix: str, redis_client: Any
) -> None:
    url = f'redis://app:{PASSWORD}@{auth_redis.host}:{auth_redis.port}/0'
    connector = RedisConnector.from_url(url, prefix='secrets-url:')
    store = Store(f'redis-url-{uuid.uuid4().hex[:8]}', connector)
    key = store.put('through a URL')
    _assert_absent(PASSWORD, _serialized(store, key, tmp_path, broker_prefix, redis_client))
    assert connector.config()['username'] == 'app'
    with pytest.raises(TypeError, match='not pickled'):
        pickle.dumps(connector)
    store.close()


def test_stream_events_on_redis_carry_no_password(
    auth_redis: RedisServer, broker_prefix: str, redis_client: Any
) -> None:
    store = Store(f'redis-stream-{uuid.uuid4().hex[:8]}', _redis(auth_redis, password=PASSWORD))
    publisher = RedisQueuePublisher(REDIS_HOST, REDIS_PORT, prefix=broker_prefix)
    with StreamProducer(publisher, {'frames': store}, key=STREAM_KEY) as producer:
        for i in range(3):
            producer.send('frames', {'frame': i}, metadata={'i': i})
    raw = [v for _, f in redis_client.xrange(f'{broker_prefix}frames') for v in f.values()]
    assert len(raw) == 4  # three objects and the end of the stream
    _assert_absent(PASSWORD, {f'message {i}': m for i, m in enumerate(raw)})
    subscriber = RedisQueueSubscriber(REDIS_HOST, REDIS_PORT, 'frames', prefix=broker_prefix)
    with StreamConsumer(subscriber, stores=store, key=STREAM_KEY, timeout=10) as consumer:
        assert [obj['frame'] for obj in consumer.iter_objects()] == [0, 1, 2]
    store.close()


_RESOLVE = """
    import pickle, sys
    proxy = pickle.loads(bytes.fromhex(sys.argv[1]))
    print(sum(proxy))
"""


def _resolve_elsewhere(proxy: Any, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, '-c', textwrap.dedent(_RESOLVE), pickle.dumps(proxy).hex()],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        env=env,
    )


def test_rebuilt_redis_connector_reads_password_from_env_or_file(
    auth_redis: RedisServer, tmp_path: Path
) -> None:
    env_name = f'TETHER_TEST_REDIS_PW_{uuid.uuid4().hex[:6].upper()}'
    store = Store(
        f'redis-env-{uuid.uuid4().hex[:8]}',
        _redis(auth_redis, password=PASSWORD, password_env=env_name),
    )
    proxy = store.proxy([1, 2, 3])
    assert store.connector.config()['password_env'] == env_name
    base = {k: v for k, v in os.environ.items() if k != env_name}
    done = _resolve_elsewhere(proxy, {**base, env_name: PASSWORD})
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == '6'
    missing = _resolve_elsewhere(proxy, base)
    assert missing.returncode != 0
    assert f'expected in ${env_name}, which is not set' in missing.stderr
    assert PASSWORD not in missing.stderr

    secret_file = tmp_path / 'redis.password'
    secret_file.write_text(PASSWORD + '\n')
    by_file = Store(
        f'redis-file-{uuid.uuid4().hex[:8]}',
        _redis(auth_redis, password_file=str(secret_file)),
    )
    proxy = by_file.proxy([4, 5])
    assert PASSWORD.encode() not in pickle.dumps(proxy)
    done = _resolve_elsewhere(proxy, base)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == '9'
    by_file.close()
    store.close()


def test_node_secret_is_never_serialized(
    tmp_path: Path, broker_prefix: str, redis_client: Any
) -> None:
    node_secret = 'node-' + secrets.token_hex(16)
    name = f'test-secret-{uuid.uuid4().hex[:8]}'
    connector = NodeConnector(name, address='127.0.0.1', run_dir=str(tmp_path), secret=node_secret)
    store = Store(f'node-{uuid.uuid4().hex[:8]}', connector)
    forms = _serialized(
        store, NodeKey('abc', '127.0.0.1', 1), tmp_path, broker_prefix, redis_client
    )
    _assert_absent(node_secret, forms)
    assert 'secret' not in connector.config()
    # Rebuilt in this process from the config: the same secret (remembered by node name).
    rebuilt = NodeConnector.from_config(connector.config())
    assert rebuilt._secret == node_secret
    # Elsewhere: a secret file named by the config.
    secret_file = tmp_path / 'node.secret'
    secret_file.write_text(node_secret + '\n')
    other = NodeConnector(f'{name}-b', run_dir=str(tmp_path), secret_file=str(secret_file))
    assert other.config()['secret_file'] == str(secret_file)
    assert other._secret == node_secret
    with pytest.raises(TypeError, match='not pickled'):
        pickle.dumps(connector)


def test_endpoint_client_token_is_never_serialized(
    tmp_path: Path, broker_prefix: str, redis_client: Any
) -> None:
    from tether.endpoint import EndpointConfig

    home = tmp_path / 'home'
    config = EndpointConfig.create('secret-site', home)
    token = config.client_token(home)
    store = Store(
        f'endpoint-{uuid.uuid4().hex[:8]}', EndpointConnector(['secret-site'], home=str(home))
    )
    forms = _serialized(
        store, EndpointKey('abc', config.uuid), tmp_path, broker_prefix, redis_client
    )
    _assert_absent(token, forms)


def test_multi_connector_configs_hold_no_nested_secret(auth_redis: RedisServer) -> None:
    multi = MultiConnector(
        {
            'redis': (_redis(auth_redis, password=PASSWORD), Policy(priority=1)),
            'local': (LocalConnector(), Policy()),
        },
    )
    store = Store(f'multi-{uuid.uuid4().hex[:8]}', multi)
    _assert_absent(PASSWORD, {'config dump': json.dumps(store.config().model_dump()).encode()})
    store.close()


class _LeakyConnector(LocalConnector):
    """A third-party connector that puts its token in its config."""

    def config(self) -> dict[str, Any]:
        return {**super().config(), 'token': 'leaked-' + secrets.token_hex(8)}


def test_a_config_holding_a_secret_is_refused() -> None:
    with pytest.raises(ConfigError, match="holds a secret \\('token'\\)"):
        StoreConfig.for_connector('leaky', _LeakyConnector())
