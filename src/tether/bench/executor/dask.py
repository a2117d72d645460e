"""Dask Distributed: a local cluster on loopback, or an existing scheduler by address.

Dask resolves futures passed as arguments itself (``native_dataflow``): task data moves
between workers without passing through the client.
"""

from __future__ import annotations

import concurrent.futures
import dataclasses
from collections.abc import Callable
from typing import Any

import pydantic

from tether.bench.executor import ExecutorConfig
from tether.bench.registry import register

__all__ = ['DaskConfig', 'DaskDistributedConfig', 'DaskDistributedExecutor']


@dataclasses.dataclass(eq=False, repr=False)
class DaskDistributedExecutor(concurrent.futures.Executor):
    """An executor over a ``dask.distributed.Client``; futures are Dask futures.

    Args:
        client: The client.
        cluster: A cluster to close with the client (``None``: not ours).
        close_client: Close ``client`` in :meth:`shutdown`.
        retries: Dask retries of each failed task.
    """

    native_dataflow = True

    client: Any
    _: dataclasses.KW_ONLY
    cluster: Any = None
    close_client: bool = True
    retries: int = 0

    def __repr__(self) -> str:
        return f'DaskDistributedExecutor({self.client!r})'

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Any:
        """Submit ``fn(*args, **kwargs)`` as a Dask task (never cached: ``pure=False``)."""
        return self.client.submit(fn, *args, pure=False, retries=self.retries or None, **kwargs)

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        """Close the client (and the cluster this executor started)."""
        if self.close_client:
            self.client.close()
            if self.cluster is not None:
                self.cluster.close()


@register('executor')
class DaskConfig(ExecutorConfig):
    """Dask Distributed: a local cluster (process or thread workers) or a scheduler."""

    name: str = 'dask'
    scheduler: str | None = pydantic.Field(
        default=None,
        description='address of a running scheduler (default: start a local cluster)',
    )
    workers: int | None = pydantic.Field(
        default=None,
        ge=1,
        description='workers of the local cluster (default: one per core)',
    )
    use_threads: bool = pydantic.Field(
        default=False, description='thread workers instead of processes'
    )
    retries: int = pydantic.Field(default=0, ge=0, description='retries of each failed task')
    wait_for_workers: int = pydantic.Field(
        default=0,
        ge=0,
        description='wait until this many workers joined before running (TaPS option)',
    )

    def get_executor(self) -> DaskDistributedExecutor:
        """Start the local cluster (or connect to the scheduler) and build the executor."""
        from distributed import Client, LocalCluster

        if self.scheduler is not None:
            client = Client(self.scheduler)  # type: ignore[no-untyped-call]
            if self.wait_for_workers:
                client.wait_for_workers(self.wait_for_workers)
            return DaskDistributedExecutor(client, retries=self.retries)
        cluster = LocalCluster(  # type: ignore[no-untyped-call]
            n_workers=self.workers,
            threads_per_worker=1,
            processes=not self.use_threads,
            dashboard_address='127.0.0.1:0',
            host='127.0.0.1',
            # TCP on loopback also for thread workers (Dask's in-process default protocol
            # does not take a host, and the cluster failed to start with use_threads).
            protocol='tcp://',
        )
        client = Client(cluster)  # type: ignore[no-untyped-call]
        if self.wait_for_workers:
            client.wait_for_workers(self.wait_for_workers)
        return DaskDistributedExecutor(client, cluster=cluster, retries=self.retries)

    def get_workers(self) -> int | None:
        """The number of workers of the local cluster (``None`` for a scheduler)."""
        if self.scheduler is not None:
            return None
        if self.workers is not None:
            return self.workers
        import os

        return os.cpu_count()


DaskDistributedConfig = DaskConfig
"""TaPS's name for :class:`DaskConfig`."""
