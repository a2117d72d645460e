"""Tether's function service (:mod:`tether.faas`) as a benchmark executor.

Two modes:

* ``in-process`` (the default): the service (over SQLite and in-process queues, as
  ``tether faas dev`` runs it) and one endpoint agent with ``workers`` worker processes
  start in threads of this process, with a user and a token of their own, and stop with
  the executor. Nothing to set up; the token never leaves this process.
* ``service``: an existing service and endpoint. ``service_url`` and ``endpoint_id``
  default to the running ``tether faas dev`` of this user (or ``$TETHER_FAAS_URL``); the
  token comes from ``$TETHER_FAAS_TOKEN`` or the dev file, never from the configuration.

Every task is a call of one registered function (:func:`_invoke`, registered once per
run) whose first argument is the engine's task wrapper, so functions are not registered
again for every task. A task that raises fails with
:class:`~tether.exceptions.TaskExecutionFailed` (the remote exception travels as text);
its record carries the remote type, message and traceback.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import logging
import os
import threading
from collections.abc import Callable
from typing import Any, Literal

import pydantic

from tether.bench.executor import ExecutorConfig
from tether.bench.registry import register
from tether.exceptions import BenchError

__all__ = ['FaasConfig', 'FaasExecutor', 'GlobusComputeConfig', 'InProcessFaas']

logger = logging.getLogger(__name__)


def _invoke(function: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Any:
    return function(*args, **kwargs)


class InProcessFaas:
    """A function service and one endpoint agent running in threads of this process.

    Args:
        workers: Worker processes of the endpoint.
        connect_timeout: Seconds to wait for the endpoint to connect to the service.
    """

    def __init__(self, workers: int, *, connect_timeout: float = 120.0) -> None:
        from tether.faas import EndpointConfig, ServiceConfig, ServiceThread

        self.workers = workers
        self.service = ServiceThread(
            ServiceConfig(port=0, database='sqlite://', broker='memory://'),
        ).start()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop: asyncio.Event | None = None
        self._thread: threading.Thread | None = None
        try:
            assert self.service.service is not None
            repo = self.service.service.repo
            user_id, self.token = self.service.call(repo.create_user('bench'))
            self.endpoint_id, endpoint_token = self.service.call(
                repo.add_endpoint(user_id, 'bench'),
            )
            config = EndpointConfig(
                name='bench',
                endpoint_id=self.endpoint_id,
                service_url=self.service.url,
                engine='process',
                max_workers=workers,
                heartbeat_s=1.0,
            )
            self._start_agent(config, endpoint_token, connect_timeout)
        except BaseException:
            self.stop()
            raise

    @property
    def url(self) -> str:
        """The service's base URL."""
        return self.service.url

    def _start_agent(self, config: Any, token: str, timeout: float) -> None:
        from tether.faas.endpoint import Agent

        self.agent = Agent(config, token)
        started = threading.Event()

        async def main() -> None:
            self._loop = asyncio.get_running_loop()
            self._stop = asyncio.Event()
            started.set()
            await self.agent.run(self._stop)

        def run() -> None:
            try:
                asyncio.run(main())
            except BaseException:  # pragma: no cover - reported through agent.fatal
                logger.exception('the benchmark endpoint agent stopped with an error')
            finally:
                started.set()

        self._thread = threading.Thread(target=run, name='tether-bench-faas-agent', daemon=True)
        self._thread.start()
        started.wait(timeout)
        connected = threading.Event()

        async def watch() -> None:
            await self.agent.connected.wait()
            connected.set()

        if self._loop is not None and self._thread.is_alive():
            asyncio.run_coroutine_threadsafe(watch(), self._loop)
        if not connected.wait(timeout):
            fatal = getattr(self.agent, 'fatal', None)
            raise BenchError(
                f'the benchmark endpoint did not connect to {self.service.url} within '
                f'{timeout:.0f} s' + (f': {fatal}' if fatal else ''),
            )

    def stop(self) -> None:
        """Stop the endpoint agent (and its workers), then the service."""
        if self._loop is not None and self._stop is not None:
            with contextlib.suppress(RuntimeError):
                self._loop.call_soon_threadsafe(self._stop.set)
        if self._thread is not None:
            self._thread.join(60)
        self.service.stop()


