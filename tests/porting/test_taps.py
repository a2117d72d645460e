"""TaPS's names and call shapes on tether.bench (docs/porting.md, "Porting from TaPS")."""

from __future__ import annotations

import concurrent.futures
import json
import pathlib
import threading

import pydantic
import pytest

from tether.bench.engine import Engine, Task, TaskFuture, TaskInfo, TaskResult, task
from tether.bench.engine.transform import TaskTransformer
from tether.bench.filter import (
    Filter,
    ObjectSizeFilter,
    ObjectTypeFilter,
    ObjectTypeFilterConfig,
    PickleSizeFilter,
)
from tether.bench.record import JSONRecordLogger, NullRecordLogger


def add(a: int, b: int = 0) -> int:
    return a + b


def test_object_type_filter_takes_classes_names_and_patterns() -> None:
    by_class = ObjectTypeFilter(str, tuple)
    assert by_class('x')
    assert by_class(())
    assert not by_class([])  # classes used to match nothing

    class Foo:
        pass

    class Foobar:
        pass

    searched = ObjectTypeFilter(patterns=['bytes', 'Foo'])
    assert searched(b'')
    assert searched(Foo())
    assert searched(Foobar())
    assert not searched(1)
    anchored = ObjectTypeFilter(patterns=['Foo$'])
    assert anchored(Foo())
    assert not anchored(Foobar())
    assert ObjectTypeFilter('builtins.int')(True)  # names still match subclasses
    assert 'Foo$' in repr(anchored)
    config = ObjectTypeFilterConfig(patterns=['str'])
    assert config.get_filter()('text')
    with pytest.raises(TypeError, match='classes or type names'):
        ObjectTypeFilter(3)  # type: ignore[arg-type]


def test_size_filters_take_taps_keywords() -> None:
    sized = ObjectSizeFilter(min_bytes=32, max_bytes=100)
    assert sized.min_bytes == 32
    assert sized.max_size == 100
    assert sized('object')
    assert not sized('x' * 200)
    assert 'min_bytes=32' in repr(sized)
    assert isinstance(PickleSizeFilter(min_bytes=1), Filter)


def test_record_loggers_are_context_managers(tmp_path: pathlib.Path) -> None:
    path = tmp_path / 'records.jsonl'
    with JSONRecordLogger(path) as logger:
        logger.log({'a': 1})
    assert json.loads(path.read_text()) == {'a': 1}
    with NullRecordLogger() as null:
        null.log({})


def test_plugin_listings() -> None:
    from tether.bench.plugins import (
        get_app_configs,
        get_executor_configs,
        get_filter_configs,
        get_transformer_configs,
    )

    assert 'cholesky' in get_app_configs()
    assert 'thread-pool' in get_executor_configs()
    assert 'object-type' in get_filter_configs()
    assert 'proxystore' in get_transformer_configs()


def test_taps_class_names_are_tethers_classes() -> None:
    from tether.bench.apps.configs.cholesky import CholeskyConfig
    from tether.bench.apps.configs.failures import FailureInjectionConfig
    from tether.bench.apps.configs.synthetic import SyntheticConfig
    from tether.bench.apps.failures import FailureInjectionApp, FailuresApp
    from tether.bench.apps.mapreduce import MapReduceApp, MapreduceApp
    from tether.bench.engine import EngineConfig
    from tether.bench.executor import DaskDistributedConfig, ThreadPoolConfig
    from tether.bench.executor.dask import DaskConfig
    from tether.bench.run.config import BenchmarkConfig, Config
    from tether.bench.run.config import EngineConfig as RunEngineConfig
    from tether.bench.transformer import ProxyTransformerConfig, StoreTransformerConfig

    assert CholeskyConfig().name == 'cholesky'
    assert FailureInjectionConfig.__name__ == 'FailuresAppConfig'
    assert SyntheticConfig().name == 'synthetic'
    assert FailureInjectionApp is FailuresApp
    assert MapreduceApp is MapReduceApp
    assert EngineConfig is RunEngineConfig
    assert Config is BenchmarkConfig
    assert DaskDistributedConfig is DaskConfig
    assert ProxyTransformerConfig is StoreTransformerConfig
    engine_config = EngineConfig(executor=ThreadPoolConfig(max_threads=1))
    with engine_config.get_engine() as engine:
        assert engine.submit(add, 1, 2).result(timeout=60) == 3
    assert DaskConfig(wait_for_workers=2).wait_for_workers == 2
    with pytest.raises(pydantic.ValidationError):
        DaskConfig(wait_for_workers=-1)


