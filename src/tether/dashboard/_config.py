"""What a dashboard watches: :class:`DashboardConfig` (a TOML file or options)."""

from __future__ import annotations

import os
import pathlib
import tomllib

import pydantic

from tether.exceptions import ConfigError

__all__ = ['DashboardConfig', 'MetricsTarget', 'load_config']


class MetricsTarget(pydantic.BaseModel):
    """A server's Prometheus endpoint (``[[metrics]]`` in the file, ``--metrics``).

    Attributes:
        url: Its ``/metrics`` URL (``http://127.0.0.1:9101/metrics``; a URL without a
            path gets ``/metrics``).
        name: How the pages call it (default: the URL's host and port).
        token_file: A file holding the bearer token the endpoint asks for.
    """

    model_config = pydantic.ConfigDict(extra='forbid')

    url: str
    name: str = ''
    token_file: str | None = None

    @pydantic.model_validator(mode='after')
    def _defaults(self) -> MetricsTarget:
        if not self.url.startswith(('http://', 'https://')):
            raise ValueError(f'a metrics URL starts with http:// or https://, not {self.url!r}')
        rest = self.url.split('://', 1)[1]
        if '/' not in rest:
            self.url += '/metrics'
        if not self.name:
            self.name = rest.split('/', 1)[0]
        return self

    def token(self) -> str | None:
        """The bearer token (read from :attr:`token_file` at each call)."""
        if self.token_file is None:
            return None
        return pathlib.Path(self.token_file).expanduser().read_text().strip()


class DashboardConfig(pydantic.BaseModel):
    """What one dashboard shows, and where it listens.

    Attributes:
        host: Address to bind (loopback by default; anything else needs ``key``).
        port: Port (0: any free one).
        key: The access key every browser must present once (``?key=``, then a cookie):
            ``None`` makes a random one at start (printed with the URL); ``''`` turns it
            off (loopback only).
        faas_url: A function service to read endpoints and tasks from.
        faas_token: The user's token for it (default: ``$TETHER_FAAS_TOKEN``).
        faas_token_file: A file holding that token instead.
        metrics: Prometheus endpoints of node servers, endpoints, relays, faas services
            and endpoint agents, hosted exchanges.
        steer_dirs: Folders of steering campaigns' result files (``*.jsonl``, one
            :func:`tether.dashboard.steer_record` per line).
        bench_dirs: Folders of ``tether bench`` run directories (``runs/``).
        refresh_s: Seconds between scrapes of the metrics.
        page_refresh_s: Seconds between reloads of a live page (0: never).
        history: Scrapes of each server kept for the charts.
    """

    model_config = pydantic.ConfigDict(extra='forbid')

    host: str = '127.0.0.1'
    port: int = pydantic.Field(default=8765, ge=0, le=65535)
    key: str | None = None
    faas_url: str | None = None
    faas_token: str | None = pydantic.Field(default=None, repr=False)
    faas_token_file: str | None = None
    metrics: list[MetricsTarget] = pydantic.Field(default_factory=list)
    steer_dirs: list[str] = pydantic.Field(default_factory=list)
    bench_dirs: list[str] = pydantic.Field(default_factory=list)
    refresh_s: float = pydantic.Field(default=5.0, ge=0.2)
    page_refresh_s: float = pydantic.Field(default=10.0, ge=0)
    history: int = pydantic.Field(default=360, ge=2, le=100_000)

    @pydantic.model_validator(mode='after')
    def _open_needs_loopback(self) -> DashboardConfig:
        if self.key == '' and self.host not in ('127.0.0.1', '::1', 'localhost'):
            raise ValueError(
                f'a dashboard on {self.host} (not loopback) needs an access key: '
                'leave key unset for a random one'
            )
        names = [t.name for t in self.metrics]
        if len(set(names)) != len(names):
            raise ValueError(f'two metrics targets have the same name: {names}')
        return self

    def user_token(self) -> str | None:
        """The token for :attr:`faas_url`."""
        if self.faas_token:
            return self.faas_token
        if self.faas_token_file:
            return pathlib.Path(self.faas_token_file).expanduser().read_text().strip()
        return os.environ.get('TETHER_FAAS_TOKEN') or None


def load_config(path: str | os.PathLike[str] | None, **options: object) -> DashboardConfig:
    """A TOML file's ``[dashboard]`` table (or the whole file), then ``options`` over it
    (``None`` values and empty lists left out).

    Raises:
        ConfigError: the file cannot be read or is not a valid configuration.
    """
    data: dict[str, object] = {}
    if path is not None:
        try:
            with open(path, 'rb') as f:
                raw = tomllib.load(f)
        except (OSError, tomllib.TOMLDecodeError) as e:
            raise ConfigError(f'cannot read the dashboard configuration {path}: {e}') from e
        table = raw.get('dashboard', raw)
        if not isinstance(table, dict):
            raise ConfigError(f'{path}: [dashboard] must be a table')
        data.update(table)
    for name, value in options.items():
        if value is None or value in ([], ()):
            continue
        if isinstance(value, list | tuple) and isinstance(data.get(name), list):
            data[name] = [*data[name], *value]  # type: ignore[misc]
        else:
            data[name] = list(value) if isinstance(value, tuple) else value
    try:
        return DashboardConfig.model_validate(data)
    except pydantic.ValidationError as e:
        raise ConfigError(f'invalid dashboard configuration: {e}') from e
