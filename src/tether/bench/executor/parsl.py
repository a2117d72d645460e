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
from tether.bench.registry import register
from tether.plugins.parsl import (
    interchange_command,
    local_config,
    make_app,
    start_kernel,
    stop_kernel,
    worker_init,
)
from tether.store.config import import_from_path

__all__ = [
    'LAUNCHERS',
    'PROVIDERS',
    'ParslExecutor',
    'ParslHTExConfig',
    'ParslLocalConfig',
    'ProviderConfig',
]

PROVIDERS: dict[str, str] = {
    'condor': 'parsl.providers.CondorProvider',
    'gridengine': 'parsl.providers.GridEngineProvider',
    'local': 'parsl.providers.LocalProvider',
    'lsf': 'parsl.providers.LSFProvider',
    'pbspro': 'parsl.providers.PBSProProvider',
    'slurm': 'parsl.providers.SlurmProvider',
    'torque': 'parsl.providers.TorqueProvider',
}
"""Provider kinds: kind -> class."""

LAUNCHERS: dict[str, str] = {
    'aprun': 'parsl.launchers.AprunLauncher',
    'jsrun': 'parsl.launchers.JsrunLauncher',
    'mpiexec': 'parsl.launchers.MpiExecLauncher',
    'mpirun': 'parsl.launchers.MpiRunLauncher',
    'simple': 'parsl.launchers.SimpleLauncher',
    'single-node': 'parsl.launchers.SingleNodeLauncher',
    'srun': 'parsl.launchers.SrunLauncher',
}
"""Launcher kinds: kind -> class."""


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


class ProviderConfig(pydantic.BaseModel):
    """A Parsl provider: a kind of :data:`PROVIDERS`, its options, and a launcher."""

    model_config = pydantic.ConfigDict(extra='forbid')

    kind: str = pydantic.Field(
        default='local', description=f'one of {", ".join(sorted(PROVIDERS))}'
    )
    options: dict[str, Any] = pydantic.Field(
        default_factory=dict,
        description='keyword arguments of the provider (a JSON object on the CLI)',
    )
    launcher: str | None = pydantic.Field(
        default=None,
        description=f"one of {', '.join(sorted(LAUNCHERS))} (default: the provider's)",
    )

    @pydantic.field_validator('kind')
    @classmethod
    def _known_kind(cls, kind: str) -> str:
        if kind not in PROVIDERS:
            raise ValueError(f'unknown provider {kind!r}; kinds: {", ".join(sorted(PROVIDERS))}')
        return kind

    @pydantic.field_validator('launcher')
    @classmethod
    def _known_launcher(cls, launcher: str | None) -> str | None:
        if launcher is not None and launcher not in LAUNCHERS:
            raise ValueError(
                f'unknown launcher {launcher!r}; kinds: {", ".join(sorted(LAUNCHERS))}',
            )
        return launcher

    def get_provider(self) -> Any:
        """Build the provider."""
        options = dict(self.options)
        options['worker_init'] = worker_init(options.get('worker_init'))
        if self.launcher is not None:
            options['launcher'] = import_from_path(LAUNCHERS[self.launcher])()
        return import_from_path(PROVIDERS[self.kind])(**options)


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
    """Parsl with a general HighThroughputExecutor configuration (any provider)."""

    name: str = 'parsl-htex'
    htex: dict[str, Any] = pydantic.Field(
        default_factory=dict,
        description='keyword arguments of HighThroughputExecutor (a JSON object on the CLI)',
    )
    provider: ProviderConfig = ProviderConfig()
    retries: int = pydantic.Field(default=0, ge=0, description='Parsl retries of each failed task')
    run_dir: str | None = pydantic.Field(default=None, description='Parsl run directory')
    strategy: str = pydantic.Field(
        default='simple', description="Parsl scaling strategy ('none' ...)"
    )

    @pydantic.field_validator('htex')
    @classmethod
    def _no_provider(cls, htex: dict[str, Any]) -> dict[str, Any]:
        if 'provider' in htex:
            raise ValueError('set the provider in [engine.executor.provider], not in htex')
        return htex

    def get_executor(self) -> ParslExecutor:
        """Start the DataFlowKernel and its provider's blocks."""
        from parsl.config import Config
        from parsl.executors import HighThroughputExecutor

        options = {
            'label': 'tether-bench-htex',
            'interchange_launch_cmd': interchange_command(),
            **self.htex,
        }
        htex = HighThroughputExecutor(provider=self.provider.get_provider(), **options)
        config = Config(
            executors=[htex],
            run_dir=self.run_dir or tempfile.mkdtemp(prefix=_RUN_DIR_PREFIX),
            retries=self.retries,
            strategy=self.strategy,
            initialize_logging=False,
        )
        return ParslExecutor(config)

    def get_workers(self) -> int | None:
        """``max_workers_per_node`` if set."""
        value = self.htex.get('max_workers_per_node')
        return int(value) if value is not None else None
