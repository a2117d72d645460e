"""The relay's configuration file (``relay.toml``), and the endpoint owners it keeps beside it."""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import json
import os
import tempfile
import tomllib
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from tether._serve.metrics import MetricsOptions
from tether.exceptions import ConfigError

__all__ = ['RelayConfig', 'RelayUser', 'hash_token', 'load_owners', 'save_owners']


def hash_token(token: str) -> str:
    """The SHA-256 (hex) that ``relay.toml`` stores instead of a user's token."""
    return hashlib.sha256(token.encode()).hexdigest()


class RelayUser(BaseModel):
    """One user of the relay: a name and the hash of their token."""

    model_config = ConfigDict(extra='forbid')

    name: str = Field(min_length=1, max_length=64)
    token_sha256: str = Field(pattern=r'^[0-9a-f]{64}$')


class RelayConfig(BaseModel):
    """What ``tether relay --config relay.toml`` reads.

    Attributes:
        host: Address to listen on.
        port: TCP port of the control channel (TLS; 0: a free port).
        data_port: TCP port of relayed data (0: a free port).
        udp_port: First of the two UDP ports used for NAT discovery (0: free ports).
        tls_cert: PEM certificate of the relay (required unless ``insecure``).
        tls_key: PEM private key of ``tls_cert``.
        insecure: Serve the control channel without TLS (tests on loopback only).
        users: Who may register endpoints, with the SHA-256 of their token.
        max_endpoints_per_user: Endpoints one user may have registered at once.
        max_tunnels_per_user: Relayed channels one user may have open at once.
        max_forwarded_bytes_per_user: Bytes the relay forwards for one user before it
            refuses more (counted since the relay started).
        tunnel_timeout: Seconds a ticket waits for its other side.
        handshake_timeout: Seconds a control connection may take from connecting to a
            successful ``REGISTER``; one still unregistered then is dropped. Until it
            registers, its frames are held to a 16 KiB header and 16 KiB of payload.
        max_message: Largest control message (header, and payloads) a registered
            endpoint may send, in bytes.
        memory_budget: Bytes of received control messages the relay holds at once, over
            every connection: a message's size claim is counted against it before any
            memory is reserved, and a claim that does not fit is refused (the
            connection is dropped with a ``too-large`` error).
        max_early_bytes: Bytes one side of a relayed channel may send before the other
            side joins (endpoints send at most a TLS ClientHello). The relay holds
            them, counted against the user's forwarded bytes as they arrive, and frees
            them when the side closes; a side that sends more is dropped.
        owners_file: JSON file where the relay keeps which user first registered each
            endpoint UUID (a UUID stays that user's, across restarts). Relative paths
            are relative to ``relay.toml``'s folder; default ``owners.json`` beside it
            (``None`` when the configuration is built in code: kept in memory only).
        max_uuids_per_user: Endpoint UUIDs one user may own (kept in ``owners_file``).
        metrics: The ``[metrics]`` table: where Prometheus metrics are served (default:
            nowhere); a relative ``token_file`` is relative to ``relay.toml``'s folder.
    """

    model_config = ConfigDict(extra='forbid')

    host: str = '0.0.0.0'
    port: int = Field(default=8700, ge=0, le=65535)
    data_port: int = Field(default=8701, ge=0, le=65535)
    udp_port: int = Field(default=8700, ge=0, le=65534)
    tls_cert: str | None = None
    tls_key: str | None = None
    insecure: bool = False
    users: list[RelayUser] = Field(default_factory=list)
    max_endpoints_per_user: int = Field(default=16, ge=1)
    max_tunnels_per_user: int = Field(default=64, ge=1)
    max_forwarded_bytes_per_user: int = Field(default=1 << 40, ge=0)
    tunnel_timeout: float = Field(default=15.0, gt=0)
    handshake_timeout: float = Field(default=10.0, gt=0)
    max_message: int = Field(default=256 * 1024, ge=16 * 1024, le=64 << 20)
    memory_budget: int = Field(default=64 << 20, ge=16 * 1024)
    max_early_bytes: int = Field(default=256 * 1024, ge=0)
    owners_file: str | None = None
    max_uuids_per_user: int = Field(default=1024, ge=1)
    metrics: MetricsOptions = Field(default_factory=MetricsOptions)

    @field_validator('users')
    @classmethod
    def _unique(cls, users: list[RelayUser]) -> list[RelayUser]:
        names = [u.name for u in users]
        if len(set(names)) != len(names):
            raise ValueError('user names must be unique')
        return users

    def user_of(self, token: object) -> str | None:
        """Return the name of the user whose token this is (constant time per user)."""
        if not isinstance(token, str) or not token:
            return None
        digest = hash_token(token)
        found = None
        for user in self.users:
            if hmac.compare_digest(user.token_sha256, digest):
                found = user.name
        return found

    @classmethod
    def read_toml(cls, path: str | Path) -> RelayConfig:
        """Read and validate a ``relay.toml``; relative paths are relative to its folder.

        Raises:
            ConfigError: the file cannot be read or is invalid.
        """
        path = Path(path)
        try:
            data = tomllib.loads(path.read_text())
            config = cls.model_validate(data)
        except (OSError, tomllib.TOMLDecodeError, ValidationError) as e:
            raise ConfigError(f'cannot read relay configuration {path}: {e}') from e
        if config.owners_file is None:
            config.owners_file = 'owners.json'
        for field in ('tls_cert', 'tls_key', 'owners_file'):
            value = getattr(config, field)
            if value is not None and not Path(value).is_absolute():
                setattr(config, field, str(path.parent / value))
        token = config.metrics.token_file
        if token is not None and not Path(token).is_absolute():
            config.metrics = config.metrics.model_copy(
                update={'token_file': str(path.parent / token)}
            )
        if not config.insecure and not (config.tls_cert and config.tls_key):
            raise ConfigError(
                f'{path}: the relay needs tls_cert and tls_key (or insecure = true on a '
                'trusted network)',
            )
        return config


def load_owners(path: str | None) -> dict[str, str]:
    """Which user owns each endpoint UUID, as kept in ``path`` (none yet: empty).

    Raises:
        ConfigError: the file exists but cannot be read (the relay must not start and
            forget who owns what).
    """
    if path is None:
        return {}
    try:
        data = json.loads(Path(path).read_text())
    except FileNotFoundError:
        return {}
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        raise ConfigError(f"cannot read the relay's endpoint owners from {path}: {e}") from e
    owners = data.get('owners') if isinstance(data, dict) else None
    if not isinstance(owners, dict) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in owners.items()
    ):
        raise ConfigError(
            f'{path} is not a relay owners file (expected {{"owners": {{uuid: user}}}}): '
            'restore it from a backup rather than delete it, or endpoint UUIDs may change hands'
        )
    return dict(owners)


def save_owners(path: str, owners: dict[str, str]) -> None:
    """Write ``owners`` to ``path`` atomically (mode 0600)."""
    folder = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(prefix='.owners-', dir=folder)
    try:
        with os.fdopen(fd, 'w') as f:
            json.dump({'owners': owners}, f, indent=1, sort_keys=True)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
