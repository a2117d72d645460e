"""The bench conformance suites: what every bench executor and transformer does (needs pytest).

Subclass :class:`ExecutorConformance` in a test module (its name must start with
``Test``) and give it a fixture ``executor`` that yields a started executor (the
contract :class:`tether.bench.executor.Executor`, usually built by an
:class:`~tether.bench.executor.ExecutorConfig`) and shuts it down afterwards; the suite
never shuts it down, so the fixture may be shared by a class or a module. Likewise
:class:`TransformerConformance` needs a fixture ``transformer`` that yields a
:class:`~tether.bench.transformer.Transformer` and closes it afterwards::

    import pytest

    from tether.testing.bench import ExecutorConformance, TransformerConformance


    class TestMyExecutor(ExecutorConformance):
        @pytest.fixture(scope='class')
        def executor(self):
            executor = MyExecutorConfig().get_executor()
            yield executor
            executor.shutdown()


    class TestMyTransformer(TransformerConformance):
        @pytest.fixture
        def transformer(self, tmp_path):
            t = MyTransformerConfig(directory=str(tmp_path)).get_transformer()
            yield t
            t.close()

Tasks run by the suite are functions of this module, so workers in other processes must
be able to import ``tether``.
"""

from __future__ import annotations

import concurrent.futures
import operator
import pickle
import threading
from typing import Any

import pytest

from tether.bench.engine import Engine
from tether.bench.executor import Executor
from tether.bench.transformer import TaskDataTransformer, Transformer

__all__ = ['ExecutorConformance', 'TransformerConformance']

_TIMEOUT = 120


def _fail(message: str) -> None:
    """A task that raises ``ValueError(message)``."""
    raise ValueError(message)


def _nbytes(data: Any) -> int:
    """A task that returns ``len(data)``."""
    return len(data)


def _make_bytes(n: int) -> bytes:
    """A task that returns ``n`` bytes."""
    return b'x' * n


def _resolved_length(transformer: Transformer, identifier: Any) -> int:
    """A task that resolves ``identifier`` where it runs and returns the object's length."""
    return len(transformer.resolve(identifier))


class _Borrowed:
    """The executor under test, handed to an engine that must not shut it down."""

    def __init__(self, executor: Any) -> None:
        self.executor = executor
        self.native_dataflow = bool(getattr(executor, 'native_dataflow', False))

    def submit(self, fn: Any, /, *args: Any, **kwargs: Any) -> Any:
        return self.executor.submit(fn, *args, **kwargs)

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        pass


class _Unclosed:
    """The transformer under test, handed to an engine that must not close it."""

    def __init__(self, transformer: Any) -> None:
        self.transformer = transformer

    def is_identifier(self, obj: Any) -> bool:
        return bool(self.transformer.is_identifier(obj))

    def transform(self, obj: Any) -> Any:
        return self.transformer.transform(obj)

    def resolve(self, identifier: Any) -> Any:
        return self.transformer.resolve(identifier)

    def close(self) -> None:
        pass


