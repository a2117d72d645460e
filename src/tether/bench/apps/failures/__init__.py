"""Failure injection: run another application with some of its tasks made to fail.

Task-level failure types: ``zero-division``, ``import`` (a missing module),
``memory`` (a ``MemoryError`` raised, not memory exhausted), ``ulimit`` (an ``EMFILE``
``OSError`` raised, not the descriptor limit exhausted), ``walltime`` (the task sleeps
``walltime`` seconds, then raises ``TimeoutError``), ``dependency`` (a parent fails, so
its children fail with a dependency error); system-level: ``worker-kill`` (the worker
process exits; refused when the task runs in the client process, as on a thread pool);
``random`` picks one per task. None of them can harm the host.

``failure_rate`` is the probability that a task is chosen. With ``transient`` (default),
a chosen task fails on its first attempt only (a marker file in the run directory
remembers the attempt), so executors that retry recover. ``failures.json`` in the run
directory reports what was injected, what failed and what recovered.
"""

from __future__ import annotations

import concurrent.futures
import dataclasses
import errno
import importlib
import json
import logging
import os
import pathlib
import random
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Literal, cast

import pydantic

from tether.bench.apps import AppConfig
from tether.bench.registry import get_plugin, register
from tether.exceptions import PluginNotFoundError, TaskDependencyError

if TYPE_CHECKING:
    from tether.bench.apps import App
    from tether.bench.engine import Engine, TaskFuture

__all__ = [
    'FAILURE_TYPES',
    'FailureInjectionApp',
    'FailureInjector',
    'FailuresApp',
    'FailuresAppConfig',
    'inject',
]

logger = logging.getLogger(__name__)

FailureType = Literal[
    'dependency',
    'import',
    'memory',
    'random',
    'ulimit',
    'walltime',
    'worker-kill',
    'zero-division',
]
FAILURE_TYPES: tuple[str, ...] = (
    'dependency',
    'import',
    'memory',
    'ulimit',
    'walltime',
    'worker-kill',
    'zero-division',
)


def inject(kind: str, client_pid: int, walltime: float = 1.0) -> None:
    """Raise (or, for ``worker-kill``, exit the worker with) the failure ``kind``."""
    if kind in ('zero-division', 'dependency'):
        _ = 1 / 0
    elif kind == 'import':
        importlib.import_module('tether_bench_injected_missing_module')
    elif kind == 'memory':
        raise MemoryError('injected failure: out of memory')
    elif kind == 'ulimit':
        raise OSError(errno.EMFILE, 'injected failure: too many open files')
    elif kind == 'walltime':
        time.sleep(walltime)
        raise TimeoutError(f'injected failure: walltime of {walltime} s exceeded')
    elif kind == 'worker-kill':
        if os.getpid() == client_pid:
            raise RuntimeError(
                'injected worker-kill refused: the task runs in the client process '
                '(use a process-based executor)',
            )
        os._exit(17)
    else:
        raise ValueError(f'unknown failure type {kind!r}')


