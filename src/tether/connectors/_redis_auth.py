"""Passwords, URLs and prefixes of the Redis connector (helpers of ``connectors.redis``).

Credentials are never part of a connector's config: a connector rebuilt from a config
finds its password in the environment variable or secret file the config names, else in a
connector of this process that was given the password for the same server and user.
"""

from __future__ import annotations

import os
import threading
import urllib.parse

from tether.exceptions import ConfigError

__all__ = ['ServerId', 'check_clear_prefix', 'redact_url', 'resolve_password']

ServerId = tuple[str, int, int, str | None]
"""A server and user a password belongs to: ``(host, port, db, username)``."""

# Passwords given to connectors of this process: a connector rebuilt here from a config
# (which never holds the password) finds it again.
_passwords: dict[ServerId, str] = {}
_passwords_lock = threading.Lock()


def _new_lock_after_fork() -> None:
    # A child forked while another thread held the lock must not inherit it held.
    global _passwords_lock
    _passwords_lock = threading.Lock()


os.register_at_fork(after_in_child=_new_lock_after_fork)


def resolve_password(
    server: ServerId,
    password: str | None,
    password_env: str | None,
    password_file: str | None,
) -> str | None:
    """The password: argument, else ``$password_env``, else the file, else remembered.

    Raises:
        ConfigError: the file cannot be read, or ``password_env`` names an unset variable
            and no connector of this process was given the password.
    """
    if password is not None:
        with _passwords_lock:
            _passwords[server] = password
        return password
    if password_env:
        value = os.environ.get(password_env)
        if value:
            return value
    if password_file:
        try:
            with open(password_file) as f:
                return f.read().strip()
        except OSError as e:
            raise ConfigError(f'cannot read the Redis password file {password_file!r}: {e}') from e
    with _passwords_lock:
        remembered = _passwords.get(server)
    if remembered is None and password_env:
        raise ConfigError(
            f'the Redis password for {server[0]}:{server[1]} is expected in '
            f'${password_env}, which is not set in this process',
        )
    return remembered


def redact_url(url: str) -> str:
    """``url`` with its password, if any, replaced by ``***``."""
    parts = urllib.parse.urlsplit(url)
    if parts.password is None:
        return url
    netloc = parts.netloc.rsplit('@', 1)[-1]
    user = f'{parts.username}:***@' if parts.username else ':***@'
    return urllib.parse.urlunsplit(parts._replace(netloc=user + netloc))


def check_clear_prefix(prefix: str) -> None:
    """Refuse to clear an empty prefix (every key of the database).

    Raises:
        ConfigError: ``prefix`` is empty.
    """
    if not prefix:
        raise ConfigError(
            'RedisConnector(clear=True) needs a non-empty prefix: clearing an empty prefix '
            "would delete every key of the database, other applications' keys included",
        )
