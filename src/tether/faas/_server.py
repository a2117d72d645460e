"""Run the service: database, broker, ASGI app and uvicorn, in this process.

:func:`serve` runs until its ``stop`` event is set; :class:`ServiceThread` runs it in a
background thread (for ``tether faas dev``, tests and benchmarks).
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import logging
import socket
import threading
from collections.abc import AsyncIterator, Callable
from typing import Any

from tether._serve.loop import new_event_loop
from tether._serve.metrics import Served
from tether.exceptions import ConfigError, FaasConnectionError, TetherError
from tether.faas._amqp import _redact
from tether.faas._app import build_app
from tether.faas._config import ServiceConfig
from tether.faas._conn import ConnectionGate, protocols
from tether.faas._core import Service
from tether.faas._db import Repository
from tether.faas._drivers import Driver, open_driver
from tether.faas._metrics import MetricsMiddleware, service_metrics
from tether.faas._open_broker import open_broker
from tether.faas._replicas import Control, SessionTable

__all__ = ['ServiceThread', 'open_database', 'open_service', 'serve', 'tune_gc']

logger = logging.getLogger(__name__)


async def open_database(url: str) -> Driver:
    """Open the database ``url`` names, with a clear error when it cannot be reached."""
    try:
        return await open_driver(url)
    except TetherError:
        raise
    except Exception as e:  # asyncpg's and the OS's errors: unreachable, refused, no db
        raise FaasConnectionError(
            f'cannot open the database {_redact(url)}: {e} (start the database, or fix '
            '"database" in the service configuration)'
        ) from e


@contextlib.asynccontextmanager
async def open_service(config: ServiceConfig) -> AsyncIterator[Service]:
    """Connect the database (creating the tables) and the broker."""
    repo = Repository(await open_database(config.database))
    try:
        await repo.init()
        broker = await open_broker(
            config.broker,
            config.result_queue_expiry_s,
            f'{config.queue_prefix}.results.',
            config.broker_channel_budget,
        )
        try:
            service = Service(config, repo, broker)
            # Endpoint sessions of other replicas are reached through the broker.
            table = SessionTable()
            service.sessions = table
            control = Control(service, table)
            await control.start()
            try:
                yield service
            finally:
                await control.close()
        finally:
            await broker.close()
    finally:
        await repo.close()


def _bind(host: str, port: int) -> socket.socket:
    family = socket.AF_INET6 if ':' in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    # Inherited by accepted connections: a response written in two parts (head, body)
    # must not wait for the client's delayed ACK (40 ms per request otherwise).
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    try:
        sock.bind((host, port))
    except OSError as e:
        sock.close()
        raise ConfigError(
            f'the service cannot listen on {host}:{port}: {e.strerror or e} (another '
            "program uses the port, or the address is not this host's: choose another "
            '"host" or "port" in the service configuration)'
        ) from e
    sock.listen(512)
    sock.setblocking(False)
    return sock


def _file_room(connections: int) -> None:
    """Raise the open-file limit to ``connections`` plus room for the rest, if allowed."""
    import resource

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = connections + 256
    if soft != resource.RLIM_INFINITY and soft < want:
        target = want if hard == resource.RLIM_INFINITY else min(want, hard)
        with contextlib.suppress(ValueError, OSError):
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
            soft = target
        if soft < want:
            logger.warning(
                'the open-file limit (%d) is below max_connections (%d) plus 256: lower '
                'max_connections or raise the limit (ulimit -n)',
                soft,
                connections,
            )


def tune_gc(young_threshold: int) -> None:
    """Tune this process's garbage collector for a service (its entry point calls it).

    What the process allocated so far (modules, classes, the import graph) is frozen out
    of every later collection, and the youngest generation is collected every
    ``young_threshold`` allocations instead of Python's 700: a task's records and frames
    then mostly die before a collection sees them, instead of being walked two or three
    times while the task is in flight. 0 leaves the collector as it is. Never called by
    :func:`serve` itself, which may run in a thread of someone else's process.
    """
    if young_threshold <= 0:
        return
    gc.freeze()
    _, middle, old = gc.get_threshold()
    gc.set_threshold(young_threshold, middle, old)


async def serve(
    config: ServiceConfig,
    stop: asyncio.Event,
    ready: Callable[[str, Service], Any] | None = None,
    on_metrics: Callable[[Served], Any] | None = None,
) -> None:
    """Serve until ``stop`` is set; call ``ready(url, service)`` once listening.

    With ``config.metrics`` on, the metrics are served on their own port and
    ``on_metrics`` gets where (before ``ready``).
    """
    import uvicorn

    async with open_service(config) as service:
        app: Any = build_app(service)
        served = service_metrics(service, config.metrics, app.routes)
        if served.metrics is not None:
            app = MetricsMiddleware(app, served.metrics)
        sock = _bind(config.host, config.port)
        port = sock.getsockname()[1]
        tls = config.tls_certfile is not None
        gate = ConnectionGate(
            config.max_connections,
            config.http_header_timeout_s,
            config.http_idle_timeout_s,
            config.http_keep_alive_timeout_s,
        )
        http_protocol, ws_protocol = protocols(gate)
        _file_room(config.max_connections)
        uconfig = uvicorn.Config(
            app,
            http=http_protocol,
            ws=ws_protocol,
            timeout_keep_alive=config.http_keep_alive_timeout_s,  # type: ignore[arg-type]
            lifespan='off',
            log_level='warning',
            ws_max_size=config.max_request_bytes,
            ws_per_message_deflate=False,
            ws_ping_interval=10.0,
            ws_ping_timeout=30.0,
            ssl_certfile=config.tls_certfile,
            ssl_keyfile=config.tls_keyfile,
            timeout_graceful_shutdown=1,
        )
        server = uvicorn.Server(uconfig)
        task = asyncio.ensure_future(server.serve(sockets=[sock]))
        while not server.started:
            if task.done():
                task.result()
                raise FaasConnectionError('the service stopped while starting')
            await asyncio.sleep(0.02)
        host = f'[{config.host}]' if ':' in config.host else config.host
        url = f'{"https" if tls else "http"}://{host}:{port}'
        logger.info('tether faas service listening on %s', url)
        served.open()
        if on_metrics is not None:
            on_metrics(served)
        if ready is not None:
            ready(url, service)
        stopper = asyncio.ensure_future(stop.wait())
        await asyncio.wait({task, stopper}, return_when=asyncio.FIRST_COMPLETED)
        stopper.cancel()
        for session in list(service.sessions.values()):
            await session.stop()
        server.should_exit = True
        server.force_exit = True
        with contextlib.suppress(asyncio.CancelledError):
            await task
        served.close()
        sock.close()


class ServiceThread:
    """The service in a background thread of this process.

    Attributes:
        url: Base URL, once started.
        service: The :class:`~tether.faas._core.Service`, once started.
    """

    def __init__(self, config: ServiceConfig) -> None:
        self.config = config
        self.url = ''
        self.service: Service | None = None
        self.metrics: Served | None = None
        self.loop: asyncio.AbstractEventLoop | None = None
        self._stop: asyncio.Event | None = None
        self._ready = threading.Event()
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._main, name='tether-faas-service', daemon=True)

    def start(self, timeout: float = 60.0) -> ServiceThread:
        self._thread.start()
        if not self._ready.wait(timeout):
            raise FaasConnectionError('the service did not start in time')
        if self._error is not None:
            raise self._error
        return self

    def _main(self) -> None:
        loop = new_event_loop()
        self.loop = loop

        def ready(url: str, service: Service) -> None:
            self.url = url
            self.service = service
            self._ready.set()

        async def main() -> None:
            self._stop = asyncio.Event()
            await serve(self.config, self._stop, ready, on_metrics=self._metrics_served)

        try:
            loop.run_until_complete(main())
        except BaseException as e:
            self._error = e
            logger.exception('the service failed')
        finally:
            self._ready.set()
            loop.run_until_complete(loop.shutdown_asyncgens())
            loop.close()

    def _metrics_served(self, served: Served) -> None:
        self.metrics = served

    def call(self, coro: Any, timeout: float = 60.0) -> Any:
        """Run a coroutine on the service's loop (e.g. ``service.repo.create_user``)."""
        assert self.loop is not None
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout)

    def stop(self) -> None:
        if self.loop is not None and self._stop is not None and not self.loop.is_closed():
            with contextlib.suppress(RuntimeError):
                self.loop.call_soon_threadsafe(self._stop.set)
        self._thread.join(30)

    def __enter__(self) -> ServiceThread:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