def test_task_decorator_and_task_transformer() -> None:
    made = task(add)
    assert isinstance(made, Task)
    assert made.name == 'add'
    assert made(1, b=2) == 3  # called directly: the function's value

    @task()
    def named(x: int) -> int:
        return x * 2

    assert named(4) == 8
    result = made(1, 2, _transformer=TaskTransformer())  # as a worker runs it
    assert isinstance(result, TaskResult)
    assert result.value == 3
    assert TaskTransformer().transform([1]) == [1]  # no transformer: unchanged
    info = TaskInfo(task_id='t', name='n', parent_task_ids=[], submit_time=0.0)
    assert info.success is None
    with Engine(concurrent.futures.ThreadPoolExecutor(2)) as engine:
        future = engine.submit(made, 2, 3)
        assert isinstance(future, TaskFuture)
        assert future.result(timeout=60) == 5
        assert future.function_name == 'add'
        assert future.info.task_id == future.task_id
        assert future.info.name == 'add'


def test_engine_map_yields_results_in_order() -> None:
    release = threading.Event()

    def slow(x: int) -> int:
        release.wait(60)
        return x

    with Engine(concurrent.futures.ThreadPoolExecutor(4)) as engine:
        assert list(engine.map(add, [1, 2, 3], [10, 20, 30])) == [11, 22, 33]
        results = engine.map(slow, [1, 2], timeout=0.05)
        with pytest.raises(TimeoutError):
            next(results)
        release.set()
        futures = engine.map_futures(add, [1, 2], [1, 1])
        assert all(isinstance(f, TaskFuture) for f in futures)
        assert engine.submit(add, *futures).result(timeout=60) == 5


def test_store_transformer_async_resolve() -> None:
    from tether.bench.transformer.store import StoreTransformerConfig
    from tether.proxy import Proxy

    config = StoreTransformerConfig(async_resolve=True, extract_target=False)
    transformer = config.get_transformer()
    try:
        identifier = transformer.transform([1, 2])
        resolved = transformer.resolve(identifier)
        assert isinstance(resolved, Proxy)
        assert resolved == [1, 2]
    finally:
        transformer.close()
    with pytest.raises(pydantic.ValidationError, match='async_resolve'):
        StoreTransformerConfig(async_resolve=True)


def square(x: int) -> int:
    return x * x


square_task = task(square)


def test_tasks_pickle_and_results_are_generic() -> None:
    import pickle

    assert pickle.loads(pickle.dumps(square_task))(3) == 9
    assert TaskResult[int] is not None  # type: ignore[misc]  # subscriptable at run time, as TaPS's
    with TaskTransformer() as transformer:
        assert transformer.resolve(5) == 5
    with Engine(concurrent.futures.ThreadPoolExecutor(1)) as engine:
        assert list(engine.map(square, [2, 3])) == [4, 9]
        assert engine.tasks_executed == 2


def test_app_config_paths_are_absolute(tmp_path: pathlib.Path) -> None:
    from tether.bench.apps import AppConfig
    from tether.bench.apps.failures import FailuresAppConfig
    from tether.bench.run.config import BenchmarkConfig, make_run_dir

    class WithPath(AppConfig):
        name: str = 'with-path'
        data: pathlib.Path

    config = WithPath(data='relative-dir')  # type: ignore[arg-type]
    assert config.data.is_absolute()
    assert config.model_dump()['data'] == str(config.data)
    failures = FailuresAppConfig.model_validate({'base': 'synthetic', 'config': {'task_count': 2}})
    assert failures.base_config == {'task_count': 2}  # TaPS's name for base_config
    run = BenchmarkConfig.from_dict(
        {
            'app': {'name': 'synthetic'},
            'engine': {'executor': {'name': 'thread-pool'}},
            'run': {'dir_format': str(tmp_path / 'runs' / '{name}')},
        }
    )
    assert make_run_dir(run).is_dir()


def test_store_metrics_record_factory_resolve() -> None:
    from tether.connectors.local import LocalConnector
    from tether.store import Store, get_key

    with Store('taps-factory-resolve', LocalConnector(), metrics=True) as store:
        proxy = store.proxy([1, 2, 3], populate_target=False)
        assert proxy == [1, 2, 3]
        assert store.metrics is not None
        metrics = store.metrics.get_metrics(get_key(proxy))
        assert metrics is not None
        times = metrics.times
        assert times['factory.resolve'].count == 1


def test_is_future_and_the_run_log_level() -> None:
    import logging

    from tether.bench.future import FutureProtocol, is_future
    from tether.bench.logging import RUN_LOG_LEVEL, init_logging, remove_logging

    assert is_future(concurrent.futures.Future())
    assert not is_future('not a future')
    with Engine(concurrent.futures.ThreadPoolExecutor(1)) as engine:
        future = engine.submit(add, 1)
        assert isinstance(future, FutureProtocol)
        future.result(timeout=60)
    assert logging.INFO < RUN_LOG_LEVEL < logging.WARNING
    init_logging()
    try:
        assert logging.getLevelName(RUN_LOG_LEVEL) == 'RUN'
    finally:
        remove_logging()
