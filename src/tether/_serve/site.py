"""Endpoint configuration: one folder per endpoint under ``$TETHER_HOME/endpoints``.

```
$TETHER_HOME/endpoints/<name>/
    endpoint.toml    what the user configured (no secrets)
    client.token     the token local clients authenticate with (0600)
    relay.token      the user's relay token, if any (0600)
    peer.pem, peer.key   the endpoint's identity for peer channels (key 0600)
    state.json       pid, ports and socket of the running endpoint (0600)
    endpoint.sock    the running endpoint's Unix socket for clients on its host (0600)
    endpoint.log     the log of a daemonized endpoint
    data/            persisted objects (``storage.persist = true``)
```
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import secrets
import shutil
import tomllib
import uuid as _uuid
from pathlib import Path
from typing import Any, Literal

import tomli_w
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from tether._serve.metrics import MetricsOptions
from tether._serve.tls import make_self_signed, write_private
from tether.exceptions import ConfigError, EndpointError

__all__ = [
    'PATHS',
    'PeeringSettings',
    'RelaySettings',
    'SiteConfig',
    'StorageSettings',
    'endpoint_dir',
    'find_config',
    'list_configs',
    'read_state',
    'tether_home',
]

PATHS = ('direct', 'punched', 'relayed')
PathName = Literal['direct', 'punched', 'relayed']
PunchName = Literal['tcp', 'udp']
_NAME = re.compile(r'^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$')


def _all_paths() -> list[PathName]:
    return ['direct', 'punched', 'relayed']


def _all_punches() -> list[PunchName]:
    return ['tcp', 'udp']


def tether_home() -> Path:
    """``$TETHER_HOME``, else ``$XDG_DATA_HOME/tether``, else ``~/.local/share/tether``."""
    env = os.environ.get('TETHER_HOME')
    if env:
        return Path(env)
    xdg = os.environ.get('XDG_DATA_HOME')
    return (Path(xdg) if xdg else Path.home() / '.local' / 'share') / 'tether'


def endpoint_dir(name: str, home: Path | None = None) -> Path:
    """The folder of endpoint ``name``."""
    return (home or tether_home()) / 'endpoints' / name


class RelaySettings(BaseModel):
    """How the endpoint reaches its relay.

    Attributes:
        address: ``host:port`` of the relay's control channel (``None``: no relay, so no
            peers; the endpoint serves local clients only).
        ca_file: PEM file of the certificate(s) the relay's certificate must chain to
            (a self-hosted relay's own certificate works); ``None``: the system's.
        server_hostname: Name checked against the relay's certificate (default: the
            host of ``address``).
        insecure: Talk to the relay without TLS (tests on loopback only).
        retry_max: Longest wait, in seconds, between two attempts to register while the
            relay cannot be reached (``5.0``): the wait starts at 0.5 s (at most this)
            and doubles after each failed attempt up to this.
    """

    model_config = ConfigDict(extra='forbid')

    address: str | None = None
    ca_file: str | None = None
    server_hostname: str | None = None
    insecure: bool = False
    retry_max: float = Field(default=5.0, gt=0, le=3600)

    @field_validator('address')
    @classmethod
    def _host_port(cls, value: str | None) -> str | None:
        if value is not None:
            host, _, port = value.rpartition(':')
            if not host or not port.isdigit():
                raise ValueError(f'relay address must be host:port, got {value!r}')
        return value

    def host_port(self) -> tuple[str, int]:
        """The relay's ``(host, port)``."""
        assert self.address is not None
        host, _, port = self.address.rpartition(':')
        return host.strip('[]'), int(port)


