"""``tether faas``: the function service, its endpoints and the dev service."""

from __future__ import annotations

import asyncio
import json
import logging
import os
import signal
import sys
from typing import Any

import click

from tether._cli_options import config_option
from tether.faas.endpoint.cli import endpoint, one_line_errors

__all__ = ['faas']


@click.group()
def faas() -> None:
    """Federated function as a service: service, endpoints, dev mode."""


@faas.command('dev')
@click.option('--json', 'as_json', is_flag=True, help='Print one JSON line once ready.')
@click.option('--port', default=0, show_default=True, help='Port (0: a free one).')
@click.option('--max-workers', type=int, default=None, help='Workers of the endpoint.')
@click.option(
    '--engine',
    default='process',
    help='process, parsl, or an engine registered under the tether.faas_engines entry points',
)
@one_line_errors
def _dev(as_json: bool, port: int, max_workers: int | None, engine: str) -> None:
    """Run a service and one endpoint here, in the foreground, until interrupted.

    While it runs, Client() and Executor() of this user on this machine use it.
    """
    from tether.faas._config import ServiceConfig
    from tether.faas._dev import run_dev
    from tether.faas._server import tune_gc

    tune_gc(ServiceConfig().gc_young_threshold)
    logging.basicConfig(level=logging.WARNING)

    def announce(info: dict[str, Any]) -> None:
        if as_json:
            click.echo(json.dumps(info))
        else:
            click.echo(f'tether faas dev: service {info["url"]}')
            click.echo(f'endpoint_id: {info["endpoint_id"]}')
            click.echo('Client() and Executor(endpoint_id) of this user now use it; Ctrl-C stops.')
        sys.stdout.flush()

    run_dev(announce, port=port, max_workers=max_workers, engine=engine)


@faas.command('serve')
@config_option('config_path', required=True)
@click.option('--json', 'as_json', is_flag=True, help='Print one JSON line once ready.')
@one_line_errors
def _serve(config_path: str, as_json: bool) -> None:
    """Run the service of a service.toml (PostgreSQL and RabbitMQ) until interrupted."""
    from tether.faas._config import ServiceConfig
    from tether.faas._server import serve as serve_service
    from tether.faas._server import tune_gc

    config = ServiceConfig.from_toml(config_path)
    tune_gc(config.gc_young_threshold)
    logging.basicConfig(level=logging.INFO, format='%(asctime)s %(name)s %(message)s')

    def ready(url: str, _service: Any) -> None:
        click.echo(json.dumps({'url': url}) if as_json else f'tether faas service on {url}')
        sys.stdout.flush()

    async def main() -> None:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, stop.set)
        await serve_service(config, stop, ready)

    from tether._serve.loop import run

    run(main())


@faas.command('add-user')
@config_option('config_path', required=True)
@click.argument('name')
@click.option('--rotate', is_flag=True, help='Give an existing user a new token.')
@one_line_errors
def _add_user(config_path: str, name: str, rotate: bool) -> None:
    """Create a user (or rotate its token) in the service's database; print the token."""
    from tether.exceptions import ConfigError
    from tether.faas._config import ServiceConfig
    from tether.faas._db import Repository
    from tether.faas._server import open_database

    config = ServiceConfig.from_toml(config_path)

    async def main() -> str:
        repo = Repository(await open_database(config.database))
        try:
            await repo.init()
            if rotate:
                token = await repo.rotate_user_token(name)
                if token is None:
                    raise ConfigError(f'no user named {name!r}: create it without --rotate')
                return token
            exists = 'SELECT 1 AS one FROM faas_users WHERE name = $1'
            try:
                if not await repo.db.fetch(exists, name):
                    return (await repo.create_user(name))[1]
            except Exception:
                if not await repo.db.fetch(exists, name):  # not a duplicate: as it is
                    raise
            raise ConfigError(
                f'a user named {name!r} exists: give it a new token with '
                f'`tether faas add-user --config {config_path} --rotate {name}`'
            )
        finally:
            await repo.close()

    click.echo(asyncio.run(main()))


@faas.command('diagnostic')
@click.option(
    '-o',
    '--output',
    type=click.Path(dir_okay=False, writable=True),
    default=None,
    help='Write the report to this file (gzip-compressed when it ends in .gz); default: print it.',
)
@click.option(
    '--recent-endpoints',
    type=click.IntRange(min=0),
    default=5,
    show_default=True,
    help='Include the configs and logs of this many most recently active endpoints.',
)
@click.option(
    '-e',
    '--endpoint',
    'endpoints',
    multiple=True,
    help='Only this endpoint (repeatable).',
)
@click.option(
    '--log-kb',
    type=click.IntRange(min=1),
    default=64,
    show_default=True,
    help='The tail of each log to include, in KiB.',
)
@click.option(
    '--home',
    type=click.Path(file_okay=False),
    default=None,
    help='The faas home folder (default: $TETHER_FAAS_HOME or its default).',
)
@one_line_errors
def _diagnostic(
    output: str | None,
    recent_endpoints: int,
    endpoints: tuple[str, ...],
    log_kb: int,
    home: str | None,
) -> None:
    """Gather what to send when reporting a problem: host, memory, disk, endpoint
    configs (secrets REDACTED) and log tails."""
    import gzip
    import io

    from tether.faas.diagnostic import diagnostic_report, write_report

    sections = diagnostic_report(
        home=home,
        recent_endpoints=recent_endpoints,
        endpoint_names=endpoints,
        log_bytes=log_kb * 1024,
    )
    if output is None:
        write_report(sections, sys.stdout)
        return
    buffer = io.StringIO()
    write_report(sections, buffer)
    data = buffer.getvalue().encode()
    # readable by its owner only: a report names hosts, paths and users
    fd = os.open(output, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, 'wb') as f:
        f.write(gzip.compress(data) if output.endswith('.gz') else data)
    click.echo(f'diagnostic report written to {output}')


faas.add_command(endpoint)
