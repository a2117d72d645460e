"""``tether endpoint``: configure, run and inspect this site's endpoints."""

from __future__ import annotations

import contextlib
import json
import os
import time
import uuid as _uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import click

from tether._serve.metrics import MetricsOptions
from tether._serve.metrics import click_options as _metrics_options

__all__ = ['endpoint']

_F = TypeVar('_F', bound=Callable[..., Any])

_HOME_HELP = 'Configuration root (default: $TETHER_HOME, else the XDG data directory).'


def _home(home: str | None) -> Path | None:
    return Path(home) if home else None


@contextlib.contextmanager
def _failing() -> Iterator[None]:
    """Tether's errors raised inside, as click's (their message, exit status 1)."""
    from tether.exceptions import TetherError

    try:
        yield
    except TetherError as e:
        raise click.ClickException(str(e)) from e


def _on_endpoint(command: str) -> Callable[[Callable[..., None]], click.Command]:
    """``tether endpoint COMMAND NAME [--home ...]`` (further options below it follow)."""

    def decorate(f: Callable[..., None]) -> click.Command:
        f = click.option('--home', default=None, help=_HOME_HELP)(f)
        return endpoint.command(command)(click.argument('name')(f))

    return decorate


def _listener(address: str, port: str, default: str, what: str) -> Callable[[_F], _F]:
    """The options ``address`` (default ``default``) and ``port`` (default 0: a free one)
    of the listener ``what`` (``'Client'``, ``'Peer'``)."""

    def decorate(f: _F) -> _F:
        help_port = f'{what} listener port (0: free).'
        f = click.option(port, default=0, show_default=True, help=help_port)(f)
        help_address = f'{what} listener address.'
        return click.option(address, default=default, show_default=True, help=help_address)(f)

    return decorate


def _split_list(_ctx: click.Context, _param: click.Parameter, value: str) -> list[str]:
    return [p.strip() for p in value.split(',') if p.strip()]


def _preferences(flag: str, default: str, help: str) -> Callable[[_F], _F]:
    """An option of comma-separated choices in order of preference (the command gets
    them as a list)."""
    return click.option(flag, default=default, show_default=True, callback=_split_list, help=help)


@click.group(context_settings={'help_option_names': ['-h', '--help']})
def endpoint() -> None:
    """Object stores at each site you work on, peered across firewalls and NATs.

    Each site runs an endpoint; clients there use EndpointConnector([...names or UUIDs])
    and reach objects of every site through it. Endpoints of one user peer through the
    user's relay (see `tether relay --help`): directly when one side is reachable, by UDP
    hole punching through cone NATs, or relayed when both sit behind symmetric NATs.

    \b
    Examples:
      tether endpoint configure site-a --relay relay.example.org:8700 \\
          --relay-ca relay.pem --relay-token-file alice.token
      tether endpoint start site-a
      tether endpoint list --json
      tether endpoint test site-a --remote site-b
      tether endpoint stop site-a
    """


