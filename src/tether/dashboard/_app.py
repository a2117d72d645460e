"""The dashboard's web application (Starlette): routes, access key, static files."""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import importlib.resources
import secrets
from collections.abc import AsyncIterator, Awaitable, Callable

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse, Response
from starlette.routing import Route

from tether.dashboard._config import DashboardConfig
from tether.dashboard._html import SCRIPT, STYLE, esc, page, table
from tether.dashboard._pages_faas import endpoints_table, faas_page, task_page
from tether.dashboard._pages_runs import bench_page, bench_run_page, steer_page
from tether.dashboard._pages_servers import server_page, servers_page, servers_table
from tether.dashboard._runs import bench_runs
from tether.dashboard._state import State
from tether.exceptions import FaasError

__all__ = ['build_app', 'plotly_js']

COOKIE = 'tether_dashboard_key'
# Scripts only from the dashboard itself (Plotly needs eval for some charts); no frames.
SECURITY_HEADERS = {
    'Content-Security-Policy': (
        "default-src 'self'; script-src 'self' 'unsafe-eval'; "
        "style-src 'self' 'unsafe-inline'; img-src 'self' data:; frame-ancestors 'none'"
    ),
    'X-Content-Type-Options': 'nosniff',
    'Referrer-Policy': 'no-referrer',
    'Cache-Control': 'no-store',
}
Handler = Callable[[State, Request], Awaitable[Response]]


def plotly_js() -> bytes:
    """``plotly.min.js`` as the installed ``plotly`` package ships it.

    Raises:
        ModuleNotFoundError: ``plotly`` is not installed (``pip install
            "tether[dashboard]"``).
    """
    return (importlib.resources.files('plotly') / 'package_data' / 'plotly.min.js').read_bytes()


async def overview(state: State, request: Request) -> Response:
    body = '<h2>Servers</h2>' + servers_table(state)
    if state.faas is not None:
        try:
            body += '<h2>Function endpoints</h2>' + endpoints_table(await state.faas.endpoints())
        except FaasError as e:
            body += f'<h2>Function endpoints</h2><p class="error">{esc(e)}</p>'
    runs = bench_runs(state.config.bench_dirs)
    if state.config.steer_dirs or runs:
        body += '<h2>Results</h2>' + table(
            ['', ''],
            [
                ['steering campaigns', len(state.config.steer_dirs)],
                ['bench runs', len(runs)],
            ],
            'results',
        )
    return HTMLResponse(page('Overview', '/', body, state.config.page_refresh_s))


def build_app(config: DashboardConfig, scrape: bool = True) -> Starlette:
    """The dashboard over ``config`` (``config.key``: ``None`` is replaced by a random
    key, then found in ``app.state.key``). With ``scrape``, a task scrapes the metrics
    targets every ``refresh_s`` seconds while the app runs."""
    key = secrets.token_urlsafe(24) if config.key is None else config.key
    state = State.of(config)
    script = SCRIPT.encode()
    style = STYLE.encode()
    plotly: list[bytes] = []

    def route(handler: Handler) -> Callable[[Request], Awaitable[Response]]:
        async def endpoint(request: Request) -> Response:
            given = request.query_params.get('key')
            if key and given is not None and hmac.compare_digest(given.encode(), key.encode()):
                response: Response = RedirectResponse(request.url.remove_query_params('key'), 303)
                response.set_cookie(COOKIE, key, httponly=True, samesite='strict')
                return response
            cookie = request.cookies.get(COOKIE, '')
            if key and not hmac.compare_digest(cookie.encode(), key.encode()):
                body = (
                    '<p class="error" id="need-key">Open the link with the key that '
                    '<code>tether dashboard</code> printed (<code>?key=...</code>).</p>'
                )
                response = HTMLResponse(page('Access key needed', '', body), 401)
            else:
                response = await handler(state, request)
            response.headers.update(SECURITY_HEADERS)
            return response

        return endpoint

    async def static(state: State, request: Request) -> Response:
        name = request.path_params['name']
        if name == 'dashboard.js':
            return Response(script, media_type='text/javascript')
        if name == 'dashboard.css':
            return Response(style, media_type='text/css')
        if name == 'plotly.min.js':
            if not plotly:
                plotly.append(plotly_js())
            return Response(plotly[0], media_type='text/javascript')
        return Response('not found', 404)

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        task = asyncio.ensure_future(state.scraper.run()) if scrape and config.metrics else None
        try:
            yield
        finally:
            if task is not None:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task
            await state.scraper.close()
            if state.faas is not None:
                await state.faas.close()

    async def static_open(request: Request) -> Response:
        response = await static(state, request)  # the static files hold no data: no key
        response.headers['Cache-Control'] = 'public, max-age=86400'
        response.headers['X-Content-Type-Options'] = 'nosniff'
        return response

    routes = [
        Route('/', route(overview)),
        Route('/faas', route(faas_page)),
        Route('/faas/tasks/{task_id}', route(task_page)),
        Route('/servers', route(servers_page)),
        Route('/servers/{name}', route(server_page)),
        Route('/steer', route(steer_page)),
        Route('/bench', route(bench_page)),
        Route('/bench/{name}', route(bench_run_page)),
        Route('/static/{name}', static_open),
    ]
    app = Starlette(routes=routes, lifespan=lifespan)
    app.state.key = key
    app.state.dashboard = state
    return app
