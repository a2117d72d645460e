"""``tether agents``: launch, list and stop daemon agents."""

from __future__ import annotations

import json
import os
import pathlib
import signal
import time
from typing import Any

import click

from tether._serve.metrics import MetricsOptions
from tether._serve.metrics import click_options as _metrics_options
from tether.agents.exchange._hosted_cli import exchange

__all__ = ['agents', 'daemon_command', 'list_command', 'stop_command']


def _home(home: str | None) -> pathlib.Path | None:
    return pathlib.Path(home) if home else None


@click.group()
def agents() -> None:
    """Daemon agents: agents that outlive the process that launched them."""


@agents.command('daemon')
@click.argument('behavior')
@click.option(
    '--kwargs', 'kwargs_json', default='{}', help="The behavior's keyword arguments (JSON)."
)
@click.option(
    '--exchange',
    'kind',
    type=click.Choice(['redis', 'hybrid']),
    default='redis',
    show_default=True,
)
@click.option(
    '--redis',
    'redis_address',
    default='127.0.0.1:6379',
    show_default=True,
    help='HOST:PORT of the Redis server.',
)
@click.option(
    '--prefix', default='tether-agents:', show_default=True, help="The exchange's key prefix."
)
@click.option('--password-env', default=None, help='Variable holding the Redis password.')
@click.option('--restart', default=0, show_default=True, help='Restarts allowed after a failure.')
@click.option('--home', default=None, help='Agents home (default: $TETHER_AGENTS_HOME).')
@click.option('--json', 'as_json', is_flag=True, help="Print the daemon's record as JSON.")
@_metrics_options
def daemon_command(  # noqa: PLR0917 - click passes options by position
    behavior: str,
    kwargs_json: str,
    kind: str,
    redis_address: str,
    prefix: str,
    password_env: str | None,
    restart: int,
    home: str | None,
    as_json: bool,
    metrics: MetricsOptions,
) -> None:
    """Launch BEHAVIOR (``module:Class``) as a daemon agent; print its id.

    The agent keeps running after this command ends, under a supervisor that restarts
    it (``--restart``) and, with ``--metrics-port``, serves its Prometheus metrics.
    """
    from tether.agents import Manager
    from tether.agents.exchange import HybridExchange, RedisExchange
    from tether.agents.launcher import DaemonLauncher
    from tether.agents.launcher.daemon import daemon_records
    from tether.exceptions import TetherError

    cls = _behavior_class(behavior)
    try:
        kwargs = json.loads(kwargs_json)
    except ValueError as e:
        raise click.BadParameter(f'not JSON: {e}', param_hint='--kwargs') from e
    if not isinstance(kwargs, dict):
        raise click.BadParameter('must be a JSON object', param_hint='--kwargs')
    host, _, port = redis_address.rpartition(':')
    if not host or not port.isdigit():
        raise click.BadParameter('expected HOST:PORT', param_hint='--redis')
    exchange_cls = HybridExchange if kind == 'hybrid' else RedisExchange
    ex = exchange_cls(host, int(port), prefix=prefix, password_env=password_env)
    launcher = DaemonLauncher(home=home, restart=restart, metrics=metrics)
    try:
        with Manager(ex, launcher) as manager:  # leaves the daemon running
            agent_id = manager.launch(cls(**kwargs)).agent_id
    except TetherError as e:
        raise click.ClickException(str(e)) from e
    finally:
        ex.close()
    record = next(r for r in daemon_records(_home(home)) if r['agent_id'] == agent_id)
    if as_json:
        click.echo(json.dumps(record, indent=2))
        return
    click.echo(agent_id)
    if record.get('metrics'):
        click.echo(f'metrics on {record["metrics"]}')