@endpoint.command('configure')
@click.argument('name')
@_listener('--host', '--port', '127.0.0.1', 'Client')
@click.option('--relay', 'relay_address', default=None, help='Relay address host:port.')
@click.option('--relay-ca', default=None, help='PEM the relay certificate must chain to.')
@click.option('--relay-hostname', default=None, help='Name checked against the relay cert.')
@click.option(
    '--relay-token-file',
    default=None,
    type=click.Path(dir_okay=False, exists=True),
    help='File holding your relay token (copied into the endpoint folder, mode 0600; '
    'or set $TETHER_RELAY_TOKEN when starting).',
)
@click.option('--relay-insecure', is_flag=True, help='No TLS to the relay (loopback tests).')
@_listener('--peer-bind', '--peer-port', '0.0.0.0', 'Peer')
@click.option(
    '--advertise',
    multiple=True,
    help='host:port other endpoints can dial directly (repeat; e.g. a NAT port forward '
    'to --peer-port). Without it this endpoint is not dialled directly.',
)
@_preferences(
    '--paths',
    'direct,punched,relayed',
    'Paths this endpoint may use to open peerings, in order of preference.',
)
@_preferences(
    '--punch',
    'tcp,udp',
    'How to punch through cone NATs: tcp (simultaneous open, then TLS), udp (then QUIC).',
)
@click.option(
    '--warm-up',
    default='4MiB',
    show_default=True,
    help='Bytes each new peer channel carries each way before its first request (0: none).',
)
@click.option(
    '--own-channels',
    default=16,
    show_default=True,
    type=click.IntRange(0, 1024),
    help='Client connections that may each hold a channel of their own to one peer (0: none).',
)
@click.option(
    '--keepalive',
    default=1.0,
    show_default=True,
    type=click.FloatRange(0, 600, min_open=True),
    help='Seconds between keepalives on peer links; a peer silent for three is dead.',
)
@click.option('--memory', default='1GB', show_default=True, help='Memory budget for objects.')
@click.option('--persist', is_flag=True, help='Keep objects on disk across restarts.')
@click.option('--home', default=None, help=_HOME_HELP)
@click.option('--json', 'as_json', is_flag=True, help='Print JSON for scripts.')
@_metrics_options
def _configure(  # noqa: PLR0917
    name: str,
    host: str,
    port: int,
    relay_address: str | None,
    relay_ca: str | None,
    relay_hostname: str | None,
    relay_token_file: str | None,
    relay_insecure: bool,
    peer_bind: str,
    peer_port: int,
    advertise: tuple[str, ...],
    paths: list[str],
    punch: list[str],
    warm_up: str,
    own_channels: int,
    keepalive: float,
    memory: str,
    persist: bool,
    home: str | None,
    as_json: bool,
    metrics: MetricsOptions,
) -> None:
    """Configure a new endpoint NAME (a UUID, a client token and a peer identity)."""
    from tether._serve.site import SiteConfig

    token = Path(relay_token_file).read_text() if relay_token_file else None
    with _failing():
        config = SiteConfig.create(
            name,
            _home(home),
            relay_token=token,
            host=host,
            port=port,
            relay={
                'address': relay_address,
                'ca_file': str(Path(relay_ca).resolve()) if relay_ca else None,
                'server_hostname': relay_hostname,
                'insecure': relay_insecure,
            },
            peering={
                'bind': peer_bind,
                'port': peer_port,
                'advertise': list(advertise),
                'paths': paths,
                'punch': punch,
                'warm_up': warm_up,
                'own_channels': own_channels,
                'keepalive': keepalive,
            },
            storage={'memory': memory, 'persist': persist},
            metrics=metrics.model_dump(),
        )
    folder = config.folder(_home(home))
    if as_json:
        click.echo(json.dumps({'name': name, 'uuid': config.uuid, 'folder': str(folder)}))
        return
    click.echo(f'configured endpoint {name} <{config.uuid}>')
    click.echo(f'configuration and log folder: {folder}')
    click.echo(f'start it with: tether endpoint start {name}')


@endpoint.command('start')
@click.argument('name')
@click.option('--foreground', is_flag=True, help='Stay attached (log to stderr).')
@click.option('--home', default=None, help=_HOME_HELP)
def _start(name: str, foreground: bool, home: str | None) -> None:
    """Start endpoint NAME (daemonized, with a PID file and a log in its folder)."""
    from tether.endpoint._daemon import run_foreground, start_endpoint

    with _failing():
        if foreground:
            run_foreground(name, home)
            return
        state = start_endpoint(name, _home(home))
    click.echo(
        f'endpoint {state["name"]} <{state["uuid"]}> started (pid {state["pid"]}, clients on '
        f'{state["host"]}:{state["port"]})'
    )
    relay = state.get('relay')
    if relay is not None and not relay.get('connected'):
        # It runs (its local clients are served), but no peer can be reached: say so.
        click.echo(
            f'Warning: its relay {relay["address"]} is unreachable ({relay.get("error")}); '
            'it serves local clients and keeps trying, but reaches no other endpoint '
            'until it registers (see `tether endpoint list`)',
            err=True,
        )


@_on_endpoint('stop')
def _stop(name: str, home: str | None) -> None:
    """Stop endpoint NAME (its objects are lost unless it persists them)."""
    from tether.endpoint._daemon import stop_endpoint

    with _failing():
        gone = stop_endpoint(name, _home(home))
    if not gone:
        raise click.ClickException(f'endpoint {name} did not stop')
    click.echo(f'endpoint {name} stopped')


