"""``tether faas dev``: the service and one endpoint in this process, nothing to set up.

The service runs over SQLite (in memory) and in-process queues: the same code as the
production service over PostgreSQL and RabbitMQ, behind the same interfaces. Once the
endpoint is connected, the URL, a user token and the endpoint id are written to
:func:`~tether.faas._config.dev_file` (mode 0600, in a 0700 directory), where
``Client()`` and ``Executor()`` of any process of the same user find them. The file is
removed when the dev service stops; its state (tasks, results) goes with it.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
from collections.abc import Callable
from typing import Any

from tether._serve.loop import run as run_loop
from tether.exceptions import ConfigError
from tether.faas._config import (
    ComputeEndpointConfig,
    ServiceConfig,
    dev_file,
    read_dev_file,
    write_private,
)
from tether.faas._server import ServiceThread
from tether.faas.endpoint._agent import Agent

__all__ = ['run_dev']


def run_dev(
    announce: Callable[[dict[str, Any]], None],
    *,
    port: int = 0,
    max_workers: int | None = None,
    idle_timeout_s: float = 120.0,
    engine: str = 'process',
) -> None:
    """Run until SIGINT or SIGTERM; call ``announce(info)`` once ready."""
    running = read_dev_file()
    if running is not None:
        raise ConfigError(
            f'a dev service already runs for this user (pid {running["pid"]}, '
            f'{running["url"]}); stop it first',
        )
    service = ServiceThread(ServiceConfig(port=port, database='sqlite://', broker='memory://'))
    service.start()
    try:
        assert service.service is not None
        repo = service.service.repo
        user_id, token = service.call(repo.create_user('dev'))
        endpoint_id, endpoint_token = service.call(repo.add_endpoint(user_id, 'dev'))
        config = ComputeEndpointConfig(
            name='dev',
            endpoint_id=endpoint_id,
            service_url=service.url,
            engine=engine,
            max_workers=max_workers or os.cpu_count() or 1,
            idle_timeout_s=idle_timeout_s,
        )
        info = {'url': service.url, 'token': token, 'endpoint_id': endpoint_id, 'pid': os.getpid()}
        run_loop(_serve_endpoint(config, endpoint_token, info, announce))
    finally:
        with contextlib.suppress(FileNotFoundError, json.JSONDecodeError):
            if json.loads(dev_file().read_text()).get('pid') == os.getpid():
                dev_file().unlink()
        service.stop()


async def _serve_endpoint(
    config: ComputeEndpointConfig,
    token: str,
    info: dict[str, Any],
    announce: Callable[[dict[str, Any]], None],
) -> None:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    agent = Agent(config, token)
    run = asyncio.ensure_future(agent.run(stop))
    connected = asyncio.ensure_future(agent.connected.wait())
    await asyncio.wait({run, connected}, return_when=asyncio.FIRST_COMPLETED)
    if connected.done():
        write_private(dev_file(), json.dumps(info).encode())
        announce({'url': info['url'], 'endpoint_id': info['endpoint_id'], 'pid': info['pid']})
    else:
        connected.cancel()
    await run
    if agent.fatal is not None:
        raise agent.fatal
