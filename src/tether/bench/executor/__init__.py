"""Executor plugins: each a registered config that builds a ``concurrent.futures.Executor``.

Built in (``tether bench list`` shows them): ``thread-pool``, ``process-pool``, ``dask``
(a local cluster or a scheduler address), ``parsl-local`` (a local HighThroughputExecutor),
``parsl-htex`` (a general HighThroughputExecutor config: any provider and launcher),
``ray`` (a local Ray node of its own, or a cluster) and ``faas`` (tether's function
service). Adding one: a module with an :class:`ExecutorConfig` subclass decorated with
``@register('executor')``, and a line in :data:`tether.bench.registry.BUILTIN`.

The contract (re-exported from :mod:`tether.abc` as ``BenchExecutor`` and
``BenchExecutorConfig``): a config's :meth:`ExecutorConfig.get_executor` returns a started
:class:`Executor`, that is ``submit(fn, /, *args, **kwargs)`` returning a future (anything
with ``result()``, ``exception()``, ``done()`` and ``add_done_callback()``, as
``concurrent.futures.Future`` has) and ``shutdown(wait=True, *, cancel_futures=False)``.
The bench :class:`~tether.bench.engine.Engine` calls only those two, and reads an optional
``native_dataflow`` attribute: true when the executor resolves futures of its own among a
task's arguments (else the engine wraps it in a
:class:`~tether.bench.executor.future_dependency.FutureDependencyExecutor`). The
conformance suite is :class:`tether.testing.bench.ExecutorConformance`.
"""

from __future__ import annotations

import concurrent.futures
from collections.abc import Callable
from typing import Any, Protocol, runtime_checkable

import pydantic

from tether._lazy import lazy_attributes

__all__ = [
    'DaskDistributedConfig',
    'DaskDistributedExecutor',
    'Executor',
    'ExecutorConfig',
    'FutureDependencyExecutor',
    'ParslHTExConfig',
    'ParslLocalConfig',
    'ProcessPoolConfig',
    'RayConfig',
    'ThreadPoolConfig',
]

# Importable from the package as in TaPS (``from taps.executor import ThreadPoolConfig``);
# each is imported on first use, so that ``import tether.bench.executor`` stays light.
_LAZY = {
    'DaskDistributedConfig': 'tether.bench.executor.dask',
    'DaskDistributedExecutor': 'tether.bench.executor.dask',
    'FutureDependencyExecutor': 'tether.bench.executor.future_dependency',
    'ParslHTExConfig': 'tether.bench.executor.parsl',
    'ParslLocalConfig': 'tether.bench.executor.parsl',
    'ProcessPoolConfig': 'tether.bench.executor.python',
    'RayConfig': 'tether.bench.executor.ray',
    'ThreadPoolConfig': 'tether.bench.executor.python',
}


__getattr__ = lazy_attributes(__name__, _LAZY)


@runtime_checkable
class Executor(Protocol):
    """What the bench engine needs of an executor (``concurrent.futures.Executor`` has it)."""

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Any:
        """Run ``fn(*args, **kwargs)``; return its future at once."""
        ...

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        """Release the executor's workers (waiting for the running tasks if ``wait``)."""
        ...


class ExecutorConfig(pydantic.BaseModel):
    """Base of executor configs (``[engine.executor]`` in a run config)."""

    model_config = pydantic.ConfigDict(extra='forbid')

    name: str

    def get_executor(self) -> concurrent.futures.Executor:
        """Build the executor (started; shut down by the engine)."""
        raise NotImplementedError

    def get_workers(self) -> int | None:
        """How many workers the executor runs (for plots; ``None`` if unknown)."""
        return None