@endpoint.command('list')
@click.option('--home', default=None, help=_HOME_HELP)
@click.option('--json', 'as_json', is_flag=True, help='Print JSON (with each peer and its path).')
def _list(home: str | None, as_json: bool) -> None:
    """List configured endpoints, whether they run, and their peers."""
    from tether._serve.site import list_configs, read_state
    from tether.endpoint._daemon import endpoint_status
    from tether.exceptions import TetherError

    rows: list[dict[str, Any]] = []
    for config in list_configs(_home(home)):
        row: dict[str, Any] = {'name': config.name, 'uuid': config.uuid, 'running': False}
        if read_state(config.folder(_home(home))) is not None:
            try:
                row.update(endpoint_status(config.name, _home(home)))
                row['running'] = True
            except TetherError as e:
                row['error'] = str(e)
        rows.append(row)
    if as_json:
        click.echo(json.dumps(rows, indent=2))
        return
    if not rows:
        click.echo('no endpoints configured (tether endpoint configure NAME)')
    for row in rows:
        if not row['running']:
            state = 'stopped'
        elif row.get('health', 'ok') != 'ok':
            state = f'running ({row["health"]}; pid {row["pid"]}, {row["address"]})'
        else:
            state = f'running (pid {row["pid"]}, {row["address"]})'
        click.echo(f'{row["name"]:<20} {row["uuid"]}  {state}')
        relay = row.get('relay')
        if relay is not None and not relay.get('connected'):
            click.echo(f'    relay {relay["address"]}: {relay.get("error") or "not connected"}')
        for peer in row.get('peers', []):
            click.echo(f'    peer {peer["name"]:<16} {peer["path"]:<8} alive={peer["alive"]}')


@_on_endpoint('remove')
def _remove(name: str, home: str | None) -> None:
    """Remove endpoint NAME's configuration, identity and objects (stop it first)."""
    from tether._serve.site import find_config, read_state, remove_folder

    with _failing():
        config = find_config(name, _home(home))
    folder = config.folder(_home(home))
    if read_state(folder) is not None:
        raise click.ClickException(f'endpoint {name} is running: stop it first')
    remove_folder(folder)
    click.echo(f'removed endpoint {name} ({folder})')


@_on_endpoint('check-nat')
@click.option('--json', 'as_json', is_flag=True, help='Print JSON.')
def _check_nat(name: str, home: str | None, as_json: bool) -> None:
    """Report the NAT type the relay sees for running endpoint NAME.

    open: no NAT; cone: one public mapping for all destinations (hole punching works);
    symmetric: a mapping per destination (peerings with other NATed endpoints are
    relayed); blocked: no UDP reaches the relay.
    """
    from tether.endpoint._daemon import endpoint_status

    with _failing():
        info = endpoint_status(name, _home(home), check_nat=True)
    if as_json:
        click.echo(json.dumps(info))
        return
    click.echo(f'NAT type: {info["nat"]} (UDP mappings seen by the relay: {info["mappings"]})')


@endpoint.command('test')
@click.argument('name')
@click.option('--remote', required=True, help='Name or UUID of the remote endpoint.')
@click.option('--size', default='1MB', show_default=True, help='Size of the test object.')
@click.option('--home', default=None, help=_HOME_HELP)
@click.option('--json', 'as_json', is_flag=True, help='Print JSON.')
def _test(name: str, remote: str, size: str, home: str | None, as_json: bool) -> None:
    """Put an object at endpoint REMOTE through NAME, get it back, evict it, and time it."""
    from tether._serve.sizes import parse_size
    from tether.connectors.endpoint import EndpointConnector, EndpointKey
    from tether.endpoint._daemon import endpoint_status

    try:
        nbytes = parse_size(size)
    except ValueError as e:
        raise click.BadParameter(str(e)) from e
    data = os.urandom(nbytes)
    conn = EndpointConnector([name], home=home)
    key = EndpointKey(_uuid.uuid4().hex, remote)
    with _failing(), contextlib.closing(conn):
        t0 = time.perf_counter()
        conn.set(key, data)
        t1 = time.perf_counter()
        got = conn.get(key)
        t2 = time.perf_counter()
        conn.evict(key)
        peers = endpoint_status(name, _home(home))['peers']
    ok = got is not None and bytes(got) == data
    path = next((p['path'] for p in peers if remote in (p['name'], p['uuid'])), None)
    result: dict[str, Any] = {
        'ok': ok,
        'size': nbytes,
        'set_s': t1 - t0,
        'get_s': t2 - t1,
        'path': path,
    }
    if as_json:
        click.echo(json.dumps(result))
    else:
        click.echo(
            f'{"ok" if ok else "MISMATCH"}: {nbytes} bytes to {remote} and back over the '
            f'{path} path: set {result["set_s"] * 1e3:.1f} ms, get {result["get_s"] * 1e3:.1f} ms'
        )
    if not ok:
        raise click.ClickException('the object came back different')
