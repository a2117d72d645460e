"""Executor plugins: each a registered config that builds a ``concurrent.futures.Executor``.

Built in (``tether bench list`` shows them): ``thread-pool``, ``process-pool``, ``dask``
(a local cluster or a scheduler address), ``parsl-local`` (a local HighThroughputExecutor),
``parsl-htex`` (a general HighThroughputExecutor config: any provider and launcher),
``ray`` (a local Ray node of its own, or a cluster) and ``faas`` (tether's function
service). Adding one: a module with an :class:`ExecutorConfig` subclass decorated with
``@register('executor')``, and a line in :data:`tether.bench.registry.BUILTIN`.
"""

from __future__ import annotations

import concurrent.futures

import pydantic

__all__ = ['ExecutorConfig']


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
