"""The thread-pool and process-pool executors of the standard library."""

from __future__ import annotations

import concurrent.futures
import multiprocessing
import os
from typing import Literal

import pydantic

from tether.bench.executor import ExecutorConfig
from tether.bench.executor.future_dependency import FutureDependencyExecutor
from tether.bench.registry import register

__all__ = ['ProcessPoolConfig', 'ThreadPoolConfig']


def _cpus() -> int:
    return (
        len(os.sched_getaffinity(0)) if hasattr(os, 'sched_getaffinity') else os.cpu_count() or 1
    )


@register('executor')
class ThreadPoolConfig(ExecutorConfig):
    """``concurrent.futures.ThreadPoolExecutor`` (one process: for development and tests)."""

    name: str = 'thread-pool'
    max_threads: int = pydantic.Field(default_factory=_cpus, ge=1, description='threads')

    def get_executor(self) -> FutureDependencyExecutor:
        """Build the pool, wrapped for futures as arguments."""
        return FutureDependencyExecutor(
            concurrent.futures.ThreadPoolExecutor(self.max_threads),
        )

    def get_workers(self) -> int:
        """The number of threads."""
        return self.max_threads


@register('executor')
class ProcessPoolConfig(ExecutorConfig):
    """``concurrent.futures.ProcessPoolExecutor`` (no scheduler: the low-overhead baseline)."""

    name: str = 'process-pool'
    max_processes: int = pydantic.Field(default_factory=_cpus, ge=1, description='processes')
    context: Literal['spawn', 'fork', 'forkserver'] = pydantic.Field(
        default='spawn',
        description='multiprocessing start method',
    )

    def get_executor(self) -> FutureDependencyExecutor:
        """Build the pool, wrapped for futures as arguments."""
        return FutureDependencyExecutor(
            concurrent.futures.ProcessPoolExecutor(
                self.max_processes,
                mp_context=multiprocessing.get_context(self.context),
            ),
        )

    def get_workers(self) -> int:
        """The number of processes."""
        return self.max_processes