@dataclasses.dataclass(eq=False)
class FailureInjector:
    """Wraps a task function: the first attempt (or every one) fails as ``kind``.

    Args:
        function: The task function.
        kind: A failure type.
        marker: File created by the first attempt (``None``: every attempt fails).
        client_pid: Process id of the client (``worker-kill`` never kills it).
        walltime: Seconds of a ``walltime`` failure.
    """

    function: Callable[..., Any]
    kind: str
    marker: str | None
    client_pid: int
    walltime: float = 1.0

    def __post_init__(self) -> None:
        self.__name__ = getattr(self.function, '__name__', 'task')

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if self.marker is not None:
            try:
                fd = os.open(self.marker, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
            except FileExistsError:
                return self.function(*args, **kwargs)
            os.close(fd)
        inject(self.kind, self.client_pid, self.walltime)
        return self.function(*args, **kwargs)  # pragma: no cover - inject always raises


class _InjectingEngine:
    """An engine whose submitted functions are sometimes wrapped in a FailureInjector."""

    def __init__(self, engine: Engine, app: FailuresApp, marker_dir: pathlib.Path) -> None:
        self._engine = engine
        self._app = app
        self._marker_dir = marker_dir
        self._rng = random.Random(app.seed)
        self.tracked: list[tuple[TaskFuture[Any], str | None]] = []

    def __getattr__(self, name: str) -> Any:
        return getattr(self._engine, name)

    def submit(self, function: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Any:
        kind = None
        if self._rng.random() < self._app.failure_rate:
            kind = self._app.failure_type
            if kind == 'random':
                kind = self._rng.choice(FAILURE_TYPES)
            marker = (
                str(self._marker_dir / f'{len(self.tracked)}.attempted')
                if self._app.transient
                else None
            )
            function = FailureInjector(
                function,
                kind,
                marker,
                os.getpid(),
                self._app.walltime,
            )
        future = self._engine.submit(function, *args, **kwargs)
        self.tracked.append((future, kind))
        return future

    def map(self, function: Callable[..., Any], *iterables: Any) -> list[Any]:
        return [self.submit(function, *items) for items in zip(*iterables, strict=False)]


@dataclasses.dataclass(eq=False)
class FailuresApp:
    """Runs ``base`` with failures injected into its tasks."""

    base: App
    _: dataclasses.KW_ONLY
    failure_type: str = 'zero-division'
    failure_rate: float = 0.1
    transient: bool = True
    walltime: float = 1.0
    seed: int = 0

    def close(self) -> None:
        """Close the base application."""
        self.base.close()

    def run(self, engine: Engine, run_dir: pathlib.Path) -> None:
        """Run the base app with injection; write ``failures.json``."""
        marker_dir = run_dir / 'failure-markers'
        marker_dir.mkdir(parents=True, exist_ok=True)
        injecting = _InjectingEngine(engine, self, marker_dir)
        error: BaseException | None = None
        try:
            self.base.run(cast('Engine', injecting), run_dir)
        except Exception as e:
            error = e
            logger.warning('base application failed: %s: %s', type(e).__name__, e)
        concurrent.futures.wait([f for f, _ in injecting.tracked])
        report = self._report(injecting.tracked, error)
        (run_dir / 'failures.json').write_text(json.dumps(report, indent=2) + '\n')
        logger.info(
            'failures: %d injected, %d failed, %d recovered, %d dependency failures',
            report['injected'],
            report['injected_failed'],
            report['injected_recovered'],
            report['dependency_failed'],
        )

    def _report(
        self,
        tracked: list[tuple[TaskFuture[Any], str | None]],
        error: BaseException | None,
    ) -> dict[str, Any]:
        by_type: dict[str, int] = {}
        failed = recovered = dependency = other = 0
        for future, kind in tracked:
            exc = None if future.cancelled() else future.exception()
            if kind is not None:
                by_type[kind] = by_type.get(kind, 0) + 1
                if exc is None:
                    recovered += 1
                else:
                    failed += 1
            elif isinstance(exc, TaskDependencyError) or _is_dependency_error(exc):
                dependency += 1
            elif exc is not None:
                other += 1
        return {
            'failure_type': self.failure_type,
            'failure_rate': self.failure_rate,
            'transient': self.transient,
            'tasks': len(tracked),
            'injected': sum(by_type.values()),
            'injected_by_type': by_type,
            'injected_failed': failed,
            'injected_recovered': recovered,
            'dependency_failed': dependency,
            'other_failed': other,
            'base_app_completed': error is None,
            'base_app_error': None if error is None else f'{type(error).__name__}: {error}',
        }


def _is_dependency_error(exc: BaseException | None) -> bool:
    # Executors with native dataflow report a failed parent in their own way (Dask
    # re-raises the parent's error in the child).
    return exc is not None and type(exc).__name__ in ('DependencyError',)


@register('app')
class FailuresAppConfig(AppConfig):
    """Inject task- and worker-level failures into another application."""

    name: str = 'failures'
    base: str = pydantic.Field(
        default='cholesky', description='application to inject failures into'
    )
    base_config: dict[str, Any] = pydantic.Field(
        validation_alias=pydantic.AliasChoices('base_config', 'config'),
        default_factory=dict,
        description='options of the base application (a JSON object on the CLI)',
    )
    failure_type: FailureType = pydantic.Field(
        default='zero-division', description='failure to inject'
    )
    failure_rate: float = pydantic.Field(default=0.1, description='chance per task, in [0, 1]')
    transient: bool = pydantic.Field(
        default=True,
        description='fail only the first attempt (retrying executors recover)',
    )
    walltime: float = pydantic.Field(default=1.0, ge=0, description='walltime failures: seconds')
    seed: int = pydantic.Field(default=0, description='random seed of the choice of tasks')

    @pydantic.field_validator('failure_rate')
    @classmethod
    def _rate_in_range(cls, rate: float) -> float:
        if not 0 <= rate <= 1:
            raise ValueError(f'Failure rate must be in the range [0, 1]. Got {rate}.')
        return rate

    @pydantic.field_validator('base')
    @classmethod
    def _not_self(cls, base: str) -> str:
        if base == 'failures':
            raise ValueError('the failures app cannot inject into itself')
        try:
            get_plugin('app', base)
        except PluginNotFoundError as exc:
            raise ValueError(f'Base app named "{base}" is unknown: {exc}') from None
        return base

    def get_app(self) -> FailuresApp:
        """Build the base app and wrap it."""
        base_cls = get_plugin('app', self.base)
        base = base_cls.model_validate({'name': self.base, **self.base_config}).get_app()
        return FailuresApp(base, **self._app_arguments(exclude={'base', 'base_config'}))


FailureInjectionApp = FailuresApp
"""TaPS's name for :class:`FailuresApp`."""
