"""Parsl: a local HighThroughputExecutor on loopback, or a general HTEX configuration.

``parsl-local`` starts HTEX workers on this host (``workers`` of them). ``parsl-htex``
takes any HighThroughputExecutor options (``htex``), a provider chosen by kind from
:data:`PROVIDERS` with its options (for example Slurm with an account and walltime), and
optionally a launcher from :data:`LAUNCHERS`; provider and launcher classes come only
from these allowlists. Every task is one Parsl app invocation; task futures passed as
arguments are resolved by the engine's
:class:`~tether.bench.executor.future_dependency.FutureDependencyExecutor`.
"""

from __future__ import annotations

import concurrent.futures
import os
import tempfile
from collections.abc import Callable
from typing import Any

import pydantic

from tether.bench.executor import ExecutorConfig
from tether.bench.executor._parsl_parts import (
    ADDRESSES,
    LAUNCHERS,
    MANAGER_SELECTORS,
    PROVIDERS,
    AddressConfig,
    HTExConfig,
    LauncherConfig,
    ManagerSelectorConfig,
    MonitoringConfig,
    ProviderConfig,
)
from tether.bench.registry import register
from tether.plugins.parsl import (
    local_config,
    make_app,
    start_kernel,
    stop_kernel,
)

__all__ = [
    'ADDRESSES',
    'AddressConfig',
    'HTExConfig',
    'LAUNCHERS',
    'LauncherConfig',
    'MANAGER_SELECTORS',
    'ManagerSelectorConfig',
    'MonitoringConfig',
    'PROVIDERS',
    'ParslExecutor',
    'ParslHTExConfig',
    'ParslLocalConfig',
    'ProviderConfig',
]


def _call(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    return fn(*args, **kwargs)


class ParslExecutor(concurrent.futures.Executor):
    """Runs tasks as Parsl apps of its own DataFlowKernel; futures are Parsl AppFutures.

    Args:
        config: The Parsl ``Config`` (a new DataFlowKernel is started from it).
    """

    def __init__(self, config: Any) -> None:
        self.config = config
        self.dfk = start_kernel(config)
        self._app = make_app(self.dfk, _call)
        self._closed = False

    def __repr__(self) -> str:
        return f'ParslExecutor(run_dir={self.dfk.run_dir!r})'

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Any:
        """Run ``fn(*args, **kwargs)`` as a Parsl app."""
        if self._closed:
            raise RuntimeError('cannot schedule new tasks after shutdown')
        return self._app(fn, *args, **kwargs)

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        """Clean up the DataFlowKernel (stops its workers)."""
        if self._closed:
            return
        self._closed = True
        stop_kernel(self.dfk)


def _memoizer(app_cache: bool) -> Any:
    # Parsl's app_cache option became a memoizer object (BasicMemoizer(memoize=...)).
    if app_cache:
        return None
    from parsl.dataflow.memoization import BasicMemoizer

    return BasicMemoizer(memoize=False)


_RUN_DIR_PREFIX = 'tether-bench-parsl-'


@register('executor')
class ParslLocalConfig(ExecutorConfig):
    """Parsl with a HighThroughputExecutor of ``workers`` workers on this host (loopback)."""

    name: str = 'parsl-local'
    workers: int = pydantic.Field(default_factory=lambda: os.cpu_count() or 1, ge=1)
    retries: int = pydantic.Field(default=0, ge=0, description='Parsl retries of each failed task')
    run_dir: str | None = pydantic.Field(default=None, description='Parsl run directory')
    encrypted: bool = pydantic.Field(
        default=True, description='CurveZMQ between the HTEX components'
    )

    def get_executor(self) -> ParslExecutor:
        """Start the DataFlowKernel and its workers."""
        return ParslExecutor(
            local_config(
                label='tether-bench-htex',
                workers=self.workers,
                run_dir=self.run_dir,
                retries=self.retries,
                encrypted=self.encrypted,
                min_blocks=0,
                strategy='none',
                run_dir_prefix=_RUN_DIR_PREFIX,
            )
        )

    def get_workers(self) -> int:
        """The number of workers."""
        return self.workers


@register('executor')
class ParslHTExConfig(ExecutorConfig):
    """Parsl with a general HighThroughputExecutor configuration (any provider).

    ``htex`` is either a table of HighThroughputExecutor options with the provider in
    ``provider``, or (TaPS's shape) an :class:`HTExConfig` holding its own ``provider``,
    ``address`` and ``manager_selector`` tables; a table that has any of those three keys
    is read as the latter.
    """

    name: str = 'parsl-htex'
    htex: dict[str, Any] | HTExConfig = pydantic.Field(
        default_factory=dict,
        description='keyword arguments of HighThroughputExecutor (a JSON object on the CLI)',
    )
    provider: ProviderConfig | None = pydantic.Field(
        default=None, description='the provider (when htex has none)'
    )
    retries: int = pydantic.Field(default=0, ge=0, description='Parsl retries of each failed task')
    run_dir: str | None = pydantic.Field(default=None, description='Parsl run directory')
    strategy: str = pydantic.Field(
        default='simple', description="Parsl scaling strategy ('none' ...)"
    )
    app_cache: bool = pydantic.Field(default=True, description="Parsl's app cache")
    monitoring: MonitoringConfig | None = pydantic.Field(
        default=None, description="Parsl's monitoring hub"
    )

    @pydantic.field_validator('htex', mode='before')
    @classmethod
    def _shape(cls, htex: Any) -> Any:
        if isinstance(htex, dict) and {'provider', 'address', 'manager_selector'} & set(htex):
            return HTExConfig.model_validate(htex)
        return htex

    @pydantic.model_validator(mode='after')
    def _one_provider(self) -> ParslHTExConfig:
        if isinstance(self.htex, HTExConfig) and self.provider is not None:
            raise ValueError('set the provider in htex.provider or in provider, not in both')
        return self

    def _htex(self) -> HTExConfig:
        if isinstance(self.htex, HTExConfig):
            return self.htex
        return HTExConfig.model_validate(
            {**self.htex, 'provider': self.provider or ProviderConfig()}
        )

    def get_executor(self) -> ParslExecutor:
        """Start the DataFlowKernel and its provider's blocks."""
        from parsl.config import Config

        config = Config(
            executors=[self._htex().get_executor()],
            run_dir=self.run_dir or tempfile.mkdtemp(prefix=_RUN_DIR_PREFIX),
            retries=self.retries,
            strategy=self.strategy,
            memoizer=_memoizer(self.app_cache),
            monitoring=self.monitoring.get_monitoring() if self.monitoring else None,
            initialize_logging=False,
        )
        return ParslExecutor(config)

    def get_workers(self) -> int | None:
        """``max_workers_per_node`` if set."""
        htex = self._htex()
        value = (htex.model_extra or {}).get('max_workers_per_node')
        return int(value) if value is not None else None
