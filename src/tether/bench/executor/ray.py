"""Ray: a local Ray instance started here, or an existing cluster by address."""

from __future__ import annotations

import contextlib
import logging
from typing import Any

import pydantic

from tether.bench.executor import ExecutorConfig
from tether.bench.plugins import register

__all__ = ['RayConfig', 'start_ray']

logger = logging.getLogger(__name__)


def start_ray(attempts: int = 3, **kwargs: Any) -> None:
    """``ray.init(**kwargs)``, tried again if the local node times out while starting.

    Ray gives its raylet a fixed 30 s to register; on a loaded machine that can pass. The
    processes a failed attempt left behind are killed before the next attempt.
    """
    import ray

    for attempt in range(1, attempts + 1):
        before = _children()
        try:
            ray.init(**kwargs)
            return
        except Exception as e:
            if 'timed out during startup' not in str(e):
                raise
            logger.warning('Ray did not start (attempt %d of %d): %s', attempt, attempts, e)
            # Leave no process of the failed attempt behind, also after the last one.
            ray.shutdown()
            _kill_new_children(before)
            if attempt == attempts:
                raise


def _children() -> set[int]:
    import psutil

    return {p.pid for p in psutil.Process().children(recursive=True)}


def _kill_new_children(before: set[int]) -> None:
    import gc
    import warnings

    import psutil

    for child in psutil.Process().children(recursive=True):
        if child.pid not in before:
            with contextlib.suppress(psutil.Error):
                child.kill()
                child.wait(timeout=10)
    # The failed attempt's Popen objects are garbage now; their processes were reaped.
    with warnings.catch_warnings():
        warnings.simplefilter('ignore', ResourceWarning)
        gc.collect()


@register('executor')
class RayConfig(ExecutorConfig):
    """Ray tasks through :class:`tether.plugins.ray.RayExecutor`.

    If Ray is already initialised in this process, that instance is used (and left
    running); otherwise one is started (``address`` to join a cluster) and shut down
    with the executor.
    """

    name: str = 'ray'
    address: str | None = pydantic.Field(default=None, description="cluster address, or 'auto'")
    num_cpus: int | None = pydantic.Field(
        default=None, ge=1, description='CPUs of a local instance'
    )

    def get_executor(self) -> Any:
        """Start (or join) Ray and build the executor."""
        import ray

        from tether.plugins.ray import RayExecutor

        started = not ray.is_initialized()
        if started:
            kwargs: dict[str, Any] = {'include_dashboard': False, 'log_to_driver': False}
            if self.address is not None:
                kwargs['address'] = self.address
            if self.num_cpus is not None:
                kwargs['num_cpus'] = self.num_cpus
            start_ray(**kwargs)
        return RayExecutor(shutdown_ray=started)

    def get_workers(self) -> int | None:
        """``num_cpus`` if set."""
        return self.num_cpus
