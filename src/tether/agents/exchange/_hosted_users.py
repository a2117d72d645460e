"""The hosted exchange's users file: names, token hashes and per-user limits (TOML).

```toml
[defaults]
max_mailboxes = 1000

[users.alice]
token_sha256 = "..."      # written by `tether agents exchange add-user`
max_message_bytes = 65536 # any limit may be set per user
```

Tokens are stored as SHA-256 hashes only; the token itself is printed once.
"""

from __future__ import annotations

import dataclasses
import hashlib
import hmac
import re
import secrets
import tomllib
from pathlib import Path
from typing import Any

from tether.exceptions import ConfigError, InvalidArgumentError

__all__ = ['UserLimits', 'UserRecord', 'add_user', 'hash_token', 'load_users']

_NAME = re.compile(r'^[A-Za-z0-9][A-Za-z0-9_.@-]{0,63}$')


@dataclasses.dataclass(frozen=True)
class UserLimits:
    """What one user of a hosted exchange may use.

    Attributes:
        max_mailboxes: Active mailboxes (agents and clients) the user may own at once;
            registering one more fails with a clear error.
        max_message_bytes: Largest message (envelope) the user may send; a larger one
            fails with :class:`~tether.exceptions.FrameTooLargeError` before it is sent.
        messages_per_second: Sustained rate of the user's messages (``None``: no limit);
            beyond it, the sender waits (backpressure), it does not fail.
        burst: Messages the user may send at once above the rate.
        max_queued_bytes: Bytes that may wait in one of the user's mailboxes while its
            agent is away; sending more fails with a clear error.
        max_connections: Connections (client processes) the user may hold open at once;
            one more is refused with a clear error.
    """

    max_mailboxes: int = 1000
    max_message_bytes: int = 1 << 20
    messages_per_second: float | None = None
    burst: int = 100
    max_queued_bytes: int = 64 << 20
    max_connections: int = 64

    def __post_init__(self) -> None:
        names = (
            'max_mailboxes',
            'max_message_bytes',
            'burst',
            'max_queued_bytes',
            'max_connections',
        )
        for name in names:
            if getattr(self, name) < 1:
                raise InvalidArgumentError(f'{name} must be at least 1, got {getattr(self, name)}')
        if self.messages_per_second is not None and self.messages_per_second <= 0:
            raise InvalidArgumentError('messages_per_second must be positive (or None)')


@dataclasses.dataclass(frozen=True)
class UserRecord:
    """A user: the SHA-256 of their token and their limits."""

    name: str
    token_sha256: str
    limits: UserLimits = UserLimits()


def hash_token(token: str) -> str:
    """The SHA-256 (hex) a users file keeps of a token."""
    return hashlib.sha256(token.encode()).hexdigest()


def find_user(users: dict[str, UserRecord], token: str) -> UserRecord | None:
    """The user whose token this is (compared in constant time)."""
    digest = hash_token(token)
    found = None
    for record in users.values():
        if hmac.compare_digest(record.token_sha256, digest):
            found = record
    return found


_LIMIT_FIELDS = {f.name for f in dataclasses.fields(UserLimits)}


def _limits(raw: dict[str, Any], base: UserLimits, where: str) -> UserLimits:
    unknown = set(raw) - _LIMIT_FIELDS
    if unknown:
        raise ConfigError(
            f'{where}: unknown limit(s) {sorted(unknown)}; known: {sorted(_LIMIT_FIELDS)}'
        )
    try:
        return dataclasses.replace(base, **raw)
    except (TypeError, ValueError) as e:
        raise ConfigError(f'{where}: {e}') from e


def load_users(path: str | Path) -> dict[str, UserRecord]:
    """Read a users file.

    Raises:
        ConfigError: if the file cannot be read or is invalid.
    """
    try:
        data = tomllib.loads(Path(path).read_text())
    except (OSError, ValueError) as e:
        raise ConfigError(f'cannot read the users file {path}: {e}') from e
    defaults = _limits(data.get('defaults', {}), UserLimits(), f'{path} [defaults]')
    users: dict[str, UserRecord] = {}
    for name, raw in data.get('users', {}).items():
        if not isinstance(raw, dict) or not isinstance(raw.get('token_sha256'), str):
            raise ConfigError(f'{path}: user {name!r} has no token_sha256')
        fields = dict(raw)
        digest = fields.pop('token_sha256')
        users[name] = UserRecord(name, digest, _limits(fields, defaults, f'{path} user {name!r}'))
    return users


def add_user(path: str | Path, name: str, **limits: Any) -> str:
    """Add a user (or give an existing one a new token) and return the new token.

    Raises:
        InvalidArgumentError: for a name that is not ``[A-Za-z0-9][A-Za-z0-9_.@-]*``.
    """
    import tomli_w

    from tether._serve.tls import write_private

    if not _NAME.match(name):
        raise InvalidArgumentError(f'user name {name!r} must match {_NAME.pattern}')
    path = Path(path)
    data: dict[str, Any] = tomllib.loads(path.read_text()) if path.exists() else {}
    token = secrets.token_urlsafe(32)
    entry = dict(data.setdefault('users', {}).get(name, {}))
    entry.update({k: v for k, v in limits.items() if v is not None})
    _limits({k: v for k, v in entry.items() if k != 'token_sha256'}, UserLimits(), name)
    entry['token_sha256'] = hash_token(token)
    data['users'][name] = entry
    write_private(path, tomli_w.dumps(data))
    return token
