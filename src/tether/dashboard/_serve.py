"""Running the dashboard: a socket bound first (so a port of 0 is known), then uvicorn."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import Callable

from tether.dashboard._app import build_app
from tether.dashboard._config import DashboardConfig

__all__ = ['serve']


def _bind(host: str, port: int) -> socket.socket:
    family = socket.AF_INET6 if ':' in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, port))
    sock.listen(128)
    sock.setblocking(False)
    return sock


def serve(
    config: DashboardConfig,
    on_ready: Callable[[str], None] | None = None,
    stop: asyncio.Event | None = None,
) -> None:
    """Serve the dashboard until interrupted (or ``stop`` is set, from its loop).

    ``on_ready`` is called with the URL to open (with ``?key=`` when there is a key)
    once the port is bound.
    """
    import uvicorn

    app = build_app(config)
    sock = _bind(config.host, config.port)
    host, port = sock.getsockname()[:2]
    shown = f'[{host}]' if ':' in host else host
    url = f'http://{shown}:{port}/' + (f'?key={app.state.key}' if app.state.key else '')
    server = uvicorn.Server(
        uvicorn.Config(app, log_level='warning', lifespan='on', access_log=False)
    )

    async def main() -> None:
        if on_ready is not None:
            on_ready(url)
        if stop is None:
            await server.serve(sockets=[sock])
            return
        serving = asyncio.ensure_future(server.serve(sockets=[sock]))
        await stop.wait()
        server.should_exit = True
        await serving

    try:
        asyncio.run(main())
    finally:
        sock.close()