def _behavior_class(name: str) -> Any:
    """The behavior class ``module:Class`` names (the user's own command line)."""
    import importlib

    from tether.agents.behavior import Behavior

    module, _, qualname = name.partition(':')
    if not module or not qualname:
        raise click.BadParameter('expected module:Class', param_hint='BEHAVIOR')
    try:
        obj: Any = importlib.import_module(module)
        for part in qualname.split('.'):
            obj = getattr(obj, part)
    except (ImportError, AttributeError) as e:
        raise click.BadParameter(f'cannot import {name}: {e}', param_hint='BEHAVIOR') from e
    if not (isinstance(obj, type) and issubclass(obj, Behavior)):
        raise click.BadParameter(f'{name} is not a Behavior class', param_hint='BEHAVIOR')
    return obj


@agents.command('list')
@click.option('--home', default=None, help='Agents home (default: $TETHER_AGENTS_HOME).')
@click.option('--json', 'as_json', is_flag=True, help='Print JSON.')
def list_command(home: str | None, as_json: bool) -> None:
    """List daemon agents."""
    from tether.agents.launcher.daemon import daemon_records

    records = daemon_records(_home(home))
    if as_json:
        click.echo(json.dumps(records, indent=2))
        return
    if not records:
        click.echo('no daemon agents')
        return
    for r in records:
        state = 'running' if r['alive'] else 'dead'
        metrics = f'  metrics {r["metrics"]}' if r.get('metrics') else ''
        click.echo(f'{r["agent_id"]}  pid {r["pid"]}  {state}  {r["behavior"]}{metrics}')


@agents.command('stop')
@click.argument('agent_ids', nargs=-1)
@click.option('--all', 'stop_all', is_flag=True, help='Stop every daemon agent.')
@click.option('--home', default=None, help='Agents home (default: $TETHER_AGENTS_HOME).')
@click.option('--timeout', default=30.0, show_default=True, help='Seconds to wait for each.')
@click.option('--force', is_flag=True, help='Kill supervisors that do not stop in time.')
def stop_command(
    agent_ids: tuple[str, ...], stop_all: bool, home: str | None, timeout: float, force: bool
) -> None:
    """Ask daemon agents to shut down (through their exchange) and wait until they stop."""
    from tether.agents.launcher.daemon import daemon_records, exchange_from_record, pid_alive
    from tether.exceptions import TetherError, UnknownMailboxError

    records = {r['agent_id']: r for r in daemon_records(_home(home))}
    ids = list(records) if stop_all else list(agent_ids)
    if not ids:
        raise click.UsageError('name agent ids to stop, or pass --all')
    failed = False
    for agent_id in ids:
        record = records.get(agent_id)
        if record is None:
            click.echo(f'{agent_id}: no such daemon agent', err=True)
            failed = True
            continue
        pid = int(record['pid'])
        if record['alive']:
            try:
                exchange = exchange_from_record(record)
                try:
                    exchange.get_handle(agent_id).shutdown().result(timeout)
                except UnknownMailboxError:
                    # Redis lost the mailbox; the daemon still listens on it (and would
                    # make it again itself): make it now and ask there.
                    exchange.transport().restore(agent_id, None)
                    exchange.get_handle(agent_id).shutdown().result(timeout)
                exchange.close()
            except (TetherError, TimeoutError) as e:
                click.echo(f'{agent_id}: shutdown request failed: {e}', err=True)
        deadline = time.monotonic() + timeout
        while pid_alive(pid) and time.monotonic() < deadline:
            time.sleep(0.05)
        if pid_alive(pid):
            if not force:
                click.echo(f'{agent_id}: still running (pid {pid}); use --force', err=True)
                failed = True
                continue
            os.kill(pid, signal.SIGTERM)
            time.sleep(2)
            if pid_alive(pid):
                os.kill(pid, signal.SIGKILL)
        for suffix in ('.json', '.spec'):
            path = pathlib.Path(record['log']).with_suffix(suffix)
            if path.exists():
                path.unlink()
        click.echo(f'{agent_id}: stopped')
    if failed:
        raise SystemExit(1)


agents.add_command(exchange)