class PeeringSettings(BaseModel):
    """How other endpoints reach this one.

    Attributes:
        bind: Address of the direct-path listener.
        port: Its port (0: a free port).
        advertise: ``host:port`` addresses other endpoints can dial directly (a public
            address, or a port forward of the site's NAT to ``port``). Empty: this
            endpoint is not directly reachable, so peers punch or relay.
        paths: Paths this endpoint may use when it opens a peering, in order of
            preference (``direct``, ``punched``, ``relayed``).
        punch: How it punches through cone NATs when it opens a peering, in order:
            ``tcp`` (a simultaneous TCP open, then TLS: kernel TCP speed) and ``udp``
            (UDP hole punching, then QUIC).
        warm_up: Bytes each new direct or punched channel it opens carries each way
            before its first request (``'4MiB'``; ``0``: none; at most 64 MiB), so that
            the kernel's congestion control knows the path's real rate from the start.
            Relayed channels carry none.
        own_channels: Client connections that may each hold a channel of their own to
            one peer (``16``; ``0``: none): such a connection's requests for that peer
            go to it byte for byte, with nothing decoded on the way (direct and relayed
            paths).
        keepalive: Seconds between keepalives on a peer link (``1.0``). A link that
            hears nothing from the peer for three of them is dead: its requests fail
            over at once instead of waiting for a timeout (QUIC's idle timeout on the
            punched path; on TCP channels, kernel keepalives and a limit on how long
            sent data may go unacknowledged, which also catch a peer host that vanished
            without closing its connections).
    """

    model_config = ConfigDict(extra='forbid')

    bind: str = '0.0.0.0'
    port: int = Field(default=0, ge=0, le=65535)
    advertise: list[str] = Field(default_factory=list)
    paths: list[PathName] = Field(default_factory=_all_paths)
    punch: list[PunchName] = Field(default_factory=_all_punches)
    warm_up: str | int = '4MiB'
    own_channels: int = Field(default=16, ge=0, le=1024)
    keepalive: float = Field(default=1.0, gt=0, le=600)

    @field_validator('warm_up')
    @classmethod
    def _check_warm_up(cls, value: str | int) -> str | int:
        from tether._serve.codes import WARM_UP_MAX
        from tether._serve.sizes import parse_size

        if not 0 <= parse_size(value) <= WARM_UP_MAX:
            raise ValueError(f'warm_up must be 0 to 64MiB, got {value!r}')
        return value


class StorageSettings(BaseModel):
    """Where objects live.

    Attributes:
        memory: Memory budget (``'4GB'``); least recently used objects spill to disk.
        persist: Keep every object on disk too, so a restarted endpoint still has them.
        max_object: Largest object accepted from a client or a peer.
    """

    model_config = ConfigDict(extra='forbid')

    memory: str = '1GB'
    persist: bool = False
    max_object: str = '16GiB'