class FaasExecutor(concurrent.futures.Executor):
    """Submits tasks to a :class:`tether.faas.Executor` (one registered function).

    Args:
        executor: The function-service executor.
        local: An in-process service and endpoint to stop with this executor.
    """

    def __init__(self, executor: Any, *, local: InProcessFaas | None = None) -> None:
        self.executor = executor
        self.local = local

    def __repr__(self) -> str:
        return f'FaasExecutor({self.executor!r})'

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Any:
        """Run ``fn(*args, **kwargs)`` on the endpoint."""
        return self.executor.submit(_invoke, fn, *args, **kwargs)

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        """Shut the executor down, then stop the in-process service if there is one."""
        try:
            self.executor.shutdown(wait=wait, cancel_futures=cancel_futures)
        finally:
            if self.local is not None:
                self.local.stop()


@register('executor')
class FaasConfig(ExecutorConfig):
    """Tether's function service: an in-process service and endpoint, or a running one."""

    name: str = 'faas'
    mode: Literal['in-process', 'service'] = pydantic.Field(
        default='in-process',
        description="'in-process' (start a service and an endpoint here) or 'service'",
    )
    workers: int = pydantic.Field(
        default_factory=lambda: os.cpu_count() or 1,
        ge=1,
        description='worker processes of the in-process endpoint',
    )
    service_url: str | None = pydantic.Field(
        default=None,
        description="the service's URL (mode 'service'; default: the running faas dev)",
    )
    endpoint_id: str | None = pydantic.Field(
        default=None,
        description="the endpoint (mode 'service'; default: the running faas dev's)",
    )
    batch_size: int = pydantic.Field(
        default=1024, ge=1, description='most tasks in one submission request'
    )

    def get_executor(self) -> FaasExecutor:
        """Start the in-process service and endpoint (or connect) and build the executor."""
        from tether.faas import Executor

        if self.mode == 'service':
            return FaasExecutor(
                Executor(
                    self.endpoint_id,
                    service_url=self.service_url,
                    batch_size=self.batch_size,
                ),
            )
        local = InProcessFaas(self.workers)
        try:
            executor = Executor(
                local.endpoint_id,
                service_url=local.url,
                token=local.token,
                batch_size=self.batch_size,
            )
        except BaseException:
            local.stop()
            raise
        return FaasExecutor(executor, local=local)

    def get_workers(self) -> int | None:
        """The in-process endpoint's workers (``None`` for a running service)."""
        return self.workers if self.mode == 'in-process' else None


@register('executor')
class GlobusComputeConfig(FaasConfig):
    """TaPS's ``globus`` executor on tether's function service: a running service's endpoint.

    ``endpoint`` is the endpoint's id (TaPS's field); the service is ``service_url`` (default:
    the running ``tether faas dev``). Tasks go through :class:`tether.faas.Executor`, not
    Globus Compute's SDK.
    """

    name: str = 'globus'
    mode: Literal['in-process', 'service'] = pydantic.Field(
        default='service', description="'service' (default) or 'in-process'"
    )
    endpoint: str | None = pydantic.Field(
        default=None, description="the endpoint's id (TaPS's name of endpoint_id)"
    )

    @pydantic.model_validator(mode='before')
    @classmethod
    def _endpoint_id(cls, data: Any) -> Any:
        if isinstance(data, dict) and data.get('endpoint') is not None:
            if data.get('endpoint_id') not in (None, data['endpoint']):
                raise ValueError('endpoint and endpoint_id name different endpoints')
            return {**data, 'endpoint_id': data['endpoint']}
        return data
