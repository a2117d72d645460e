"""MultiConnector: routing by size, tags, priority and host; dormant connectors; errors."""

from __future__ import annotations

import pickle
from pathlib import Path
from typing import Any

import pytest

from tether.connectors.file import FileConnector
from tether.connectors.local import LocalConnector
from tether.connectors.multi import MultiConnector, MultiKey, Policy
from tether.exceptions import ConfigError, ConnectorError, NoConnectorMatchError
from tether.store import Store


def make(tmp_path: Path, **extra: tuple[Any, Policy]) -> MultiConnector:
    return MultiConnector(
        {
            'small': (LocalConnector(), Policy(max_size=1000, priority=2, subset_tags=['fast'])),
            'large': (
                FileConnector(tmp_path / 'large'),
                Policy(min_size=1001, subset_tags=['fast', 'persistent']),
            ),
            **extra,
        },
    )


def test_routes_by_size(tmp_path: Path) -> None:
    m = make(tmp_path)
    small, large = m.put(b'x' * 10), m.put(b'x' * 5000)
    assert small.connector_name == 'small'
    assert large.connector_name == 'large'
    assert bytes(m.get(large)) == b'x' * 5000  # type: ignore[arg-type]
    assert m.exists(small)
    m.evict(small)
    assert not m.exists(small)


def test_subset_tags_ask_for_offered_tags(tmp_path: Path) -> None:
    m = make(tmp_path, anything=(LocalConnector(), Policy(priority=-1)))
    assert m.put(b'x', subset_tags=['fast']).connector_name == 'small'
    # 'persistent' is offered only by 'large', which needs > 1000 bytes.
    assert m.put(b'x' * 2000, subset_tags=['persistent']).connector_name == 'large'
    with pytest.raises(NoConnectorMatchError, match="does not offer tags \\['persistent'\\]"):
        m.put(b'x', subset_tags=['persistent'])


def test_superset_tags_must_cover_required_tags(tmp_path: Path) -> None:
    m = MultiConnector(
        {
            'secure': (LocalConnector(), Policy(priority=5, superset_tags=['secure', 'site-a'])),
            'plain': (LocalConnector(), Policy()),
        },
    )
    assert m.put(b'x').connector_name == 'plain'
    assert m.put(b'x', superset_tags=['secure']).connector_name == 'plain'
    key = m.put(b'x', superset_tags=['secure', 'site-a', 'extra'])
    assert key.connector_name == 'secure'


def test_priority_breaks_ties_and_order_breaks_equal_priorities() -> None:
    m = MultiConnector(
        {
            'a': (LocalConnector(), Policy(priority=1)),
            'b': (LocalConnector(), Policy(priority=3)),
            'c': (LocalConnector(), Policy(priority=3)),
        },
    )
    assert m.put(b'x').connector_name == 'b'


def test_no_match_is_a_clear_error(tmp_path: Path) -> None:
    m = make(tmp_path)
    with pytest.raises(NoConnectorMatchError) as info:
        m.put(b'x', subset_tags=['gpu'])
    message = str(info.value)
    assert 'small' in message
    assert 'large' in message
    assert 'gpu' in message
    assert 'fallback' in message
    assert isinstance(info.value, ConnectorError)


def test_batches_are_split_per_connector(tmp_path: Path) -> None:
    m = make(tmp_path)
    datas = [b'a', b'b' * 2000, b'c', b'd' * 3000]
    keys = m.put_batch(datas)
    assert [k.connector_name for k in keys] == ['small', 'large', 'small', 'large']
    assert [bytes(d) for d in m.get_batch(keys)] == datas  # type: ignore[arg-type]


def test_store_passes_constraints(tmp_path: Path) -> None:
    m = make(tmp_path)
    store = Store('multi-store', m, cache_size=0)
    key = store.put([1, 2, 3], subset_tags=['fast'])
    assert key.connector_name == 'small'
    with pytest.raises(NoConnectorMatchError):
        store.put([1, 2, 3], subset_tags=['persistent'])
    proxy = store.proxy({'k': 'v' * 5000}, subset_tags=['persistent'], populate_target=False)
    assert proxy['k'] == 'v' * 5000
    assert store.get(key) == [1, 2, 3]
    # Without constraints, the Store's vectored put goes through put_parts.
    assert store.put(b'y' * 10).connector_name == 'small'


def test_host_patterns_make_connectors_dormant(tmp_path: Path) -> None:
    compute = FileConnector(tmp_path / 'compute')
    m = MultiConnector(
        {
            'login': (LocalConnector(), Policy(host_pattern=r'login\d+', priority=1)),
            'compute': (compute, Policy(host_pattern=[r'nid\d+', r'gpu-\w+'])),
        },
        hostname='login1',
    )
    assert sorted(m.active) == ['login']
    assert m.dormant == ['compute']
    assert m.put(b'x').connector_name == 'login'
    config = m.config()
    assert set(config['connectors']) == {'login', 'compute'}

    # The same config rebuilt on a compute node: 'compute' is built there.
    remote = MultiConnector.from_config({**config, 'hostname': 'nid00042'})
    assert sorted(remote.active) == ['compute']
    key = remote.put(b'from compute')
    assert key.connector_name == 'compute'
    # Back on the login node, a key of the dormant connector is read by building it.
    assert bytes(m.get(key)) == b'from compute'  # type: ignore[arg-type]
    assert 'compute' in m.active
    assert Policy(host_pattern='gpu-.*').valid_on_host('gpu-a1')


def test_config_is_plain_data_and_roundtrips(tmp_path: Path) -> None:
    m = make(tmp_path)
    config = m.config()
    assert pickle.loads(pickle.dumps(config)) == config
    other = MultiConnector.from_config(config)
    assert other.config() == config
    assert other.policy('small') == Policy(max_size=1000, priority=2, subset_tags=['fast'])


def test_bad_configs_are_config_errors() -> None:
    with pytest.raises(ConfigError, match='at least one'):
        MultiConnector({})
    with pytest.raises(ConfigError, match='Policy'):
        MultiConnector({'a': (LocalConnector(), {'priority': 1})})  # type: ignore[dict-item]
    with pytest.raises(ConfigError, match='cannot import'):
        MultiConnector({}, {'x': {'type': 'nowhere.Nothing', 'config': {}, 'policy': {}}})
    with pytest.raises(ConfigError, match='bad spec'):
        MultiConnector({}, {'x': {'type': 'a.B', 'config': {}, 'policy': {'nope': 1}}})


def test_unknown_connector_in_key() -> None:
    m = MultiConnector({'a': (LocalConnector(), Policy())})
    with pytest.raises(ConnectorError, match='unknown'):
        m.get(MultiKey('zzz', None))


def test_deferrable_through_multi() -> None:
    m = MultiConnector({'a': (LocalConnector(), Policy(max_size=10))})
    key = m.new_key()
    m.set(key, b'later')
    assert bytes(m.get(key)) == b'later'  # type: ignore[arg-type]
    with pytest.raises(NoConnectorMatchError):
        m.new_key(b'x' * 100)
