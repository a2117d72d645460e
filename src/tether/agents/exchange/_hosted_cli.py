"""``tether agents exchange``: serve a hosted exchange, add its users."""

from __future__ import annotations

import contextlib
from typing import Any

import click

from tether._serve.metrics import MetricsOptions
from tether._serve.metrics import click_options as _metrics_options

__all__ = ['exchange']


@click.group()
def exchange() -> None:
    """A hosted exchange: many users' agents and clients over WebSocket."""


@exchange.command('serve')
@click.option('--users', 'users_file', required=True, help='The users file (TOML).')
@click.option('--host', default='127.0.0.1', show_default=True, help='Address to listen on.')
@click.option('--port', default=8700, show_default=True, help='Port (0: a free one).')
@click.option('--cert', default=None, help='TLS certificate (PEM): serve wss://.')
@click.option('--key', default=None, help="The certificate's private key (PEM).")
@_metrics_options
def serve_command(  # noqa: PLR0917 - click passes options by position
    users_file: str,
    host: str,
    port: int,
    cert: str | None,
    key: str | None,
    metrics: MetricsOptions,
) -> None:
    """Serve a hosted exchange until interrupted (prints its URL once listening)."""
    import threading

    from tether._serve.loop import run
    from tether.agents.exchange.hosted import HostedExchangeServer

    server = HostedExchangeServer(
        users_file, host=host, port=port, cert_file=cert, key_file=key, metrics=metrics
    )
    ready = threading.Event()

    def announce() -> None:
        ready.wait()
        click.echo(f'hosted exchange listening on {server.url}', nl=True)
        if server.metrics_address is not None:
            click.echo('metrics on http://{}:{}/metrics'.format(*server.metrics_address))

    threading.Thread(target=announce, daemon=True).start()
    with contextlib.suppress(KeyboardInterrupt):
        run(server.serve(ready))  # uvloop's loop when installed


@exchange.command('add-user')
@click.argument('name')
@click.option('--users', 'users_file', required=True, help='The users file (TOML).')
@click.option('--max-mailboxes', type=int, default=None)
@click.option('--max-message-bytes', type=int, default=None)
@click.option('--messages-per-second', type=float, default=None)
@click.option('--burst', type=int, default=None)
@click.option('--max-queued-bytes', type=int, default=None)
@click.option('--max-connections', type=int, default=None)
def add_user_command(name: str, users_file: str, **limits: Any) -> None:
    """Add a user (or give one a new token): prints the token, once (the file keeps its
    SHA-256 only)."""
    from tether.agents.exchange.hosted import add_user

    click.echo(add_user(users_file, name, **limits))  # limits: the options after --users
