"""``tether agents``: list and stop daemon agents."""

from __future__ import annotations

import json
import os
import pathlib
import signal
import time

import click

from tether.agents.exchange._hosted_cli import exchange

__all__ = ['agents', 'list_command', 'stop_command']


def _home(home: str | None) -> pathlib.Path | None:
    return pathlib.Path(home) if home else None


@click.group()
def agents() -> None:
    """Daemon agents: agents that outlive the process that launched them."""


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