class ExecutorConformance:
    """What every bench executor does: run tasks, return futures, carry errors back.

    Needs a fixture ``executor`` that yields the started executor under test.
    """

    def test_is_an_executor(self, executor: Any) -> None:
        assert isinstance(executor, Executor)

    def test_submit_returns_a_future_of_the_value(self, executor: Any) -> None:
        future = executor.submit(operator.add, 2, 3)
        assert future.result(timeout=_TIMEOUT) == 5
        assert future.done()
        assert future.exception() is None

    def test_keyword_arguments(self, executor: Any) -> None:
        future = executor.submit(int, '11', base=2)
        assert future.result(timeout=_TIMEOUT) == 3

    def test_a_task_error_comes_back(self, executor: Any) -> None:
        future = executor.submit(_fail, 'conformance failure')
        with pytest.raises(Exception) as info:  # noqa: PT011 (executors may wrap it)
            future.result(timeout=_TIMEOUT)
        assert 'conformance failure' in f'{info.value} {info.value!r}'

    def test_done_callback_runs(self, executor: Any) -> None:
        called = threading.Event()
        future = executor.submit(operator.mul, 6, 7)
        future.add_done_callback(lambda f: called.set())
        assert called.wait(_TIMEOUT)
        assert future.result(timeout=_TIMEOUT) == 42

    def test_many_tasks(self, executor: Any) -> None:
        futures = [executor.submit(operator.mul, i, i) for i in range(20)]
        assert [f.result(timeout=_TIMEOUT) for f in futures] == [i * i for i in range(20)]

    def test_engine_passes_futures_as_arguments(self, executor: Any) -> None:
        # The bench engine over this executor: a task's future as the next one's argument
        # (resolved by the executor itself when it declares native_dataflow).
        engine = Engine(_Borrowed(executor))
        try:
            data = engine.submit(_make_bytes, 1000)
            size = engine.submit(_nbytes, data)
            nested = engine.submit(operator.add, [size], [size])
            assert size.result(timeout=_TIMEOUT) == 1000
            assert nested.result(timeout=_TIMEOUT) == [1000, 1000]
            failed = engine.submit(_fail, 'parent failed')
            child = engine.submit(_nbytes, failed)
            assert isinstance(child.exception(timeout=_TIMEOUT), BaseException)
        finally:
            engine.shutdown()


class TransformerConformance:
    """What every bench transformer does: objects to small identifiers, and back anywhere.

    Needs a fixture ``transformer`` that yields the transformer under test (closed by the
    fixture afterwards).
    """

    def test_is_a_transformer(self, transformer: Any) -> None:
        assert isinstance(transformer, Transformer)

    def test_roundtrip(self, transformer: Any) -> None:
        value = {'numbers': list(range(100)), 'text': 'hello', 'blob': b'\x00\xff' * 500}
        identifier = transformer.transform(value)
        assert transformer.is_identifier(identifier)
        assert transformer.resolve(identifier) == value

    def test_plain_objects_are_not_identifiers(self, transformer: Any) -> None:
        for obj in (b'bytes', 'text', [1, 2], {'a': 1}, 3, None):
            assert not transformer.is_identifier(obj)

    def test_identifiers_are_distinct(self, transformer: Any) -> None:
        identifiers = [transformer.transform(b'same') for _ in range(5)]
        assert all(transformer.resolve(i) == b'same' for i in identifiers)

    def test_identifier_is_smaller_than_a_large_object(self, transformer: Any) -> None:
        data = b'y' * 1_000_000
        identifier = transformer.transform(data)
        assert len(pickle.dumps(identifier)) < 10_000

    def test_transformer_and_identifier_pickle(self, transformer: Any) -> None:
        # Workers receive both by pickle and resolve there.
        identifier = transformer.transform(b'z' * 10_000)
        copy = pickle.loads(pickle.dumps(transformer))
        assert copy.resolve(pickle.loads(pickle.dumps(identifier))) == b'z' * 10_000

    def test_resolves_in_another_thread(self, transformer: Any) -> None:
        identifier = transformer.transform(b'w' * 5000)
        with concurrent.futures.ThreadPoolExecutor(1) as pool:
            got = pool.submit(_resolved_length, transformer, identifier).result(_TIMEOUT)
        assert got == 5000

    def test_engine_transforms_arguments_and_results(self, transformer: Any) -> None:
        # Through the bench engine: arguments go by identifier, results come back resolved.
        # The engine closes its transformer: the fixture's own is handed over unclosable.
        with (
            concurrent.futures.ThreadPoolExecutor(2) as pool,
            Engine(
                _Borrowed(pool), transformer=TaskDataTransformer(_Unclosed(transformer))
            ) as engine,
        ):
            data = engine.submit(_make_bytes, 100_000)
            assert engine.submit(_nbytes, data).result(timeout=_TIMEOUT) == 100_000
            assert data.result(timeout=_TIMEOUT) == b'x' * 100_000
