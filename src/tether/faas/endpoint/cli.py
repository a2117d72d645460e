"""``tether faas endpoint configure|start|stop|list|status``."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
import logging
import os
import pathlib
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from typing import Any, TypeVar

import click

from tether.exceptions import ConfigError, FaasAuthenticationError, TetherError
from tether.faas._config import (
    ComputeEndpointConfig,
    endpoint_dir,
    faas_home,
    pid_alive,
    write_private,
)
from tether.faas.endpoint._cli_provider import checked, provider_options, provider_table

__all__ = ['endpoint', 'one_line_errors', 'read_token']

F = TypeVar('F', bound=Callable[..., Any])


def one_line_errors(fn: F) -> F:
    """Report tether's errors as one ``Error: ...`` line and exit 1, not a traceback."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except FaasAuthenticationError as e:
            raise click.ClickException(
                f'{e}; check the token (`tether faas add-user --rotate NAME` gives a user '
                'a new one)'
            ) from e
        except TetherError as e:
            raise click.ClickException(str(e)) from e

    return wrapper  # type: ignore[return-value]


def read_token(token_file: str | None, token: str | None, env: str) -> str | None:
    """A token from ``--token-file`` (``-``: standard input), else ``--token`` (with a
    warning: a command line is visible to every user of the machine in ``ps``), else
    ``None`` (the caller falls back to the environment variable ``env``)."""
    if token_file is not None and token is not None:
        raise click.UsageError('give --token-file or --token, not both')
    if token_file == '-':
        value = sys.stdin.readline().strip()
    elif token_file is not None:
        from tether._keyfile import read_private

        path = pathlib.Path(token_file)
        try:
            value = read_private(path, 'token').decode()
        except FileNotFoundError as e:
            raise ConfigError(f'token file {path} does not exist') from e
    elif token is not None:
        click.echo(
            'Warning: a token on the command line is visible to other users in `ps`; use '
            f'--token-file PATH (mode 0600) or the environment variable {env} instead',
            err=True,
        )
        return token
    else:
        return None
    if not value:
        raise ConfigError(f'token file {token_file} is empty')
    return value


def _pid(name: str) -> int | None:
    try:
        pid = int((endpoint_dir(name) / 'pid').read_text())
    except (FileNotFoundError, ValueError):
        return None
    return pid if pid_alive(pid) else None


def _configured(name: str) -> pathlib.Path:
    """The folder of endpoint ``name``; a clear error if it was never configured."""
    folder = endpoint_dir(name)
    if not (folder / 'config.toml').exists():
        raise ConfigError(
            f'no endpoint named {name!r} is configured for this user ({folder}): see '
            f'`tether faas endpoint list`, or create it with `tether faas endpoint configure '
            f'{name}`'
        )
    return folder


def _local_state(
    name: str, config: ComputeEndpointConfig, pid: int | None, **more: Any
) -> dict[str, Any]:
    """What ``list`` and ``status`` say of endpoint ``name`` on this machine (``more``
    after its id); ``pid``: its agent's, if running."""
    return {
        'name': name,
        'endpoint_id': config.endpoint_id,
        **more,
        'running': pid is not None,
        'pid': pid,
    }


def _load(name: str) -> tuple[ComputeEndpointConfig, str]:
    folder = _configured(name)
    config = ComputeEndpointConfig.from_toml(folder / 'config.toml')
    try:
        token = (folder / 'token').read_text().strip()
    except FileNotFoundError as e:
        raise ConfigError(f'endpoint {name} has no token file: configure it again') from e
    return config, token


@click.group()
def endpoint() -> None:
    """Endpoints: register, run and inspect the agents that run your functions."""


