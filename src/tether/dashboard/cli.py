"""``tether dashboard``: serve the dashboard (``docs/observability.md``)."""

from __future__ import annotations

import click

from tether._cli_options import config_option

__all__ = ['dashboard']


@click.command('dashboard')
@config_option('config_file', 'TOML file ([dashboard] table) of what to watch.')
@click.option('--host', default=None, help='Address to bind (default 127.0.0.1).')
@click.option('--port', type=int, default=None, help='Port (default 8765; 0: any free one).')
@click.option('--faas-url', default=None, help='A function service to read.')
@click.option(
    '--faas-token-file',
    default=None,
    help='File holding your token for it (default: $TETHER_FAAS_TOKEN).',
)
@click.option(
    '--metrics',
    'metrics',
    multiple=True,
    metavar='URL',
    help="A server's Prometheus endpoint (repeatable).",
)
@click.option(
    '--steer',
    'steer_dirs',
    multiple=True,
    metavar='DIR',
    help="A steering campaign's folder of result files (repeatable).",
)
@click.option(
    '--bench',
    'bench_dirs',
    multiple=True,
    metavar='DIR',
    help='A folder of tether bench run directories (repeatable).',
)
@click.option(
    '--refresh',
    'refresh_s',
    type=float,
    default=None,
    help='Seconds between scrapes and page reloads (default 5).',
)
@click.option(
    '--no-key',
    is_flag=True,
    help='No access key (only on loopback): anyone on this host can read it.',
)
def dashboard(  # noqa: PLR0917
    config_file: str | None,
    host: str | None,
    port: int | None,
    faas_url: str | None,
    faas_token_file: str | None,
    metrics: tuple[str, ...],
    steer_dirs: tuple[str, ...],
    bench_dirs: tuple[str, ...],
    refresh_s: float | None,
    no_key: bool,
) -> None:
    """Serve live pages of your servers, function endpoints and tasks, steering
    campaigns and bench runs (on 127.0.0.1 by default, behind an access key)."""
    from tether.dashboard import load_config, serve
    from tether.exceptions import ConfigError

    try:
        config = load_config(
            config_file,
            host=host,
            port=port,
            faas_url=faas_url,
            faas_token_file=faas_token_file,
            metrics=[{'url': u} for u in metrics],
            steer_dirs=steer_dirs,
            bench_dirs=bench_dirs,
            refresh_s=refresh_s,
            key='' if no_key else None,
        )
    except ConfigError as e:
        raise click.ClickException(str(e)) from e

    def ready(url: str) -> None:
        click.echo(f'tether dashboard: {url}', err=True)

    try:
        serve(config, ready)
    except OSError as e:
        raise click.ClickException(f'cannot listen on {config.host}:{config.port}: {e}') from e
    except KeyboardInterrupt:
        pass
