"""``tether relay --config relay.toml``: run the relay."""

from __future__ import annotations

import asyncio
import logging
import secrets
import sys

import click

from tether._cli_options import config_option

__all__ = ['relay']


@click.command(context_settings={'help_option_names': ['-h', '--help']})
@config_option(
    'config_path',
    'The relay.toml to serve with (ports, TLS certificate and key, users, limits).',
)
@click.option(
    '--new-user',
    default=None,
    metavar='NAME',
    help='Print a fresh token for a new user and the [[users]] entry to add to relay.toml.',
)
@click.option('-v', '--verbose', is_flag=True, help='Log every registration and peering.')
def relay(config_path: str | None, new_user: str | None, verbose: bool) -> None:
    """Run the relay that endpoints of each user peer through.

    The relay is the one publicly reachable piece: endpoints register with it using their
    user's token, find each other, exchange certificates and candidate addresses, and fall
    back to a channel spliced by the relay when both sit behind symmetric NATs. Each user
    sees and reaches only their own endpoints; relayed data stays encrypted end to end.

    \b
    relay.toml:
      host = "0.0.0.0"
      port = 8700            # control channel (TLS)
      data_port = 8701       # relayed channels
      udp_port = 8700        # NAT discovery (and udp_port + 1)
      tls_cert = "relay.pem"
      tls_key = "relay.key"
      owners_file = "owners.json"   # who first registered each endpoint UUID
      [[users]]
      name = "alice"
      token_sha256 = "..."   # from: tether relay --new-user alice
      [metrics]              # optional: Prometheus metrics (docs/observability.md)
      port = 9103
      token_file = "metrics.token"  # needed unless bind = "127.0.0.1" (the default)

    \b
    Examples:
      tether relay --new-user alice
      tether relay --config relay.toml
    """
    from tether.relay._config import RelayConfig, hash_token

    if new_user is not None:
        token = secrets.token_urlsafe(32)
        click.echo(f'token for {new_user} (give it to the user; it is not stored): {token}')
        click.echo(f'\n[[users]]\nname = "{new_user}"\ntoken_sha256 = "{hash_token(token)}"')
        return
    if config_path is None:
        raise click.UsageError('pass --config relay.toml (or --new-user NAME)')
    from tether._wire import run
    from tether.exceptions import ConfigError
    from tether.relay._server import RelayServer

    try:
        config = RelayConfig.read_toml(config_path)
    except ConfigError as e:
        raise click.ClickException(str(e)) from e
    logging.basicConfig(
        level=logging.INFO if verbose else logging.WARNING,
        format='%(asctime)s %(name)s %(levelname)s %(message)s',
        stream=sys.stderr,
    )
    logging.getLogger('tether.relay').setLevel(logging.INFO)
    try:
        server = RelayServer(config)
    except ConfigError as e:
        raise click.ClickException(str(e)) from e

    async def main() -> None:
        ready = asyncio.Event()
        task = asyncio.create_task(server.serve(ready))
        waiter = asyncio.create_task(ready.wait())
        await asyncio.wait({task, waiter}, return_when=asyncio.FIRST_COMPLETED)
        if not ready.is_set():
            waiter.cancel()
            await task  # it failed before serving: raise its error
            return
        host, port = server.address
        click.echo(
            f'relay listening on {host}:{port} (data port {server.data_port}, udp ports '
            f'{server.udp_ports}), {len(config.users)} users, '
            f'TLS {"off" if config.insecure else "on"}',
            err=True,
        )
        await task

    try:
        run(main())
    except OSError as e:
        raise click.ClickException(
            f'relay cannot listen on {config.host}:{config.port} (or its data or UDP ports '
            f'{config.data_port}, {config.udp_port}): {e.strerror or e}',
        ) from e
