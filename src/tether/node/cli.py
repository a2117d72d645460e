"""``tether node``: run, stop and inspect this host's in-memory object server."""

from __future__ import annotations

import json
import logging
import os
import ssl
import sys
from pathlib import Path

import click

from tether._serve.metrics import MetricsOptions
from tether._serve.metrics import click_options as _metrics_options

__all__ = ['node']

_RUN_DIR_HELP = (
    'Directory of the discovery files (default: $TETHER_NODE_RUN_DIR, '
    '$XDG_RUNTIME_DIR/tether-node or /tmp/tether-node-<uid>).'
)


@click.group(context_settings={'help_option_names': ['-h', '--help']})
def node() -> None:
    """Run this host's in-memory object server (used by NodeConnector).

    A node server keeps objects in memory for every process on the host and serves them
    directly to consumers on other hosts. NodeConnector starts one on first use; run it
    yourself with `tether node start` to choose its port, memory budget and address.

    The shared secret comes from $TETHER_NODE_SECRET, else from the file
    $TETHER_NODE_SECRET_FILE or ~/.config/tether/node.secret (created on first use).
    It is never passed on the command line and never sent over the network.

    \b
    Examples:
      tether node start --port 7400 --memory 4GB
      tether node status
      tether node stop
    """


@node.command('start')
@click.option('--name', default='default', show_default=True, help='Server name (one per host).')
@click.option('--bind', default='0.0.0.0', show_default=True, help='Address to listen on.')
@click.option('--port', default=0, show_default=True, help='Port to listen on (0: any free port).')
@click.option(
    '--address',
    default=None,
    help='Address other hosts reach this server by, written into keys '
    '(default: $TETHER_NODE_ADDRESS or the address of the default route).',
)
@click.option(
    '--memory',
    default=None,
    help='Memory budget for objects, e.g. 4GB or 512MiB (default: half of RAM). '
    'Past it, least recently used objects spill to disk.',
)
@click.option(
    '--spill-dir', default=None, help='Directory for spilled objects (default: a temp dir).'
)
@click.option(
    '--idle-timeout',
    default=0.0,
    show_default=True,
    help='Stop after this many seconds without clients or requests (0: never).',
)
@click.option('--run-dir', default=None, help=_RUN_DIR_HELP)
@click.option('--tls-cert', default=None, help='PEM certificate: serve over TLS.')
@click.option('--tls-key', default=None, help='PEM private key of --tls-cert.')
@click.option('--max-frame', default='64GiB', show_default=True, help='Largest request accepted.')
@click.option(
    '--frame-timeout',
    default=60.0,
    show_default=True,
    help='Drop a connection whose request stops arriving for this many seconds (0: never).',
)
@click.option('-v', '--verbose', is_flag=True, help='Log every connection.')
@_metrics_options
def _start(  # noqa: PLR0917
    name: str,
    bind: str,
    port: int,
    address: str | None,
    memory: str | None,
    spill_dir: str | None,
    idle_timeout: float,
    run_dir: str | None,
    tls_cert: str | None,
    tls_key: str | None,
    max_frame: str,
    frame_timeout: float,
    verbose: bool,
    metrics: MetricsOptions,
) -> None:
    """Run a node server in the foreground until stopped.

    Stop it with Ctrl-C, SIGTERM or `tether node stop`. NodeConnector instances on this
    host with the same name (and run directory) use this server instead of spawning
    their own; clients anywhere authenticate with the shared secret
    ($TETHER_NODE_SECRET, else the secret file, see `tether node --help`).

    \b
    Example:
      TETHER_NODE_SECRET=... tether node start --port 7400 --memory 4GB
    """
    from tether._serve.sizes import format_size, parse_size, physical_memory
    from tether._serve.spawn import detect_address, find_server, resolve_secret
    from tether._serve.state import check_name, default_run_dir
    from tether._wire import run
    from tether.exceptions import ConfigError
    from tether.node._server import NodeServer

    try:
        check_name(name)
    except ConfigError as e:
        raise click.BadParameter(str(e), param_hint='--name') from e

    logging.basicConfig(
        level=logging.INFO if verbose else logging.WARNING,
        format='%(asctime)s %(name)s %(levelname)s %(message)s',
        stream=sys.stderr,
    )
    logging.getLogger('tether.node').setLevel(logging.INFO)
    rdir = Path(run_dir) if run_dir else default_run_dir()
    existing = find_server(rdir, name)
    if existing is not None and existing.pid != os.getpid():
        raise click.ClickException(
            f'node server {name!r} already runs on this host (pid {existing.pid}, port '
            f'{existing.port}): stop it with `tether node stop --name {name}` or pick --name',
        )
    try:
        budget = parse_size(memory) if memory else physical_memory() // 2
        frame_limit = parse_size(max_frame)
    except ValueError as e:
        raise click.BadParameter(str(e)) from e
    context = None
    if tls_cert:
        from tether._serve.tls import server_context

        try:
            context = server_context(tls_cert, tls_key)
        except (OSError, ssl.SSLError) as e:
            raise click.ClickException(f'cannot load --tls-cert/--tls-key: {e}') from e
    server = NodeServer(
        name,
        bind=bind,
        port=port,
        address=address or (bind if bind not in {'0.0.0.0', '::'} else detect_address()),
        memory_limit=budget,
        spill_dir=Path(spill_dir) if spill_dir else None,
        secret=resolve_secret(None),
        idle_timeout=idle_timeout or None,
        run_dir=rdir,
        ssl=context,
        max_frame=frame_limit,
        frame_timeout=frame_timeout or None,
        metrics=metrics,
    )
    click.echo(
        f'node server {name!r} starting on {bind}:{port or "(any port)"}, '
        f'memory budget {format_size(budget)}',
        err=True,
    )
    try:
        run(server.serve())
    except ConfigError as e:
        raise click.ClickException(str(e)) from e
    except OSError as e:
        raise click.ClickException(
            f'node server {name!r} cannot listen on {bind}:{port}: {e.strerror or e}',
        ) from e
    click.echo(f'node server {name!r} stopped', err=True)


