"""The bench conformance suites (tether.testing.bench) over each executor and transformer."""

from __future__ import annotations

import pathlib
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from tether.bench.executor.dask import DaskConfig
from tether.bench.executor.python import ProcessPoolConfig, ThreadPoolConfig
from tether.bench.transformer.file import PickleFileTransformerConfig
from tether.bench.transformer.store import StoreTransformerConfig
from tether.testing.bench import ExecutorConformance, TransformerConformance


@pytest.fixture(scope='module')
def thread_pool() -> Iterator[Any]:
    executor = ThreadPoolConfig(max_threads=2).get_executor()
    yield executor
    executor.shutdown()


class TestThreadPool(ExecutorConformance):
    @pytest.fixture
    def executor(self, thread_pool: Any) -> Any:
        return thread_pool


@pytest.fixture(scope='module')
def process_pool_executor() -> Iterator[Any]:
    executor = ProcessPoolConfig(max_processes=2).get_executor()
    yield executor
    executor.shutdown()


class TestProcessPool(ExecutorConformance):
    @pytest.fixture
    def executor(self, process_pool_executor: Any) -> Any:
        return process_pool_executor


@pytest.fixture(scope='module')
def dask_executor() -> Iterator[Any]:
    executor = DaskConfig(workers=1, use_threads=True).get_executor()
    yield executor
    executor.shutdown()


class TestDask(ExecutorConformance):
    @pytest.fixture
    def executor(self, dask_executor: Any) -> Any:
        return dask_executor


@pytest.mark.slow
class TestParsl(ExecutorConformance):
    @pytest.fixture
    def executor(self, parsl_executor: Any) -> Any:
        return parsl_executor  # the package fixture shuts it down


@pytest.mark.slow
class TestRay(ExecutorConformance):
    @pytest.fixture
    def executor(self, ray_executor: Any) -> Any:
        return ray_executor  # the package fixture shuts it down


class TestPickleFileTransformer(TransformerConformance):
    @pytest.fixture
    def transformer(self, tmp_path: pathlib.Path) -> Iterator[Any]:
        t = PickleFileTransformerConfig(file_dir=str(tmp_path / 'files')).get_transformer()
        yield t
        t.close()


class TestStoreTransformer(TransformerConformance):
    @pytest.fixture(params=['file', 'local'])
    def transformer(self, request: pytest.FixtureRequest, tmp_path: pathlib.Path) -> Iterator[Any]:
        options = {'store_dir': str(tmp_path / 'store')} if request.param == 'file' else {}
        t = StoreTransformerConfig.model_validate(
            {
                'name': 'store',
                'store_name': f'conformance-{uuid.uuid4().hex[:8]}',
                'connector': {'kind': request.param, 'options': options},
            },
        ).get_transformer()
        yield t
        t.close()
