"""Every engine passes an unresolved proxy through the submitting process unresolved.

Each test submits proxies whose factory fails the test if it runs in the submitting
process (``tests/patterns/_guard.py``): proxies from ``store.proxy`` (of a str, of a
dict, of a class the proxy does not know), a future's proxy whose consumer is submitted
before its producer, and proxies and a future received from another process. The
engines inspect task arguments before pickling them (``isinstance``, ``__class__``,
``__module__``, tokenizing, walking containers); none of it may resolve or wait.
"""

from __future__ import annotations

import concurrent.futures
import multiprocessing
from collections.abc import Iterator
from typing import Any

import pytest

from tests.parsl_env import parsl_environment
from tests.patterns import _guard
from tests.patterns._guard import Engine, check_passes_unresolved
from tether.store import Store
from tether.store.executor import ProxyType, StoreExecutor


def _remote_via(engine: Engine) -> Any:
    def make(config: Any, pid: int) -> Any:
        return engine.result(engine.submit(_guard.make_proxies, config, pid))

    return make


def test_dask_client_submit(store: Store[Any], dask_client: Any) -> None:
    engine = Engine(dask_client.submit)
    check_passes_unresolved(engine, store, _remote_via(engine))


def test_parsl_python_app_on_htex(store: Store[Any], parsl_pool: Any) -> None:
    engine = Engine(parsl_pool.submit)
    check_passes_unresolved(engine, store, _remote_via(engine))


@pytest.fixture(scope='module')
def parsl_threads() -> Iterator[Any]:
    """A Parsl ThreadPoolExecutor behind tether's ParslPoolExecutor (``python_app``).

    Its own DataFlowKernel, not loaded globally: the package's HTEX pool is loaded.
    """
    from parsl import DataFlowKernel
    from parsl.config import Config
    from parsl.executors import ThreadPoolExecutor

    from tether.plugins.parsl import ParslPoolExecutor, closing_run_log

    with parsl_environment() as run_dir:
        config = Config(
            executors=[ThreadPoolExecutor(max_threads=2, label='threads')],
            run_dir=str(run_dir),
            strategy='none',
        )
        dfk = DataFlowKernel(config)
        try:
            yield ParslPoolExecutor(dfk=dfk)
        finally:
            with closing_run_log(str(run_dir)):  # Parsl leaves its run log open
                dfk.cleanup()


def test_parsl_python_app_on_thread_pool(
    store: Store[Any], parsl_threads: Any, process_pool: Any
) -> None:
    engine = Engine(parsl_threads.submit, threads=True)
    check_passes_unresolved(engine, store, _remote_via(Engine(process_pool.submit)))


def test_process_pool_executor(store: Store[Any], process_pool: Any) -> None:
    engine = Engine(process_pool.submit)
    check_passes_unresolved(engine, store, _remote_via(engine))


def test_multiprocessing_pool(store: Store[Any]) -> None:
    with multiprocessing.get_context('spawn').Pool(2) as pool:
        engine = Engine(
            lambda fn, *args: pool.apply_async(fn, args),
            lambda handle: handle.get(timeout=60),
        )
        check_passes_unresolved(engine, store, _remote_via(engine))


def test_store_executor(store: Store[Any], process_pool: Any) -> None:
    executor = StoreExecutor(
        process_pool,
        store,
        should_proxy=ProxyType(bytes),  # proxies nothing here: only passes proxies through
        close_store=False,
        close_executor=False,
        proxy_results=False,
    )
    engine = Engine(executor.submit)
    check_passes_unresolved(engine, store, _remote_via(Engine(process_pool.submit)))


def test_bench_engine_with_store_transformer(store: Store[Any]) -> None:
    from tether.bench.engine import Engine as BenchEngine
    from tether.bench.transformer.store import StoreTransformer

    with concurrent.futures.ProcessPoolExecutor(
        max_workers=2, mp_context=multiprocessing.get_context('spawn')
    ) as pool:
        bench = BenchEngine(pool, transformer=StoreTransformer(store))
        engine = Engine(bench.submit)
        check_passes_unresolved(engine, store, _remote_via(engine))
        bench.shutdown()