def _connect(name: str, run_dir: str | None) -> tuple[object, Path]:
    from tether._serve.state import check_name, default_run_dir, read_state
    from tether.exceptions import ConfigError

    try:
        check_name(name)
    except ConfigError as e:
        raise click.BadParameter(str(e), param_hint='--name') from e
    rdir = Path(run_dir) if run_dir else default_run_dir()
    state = read_state(rdir, name)
    if state is None:
        raise click.ClickException(f'no node server {name!r} runs on this host (looked in {rdir})')
    return state, rdir


@node.command('status')
@click.option('--name', default='default', show_default=True, help='Server name.')
@click.option('--run-dir', default=None, help=_RUN_DIR_HELP)
@click.option('--json', 'as_json', is_flag=True, help='Print JSON for scripts.')
def _status(name: str, run_dir: str | None, as_json: bool) -> None:
    """Show a running server's address, objects, memory and clients."""
    from tether._serve.sizes import format_size
    from tether._serve.spawn import verify_server
    from tether._serve.state import NodeState

    state, _ = _connect(name, run_dir)
    assert isinstance(state, NodeState)
    info = verify_server(state)
    if info is None:
        raise click.ClickException(
            f'node server {name!r} (pid {state.pid}) does not answer as itself: the '
            'discovery file is stale, or the server is hung (see its log)',
        )
    if as_json:
        click.echo(json.dumps(info._asdict(), indent=2))
        return
    where = 'every interface' if info.all_interfaces else 'this interface only'
    click.echo(
        f'node server {name!r}: pid {info.pid}, {info.address}:{info.port}, '
        f'up {info.uptime:.0f} s\n'
        f'  listens  {info.bind}:{info.port} ({where}), '
        f'{"TLS" if info.tls else "no TLS"}\n'
        f'  objects  {info.objects} ({info.spilled_objects} spilled to disk)\n'
        f'  memory   {format_size(info.memory_used)} of {format_size(info.memory_limit)}'
        f' ({format_size(info.inflight)} in flight)\n'
        f'  disk     {format_size(info.disk_used)}\n'
        f'  clients  {info.clients} connected, {info.requests} requests, '
        f'{info.refused} refused',
    )


@node.command('stop')
@click.option('--name', default='default', show_default=True, help='Server name.')
@click.option('--run-dir', default=None, help=_RUN_DIR_HELP)
@click.option('--timeout', default=10.0, show_default=True, help='Seconds to wait for it to exit.')
def _stop(name: str, run_dir: str | None, timeout: float) -> None:
    """Stop a running server (its objects are lost)."""
    from tether._serve.spawn import stop_server
    from tether._serve.state import NodeState
    from tether.exceptions import ConnectorError

    state, rdir = _connect(name, run_dir)
    assert isinstance(state, NodeState)
    try:
        stopped = stop_server(rdir, name, timeout=timeout)
    except ConnectorError as e:
        raise click.ClickException(str(e)) from e
    if stopped:
        click.echo(f'node server {name!r} (pid {state.pid}) stopped')
    else:
        raise click.ClickException(f'node server {name!r} (pid {state.pid}) did not stop')