@endpoint.command('configure')
@click.argument('name')
@click.option('--service', 'service_url', default=None, help='Service URL (default: dev).')
@click.option(
    '--token-file',
    default=None,
    help='File holding your user token (mode 0600; "-": standard input). Default: '
    '$TETHER_FAAS_TOKEN.',
)
@click.option(
    '--token',
    default=None,
    help='Your user token (discouraged: other users see it in `ps`; use --token-file).',
)
@click.option(
    '--engine',
    default=None,
    help='process, parsl, or an engine registered under the tether.faas_engines entry points '
    '(default: parsl with --provider, else process)',
)
@click.option('--min-workers', default=0, show_default=True)
@click.option('--max-workers', type=int, default=None, help='Default: the CPU count.')
@click.option('--idle-timeout', default=120.0, show_default=True, help='Seconds.')
@click.option('--max-retries', default=2, show_default=True)
@click.option(
    '--managers', type=int, default=None, help='engine managers: pools of --max-workers workers.'
)
@click.option(
    '--routing',
    type=click.Choice(['warm', 'random']),
    default=None,
    help='engine managers: route a task to a manager with its function warm (default), or at '
    'random.',
)
@click.option('--allow', 'allow', multiple=True, help='Allowed function id (repeatable).')
@click.option('--redis-url', default='redis://127.0.0.1:6379/0', show_default=True)
@click.option('--ca-file', default=None, help='CA bundle of an HTTPS service.')
@provider_options
@click.option('--json', 'as_json', is_flag=True)
@one_line_errors
def _configure(  # noqa: PLR0917
    name: str,
    service_url: str | None,
    token_file: str | None,
    token: str | None,
    engine: str | None,
    min_workers: int,
    max_workers: int | None,
    idle_timeout: float,
    max_retries: int,
    managers: int | None,
    routing: str | None,
    allow: tuple[str, ...],
    redis_url: str,
    ca_file: str | None,
    as_json: bool,
    **provider: Any,
) -> None:
    """Register endpoint NAME with the service and write its configuration.

    With --provider (slurm, pbspro, lsf, condor, kubernetes, aws, googlecloud, local),
    the parsl engine runs tasks in that provider's blocks (batch jobs, pods, instances):
    see the [provider] table in docs/faas.md.
    """
    from tether.faas._client import Client

    token = read_token(token_file, token, 'TETHER_FAAS_TOKEN')
    folder = endpoint_dir(name)
    if (folder / 'config.toml').exists():
        raise click.ClickException(f'endpoint {name} is already configured ({folder})')
    fields: dict[str, Any] = {
        'name': name,
        'service_url': service_url or 'http://unregistered',
        'min_workers': min_workers,
        'max_workers': max_workers or os.cpu_count() or 1,
        'idle_timeout_s': idle_timeout,
        'max_retries': max_retries,
        'allowed_functions': list(allow) or None,
        'redis_url': redis_url,
        'ca_file': ca_file,
        'provider': provider_table(provider),
    }
    if engine is not None:
        fields['engine'] = engine
    if managers is not None:
        fields['managers'] = managers
    if routing is not None:
        fields['routing'] = routing
    checked(fields, endpoint_id='unregistered')  # refused before the service hears of it
    with Client(service_url, token, verify=ca_file or True) as client:
        endpoint_id, endpoint_token = client.register_endpoint(name)
        fields['service_url'] = ','.join(client.service_urls)  # every replica
    config = checked(fields, endpoint_id=endpoint_id)
    config.write_toml(folder / 'config.toml')
    write_private(folder / 'token', endpoint_token.encode())
    if as_json:
        click.echo(json.dumps({'name': name, 'endpoint_id': endpoint_id}))
    else:
        click.echo(f'endpoint {name}: {endpoint_id} (configuration in {folder})')


@endpoint.command('start')
@click.argument('name')
@click.option('--foreground', is_flag=True, help='Run here instead of in the background.')
@one_line_errors
def _start(name: str, foreground: bool) -> None:
    """Start the agent of endpoint NAME."""
    config, token = _load(name)
    folder = endpoint_dir(name)
    running = _pid(name)
    if running is not None and running != os.getpid():
        raise click.ClickException(f'endpoint {name} already runs (pid {running})')
    if not foreground:
        (folder / 'connected').unlink(missing_ok=True)
        with open(folder / 'endpoint.log', 'ab') as log:
            proc = subprocess.Popen(
                [
                    sys.executable,
                    '-c',
                    'from tether.cli import main; main()',
                    'faas',
                    'endpoint',
                    'start',
                    name,
                    '--foreground',
                ],
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=log,
                start_new_session=True,
            )
        deadline = time.monotonic() + 60
        while not (folder / 'connected').exists():
            if proc.poll() is not None:
                raise click.ClickException(
                    f'endpoint {name} stopped (exit {proc.returncode}); see {folder}/endpoint.log'
                )
            if time.monotonic() > deadline:
                raise click.ClickException(f'endpoint {name} did not connect in 60 s')
            time.sleep(0.05)
        click.echo(f'endpoint {name} ({config.endpoint_id}) started, pid {proc.pid}')
        return
    logging.basicConfig(
        level=logging.INFO, format='%(asctime)s %(name)s %(levelname)s %(message)s'
    )
    write_private(folder / 'pid', str(os.getpid()).encode())
    try:
        from tether._serve.loop import run

        run(_run(config, token, folder))
    finally:
        with contextlib.suppress(FileNotFoundError):
            if (folder / 'pid').read_text() == str(os.getpid()):
                (folder / 'pid').unlink()
        (folder / 'connected').unlink(missing_ok=True)