class SiteConfig(BaseModel):
    """One data site's endpoint: a UUID, a name, where clients reach it, its relay and
    storage (``tether.endpoint.EndpointConfig`` is the same class, under its old name)."""

    model_config = ConfigDict(extra='forbid')

    name: str
    uuid: str
    host: str = '127.0.0.1'
    port: int = Field(default=0, ge=0, le=65535)
    relay: RelaySettings = Field(default_factory=RelaySettings)
    peering: PeeringSettings = Field(default_factory=PeeringSettings)
    storage: StorageSettings = Field(default_factory=StorageSettings)
    metrics: MetricsOptions = Field(default_factory=MetricsOptions)

    @field_validator('name')
    @classmethod
    def _valid_name(cls, value: str) -> str:
        if not _NAME.match(value):
            raise ValueError(
                f'endpoint name {value!r}: use letters, digits, ".", "_" and "-" (64 at most)'
            )
        return value

    # Files -----------------------------------------------------------------------------

    def folder(self, home: Path | None = None) -> Path:
        """This endpoint's folder."""
        return endpoint_dir(self.name, home)

    def write(self, home: Path | None = None) -> Path:
        """Write ``endpoint.toml`` (no secrets in it) and return its path."""
        path = self.folder(home) / 'endpoint.toml'
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        data = self.model_dump(exclude_none=True)
        path.write_text(tomli_w.dumps(data))
        return path

    @classmethod
    def read(cls, folder: Path) -> SiteConfig:
        """Read ``folder/endpoint.toml``.

        Raises:
            ConfigError: if it cannot be read or is invalid.
        """
        path = folder / 'endpoint.toml'
        try:
            return cls.model_validate(tomllib.loads(path.read_text()))
        except (OSError, tomllib.TOMLDecodeError, ValidationError) as e:
            raise ConfigError(f'cannot read endpoint configuration {path}: {e}') from e

    @classmethod
    def create(
        cls,
        name: str,
        home: Path | None = None,
        *,
        relay_token: str | None = None,
        **settings: Any,
    ) -> SiteConfig:
        """Configure a new endpoint: its folder, UUID, client token and identity.

        Raises:
            EndpointError: if an endpoint of that name exists.
            ConfigError: if a setting is invalid.
        """
        try:
            config = cls(name=name, uuid=str(_uuid.uuid4()), **settings)
        except ValidationError as e:
            raise ConfigError(f'invalid endpoint settings: {e}') from e
        folder = config.folder(home)
        if (folder / 'endpoint.toml').exists():
            raise EndpointError(
                f'endpoint {name!r} is already configured in {folder}: remove it first '
                f'(tether endpoint remove {name}) or pick another name',
            )
        folder.mkdir(parents=True, exist_ok=True, mode=0o700)
        write_private(folder / 'client.token', secrets.token_hex(32) + '\n')
        cert, key = make_self_signed(f'{config.uuid}.endpoint.tether')
        (folder / 'peer.pem').write_text(cert)
        write_private(folder / 'peer.key', key)
        if relay_token:
            write_private(folder / 'relay.token', relay_token.strip() + '\n')
        config.write(home)
        return config

    def client_token(self, home: Path | None = None) -> str:
        """The token local clients authenticate with."""
        return _read_secret(self.folder(home) / 'client.token', 'client token')

    def relay_token(self, home: Path | None = None) -> str | None:
        """The relay token: ``$TETHER_RELAY_TOKEN``, else ``relay.token``, else ``None``."""
        env = os.environ.get('TETHER_RELAY_TOKEN')
        if env:
            return env
        path = self.folder(home) / 'relay.token'
        return _read_secret(path, 'relay token') if path.exists() else None


def _read_secret(path: Path, what: str) -> str:
    try:
        return path.read_text().strip()
    except OSError as e:
        raise EndpointError(f'cannot read the {what} {path}: {e}') from e


def list_configs(home: Path | None = None) -> list[SiteConfig]:
    """Every configured endpoint under ``home``, by name."""
    root = (home or tether_home()) / 'endpoints'
    if not root.is_dir():
        return []
    out = []
    for folder in sorted(root.iterdir()):
        if (folder / 'endpoint.toml').is_file():
            with contextlib.suppress(ConfigError):
                out.append(SiteConfig.read(folder))
    return out


def find_config(name_or_uuid: str, home: Path | None = None) -> SiteConfig:
    """The endpoint configured under this name or UUID.

    Raises:
        EndpointError: if there is none.
    """
    for config in list_configs(home):
        if name_or_uuid in (config.name, config.uuid):
            return config
    raise EndpointError(
        f'no endpoint {name_or_uuid!r} is configured in {(home or tether_home()) / "endpoints"}'
        f': create it with `tether endpoint configure {name_or_uuid}`',
    )


def read_state(folder: Path) -> dict[str, Any] | None:
    """The running endpoint's ``state.json`` if its process is alive, else ``None``."""
    from tether._serve.state import pid_alive

    try:
        state: dict[str, Any] = json.loads((folder / 'state.json').read_text())
    except (OSError, ValueError):
        return None
    if not isinstance(state, dict) or not pid_alive(int(state.get('pid', 0))):
        return None
    return state


def write_state(folder: Path, state: dict[str, Any]) -> None:
    """Publish the running endpoint's state (0600)."""
    tmp = folder / f'.state.{os.getpid()}.tmp'
    write_private(tmp, json.dumps(state))
    os.replace(tmp, folder / 'state.json')


def remove_folder(folder: Path) -> None:
    """Delete an endpoint's folder."""
    shutil.rmtree(folder, ignore_errors=True)
