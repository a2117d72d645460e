"""Data transformers and filters: round trips, worker-side resolution, cleanup, errors."""

from __future__ import annotations

import concurrent.futures
import os
import pathlib
import pickle
import uuid
from typing import Any

import numpy as np
import pytest

from tests.bench._helpers import check_records
from tether.bench.engine import Engine
from tether.bench.filter import (
    AllFilter,
    NeverFilter,
    ObjectSizeFilter,
    ObjectTypeFilter,
    PickleSizeFilter,
)
from tether.bench.record import JSONRecordLogger, read_records
from tether.bench.transformer import TaskDataTransformer
from tether.bench.transformer.file import PickleFileIdentifier, PickleFileTransformer
from tether.bench.transformer.store import ConnectorConfig, StoreTransformerConfig
from tether.exceptions import BenchError, ConfigError
from tether.proxy import Proxy


def nbytes(data: Any) -> int:
    assert type(data) is not Proxy  # the worker receives the object itself
    return len(data)


def make(size: int) -> bytes:
    return os.urandom(size)


def test_filters() -> None:
    assert AllFilter()(1)
    assert not NeverFilter()(b'x' * 10**6)
    size = ObjectSizeFilter(min_size=1000, max_size=10_000)
    assert size(b'x' * 5000)
    assert not size(b'x' * 10)
    assert not size(b'x' * 20_000)
    pickled = PickleSizeFilter(min_size=100)
    assert pickled(list(range(100)))
    assert not pickled([1])
    assert not pickled(lambda: 1)  # unpicklable: never transformed
    typed = ObjectTypeFilter('numpy.ndarray', 'bytes')
    assert typed(np.zeros(3))
    assert typed(b'x')
    assert not typed('x')
    with pytest.raises(ValueError, match='min_size'):
        ObjectSizeFilter(min_size=10, max_size=1)


def test_task_data_transformer_skips_small_values(tmp_path: pathlib.Path) -> None:
    pair = TaskDataTransformer(PickleFileTransformer(tmp_path / 'data'), None)
    assert pair.transform(None) is None
    assert pair.transform(3) == 3
    ident = pair.transform(b'abc')
    assert isinstance(ident, PickleFileIdentifier)
    assert pair.transform(ident) is ident
    assert pair.resolve(ident) == b'abc'
    assert pair.resolve_mapping(pair.transform_mapping({'a': [1]})) == {'a': [1]}
    copy = pickle.loads(pickle.dumps(pair))
    assert copy.resolve(ident) == b'abc'


def test_pickle_file_transformer_through_processes(
    process_pool: Any,
    tmp_path: pathlib.Path,
) -> None:
    from tests.bench.conftest import Borrowed

    transformer = PickleFileTransformer()
    directory = transformer.file_dir
    assert oct(os.stat(directory).st_mode)[-3:] == '700'
    records = tmp_path / 'tasks.jsonl'
    with Engine(
        Borrowed(process_pool),
        transformer=transformer,
        filter_=ObjectSizeFilter(min_size=1000),
        record_logger=JSONRecordLogger(records),
    ) as engine:
        data = engine.submit(make, 50_000)
        assert engine.submit(nbytes, data).result() == 50_000
        assert engine.submit(nbytes, b'x' * 5000).result() == 5000
        assert len(os.listdir(directory)) == 2  # the result of make, and the 5000 bytes
    assert not os.path.exists(directory)  # created by the transformer: removed at close
    rows = check_records(records)
    assert all(r['execution']['input_resolve_time'] >= 0 for r in rows)


def test_pickle_file_missing(tmp_path: pathlib.Path) -> None:
    transformer = PickleFileTransformer(tmp_path)
    with pytest.raises(BenchError, match='missing'):
        transformer.resolve(PickleFileIdentifier(str(tmp_path / 'gone.pkl')))


def _connector_options(
    kind: str,
    tmp_path: pathlib.Path,
    redis_options: dict[str, Any],
    request: pytest.FixtureRequest,
) -> Any:
    tag = uuid.uuid4().hex[:8]
    if kind == 'redis':
        return redis_options
    if kind == 'file':
        return {'store_dir': str(tmp_path / 'store'), 'clear': True}
    if kind == 'shared-memory':
        return {'namespace': f'benchtest{tag}', 'clear': True}
    if kind == 'endpoint':
        return {'endpoints': ['bench'], 'home': str(request.getfixturevalue('bench_endpoint'))}
    if kind == 'node':
        return {'name': f'benchtest-{tag}', 'address': '127.0.0.1', 'idle_timeout': 30.0}
    return {}


@pytest.mark.parametrize('kind', ['redis', 'file', 'shared-memory', 'node', 'endpoint'])
def test_store_transformer_over_each_connector(
    kind: str,
    process_pool: Any,
    redis_store_options: dict[str, Any],
    tmp_path: pathlib.Path,
    request: pytest.FixtureRequest,
) -> None:
    from tests.bench.conftest import Borrowed

    config = StoreTransformerConfig.model_validate(
        {
            'name': 'store',
            'connector': {
                'kind': kind,
                'options': _connector_options(kind, tmp_path, redis_store_options, request),
            },
        },
    )
    records = tmp_path / 'tasks.jsonl'
    transformer = config.get_transformer()
    with Engine(
        Borrowed(process_pool),
        transformer=transformer,
        record_logger=JSONRecordLogger(records),
    ) as engine:
        data = engine.submit(make, 100_000)
        assert engine.submit(nbytes, data).result() == 100_000
        assert engine.submit(nbytes, b'y' * 1000).result() == 1000
        result = data.result()
        assert isinstance(result, bytes)  # resolved on the client
        assert len(result) == 100_000
    rows = check_records(records)
    assert rows[0]['execution']['result_transform_time'] > 0


def test_connector_config_errors() -> None:
    with pytest.raises(ValueError, match='unknown connector kind'):
        ConnectorConfig(kind='carrier-pigeon')
    with pytest.raises(ConfigError, match='bad options'):
        ConnectorConfig(kind='redis', options={'no_such_option': 1}).get_connector()


def test_transformer_records_with_thread_pool(tmp_path: pathlib.Path) -> None:
    records = tmp_path / 'tasks.jsonl'
    transformer = StoreTransformerConfig(
        connector=ConnectorConfig(kind='file', options={'store_dir': str(tmp_path / 's')}),
    ).get_transformer()
    with Engine(
        concurrent.futures.ThreadPoolExecutor(2),
        transformer=transformer,
        filter_=ObjectTypeFilter('bytes'),
        record_logger=JSONRecordLogger(records),
    ) as engine:
        assert engine.submit(nbytes, b'z' * 10).result() == 10
        assert engine.submit(len, 'not bytes: by value').result() == 19
    assert os.listdir(tmp_path / 's') == []  # evicted when the engine closed
    assert len(list(read_records(records))) == 2