async def _run(config: ComputeEndpointConfig, token: str, folder: Any) -> None:
    from tether.faas.endpoint._agent import Agent

    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    agent = Agent(config, token)

    async def mark() -> None:
        await agent.connected.wait()
        write_private(folder / 'connected', b'1')

    marker = asyncio.ensure_future(mark())
    try:
        await agent.run(stop)
    finally:
        marker.cancel()
    if agent.fatal is not None:
        raise click.ClickException(str(agent.fatal))


@endpoint.command('stop')
@click.argument('name')
@one_line_errors
def _stop(name: str) -> None:
    """Stop the agent of endpoint NAME (its running tasks are queued again)."""
    _configured(name)
    pid = _pid(name)
    if pid is None:
        raise click.ClickException(f'endpoint {name} is not running')
    os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + 30
    while _pid(name) is not None and time.monotonic() < deadline:
        time.sleep(0.05)
    click.echo(f'endpoint {name} stopped')


@endpoint.command('list')
@click.option('--json', 'as_json', is_flag=True)
@one_line_errors
def _list(as_json: bool) -> None:
    """Endpoints configured on this machine for this user."""
    rows = []
    root = faas_home() / 'endpoints'
    for folder in sorted(root.iterdir()) if root.is_dir() else []:
        try:
            config = ComputeEndpointConfig.from_toml(folder / 'config.toml')
        except ConfigError:
            continue
        pid = _pid(folder.name)
        rows.append(_local_state(folder.name, config, pid, service_url=config.service_url))
    if as_json:
        click.echo(json.dumps(rows))
        return
    for r in rows:
        state = f'running (pid {r["pid"]})' if r['running'] else 'stopped'
        click.echo(f'{r["name"]}  {r["endpoint_id"]}  {state}  {r["service_url"]}')


@endpoint.command('status')
@click.argument('name')
@click.option('--json', 'as_json', is_flag=True)
@one_line_errors
def _status(name: str, as_json: bool) -> None:
    """Local state and the service's view (online, workers, queued tasks) of NAME."""
    import httpx

    from tether.faas._http import raise_for, split_urls

    config, token = _load(name)
    pid = _pid(name)
    urls = split_urls(config.service_url)  # the service's replicas, tried in turn
    for i, url in enumerate(urls):
        with httpx.Client(
            base_url=url,
            headers={'Authorization': f'Bearer {token}'},
            verify=config.ca_file or True,
            timeout=30,
        ) as http:
            try:
                response = http.get('/v1/endpoint/status')
                break
            except httpx.TransportError as e:
                if i == len(urls) - 1:
                    raise click.ClickException(
                        f'service {config.service_url} unreachable: {e}'
                    ) from e
    try:
        raise_for(response, f'status of endpoint {name}')
    except FaasAuthenticationError as e:
        raise ConfigError(
            f"{e}: the service no longer accepts this endpoint's token (was the endpoint "
            f'deleted?); configure it again under a new name'
        ) from e
    remote = response.json()
    data = {**_local_state(name, config, pid), **remote}
    if as_json:
        click.echo(json.dumps(data))
        return
    info = remote.get('info', {})
    click.echo(
        f'{name} ({config.endpoint_id}): agent {"running" if pid else "stopped"}, service sees '
        f'it {"online" if remote.get("online") else "offline"}; workers {info.get("workers")}, '
        f'idle {info.get("idle")}, queued {remote.get("queued")}, running {remote.get("running")}'
    )
