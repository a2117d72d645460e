"""Per-user secret keys in private files (internal, shared by tether.stream and tether.steer).

A key file lives in ``$XDG_CONFIG_HOME/tether/`` (by default ``~/.config/tether/``). It is
created on first use with a random key (64 hex digits), mode 0600 in a 0700 directory,
written atomically (a temporary file linked into place, so processes racing to create it
all end up with the same key), and refused when it does not belong to the user, other
users can read or write it, or it sits in a folder that other users can write (they could
replace it by one holding a key they know). Every process of one user on a host (and on
hosts sharing the home directory) thereby shares the key without any configuration.

A key file named explicitly (``$TETHER_STREAM_KEY_FILE``, ``$TETHER_STEER_KEY_FILE``) may
be shared with a group (readable by it), but it is refused as well when anyone but its
owner can write it or the folder it is in (see :func:`read_named`).
"""

from __future__ import annotations

import contextlib
import os
import secrets
import stat
import tempfile
from pathlib import Path

from tether._atomic import write_and_replace
from tether.exceptions import ConfigError

__all__ = ['check_folder', 'config_dir', 'read_named', 'read_private', 'user_key', 'write_private']


def config_dir() -> Path:
    """tether's configuration directory: ``$XDG_CONFIG_HOME/tether``.

    ``$XDG_CONFIG_HOME`` defaults to ``~/.config`` (as the XDG base directory
    specification says, a relative value is ignored).
    """
    xdg = os.environ.get('XDG_CONFIG_HOME', '')
    base = Path(xdg) if xdg and os.path.isabs(xdg) else Path.home() / '.config'
    return base / 'tether'


def user_key(path: Path, *, what: str, instead: str) -> bytes:
    """Read the key file at ``path``, creating it (0600, atomically) with a random key.

    Args:
        path: The key file.
        what: What the key is, for error messages (``'stream key'``).
        instead: What to do instead when the file cannot be created, for the error.

    Raises:
        ConfigError: the file cannot be created or read, or is not private.
    """
    try:
        return read_private(path, what)
    except FileNotFoundError:
        pass
    try:
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        check_folder(path, what)  # before a key is written where others could swap it
        fd, tmp = tempfile.mkstemp(prefix=f'.{path.name}.', dir=path.parent)  # mode 0600
        try:
            with os.fdopen(fd, 'w') as f:
                f.write(secrets.token_hex(32) + '\n')
                f.flush()
                os.fsync(f.fileno())
            # Atomic, and never replaces a key that another process made meanwhile.
            with contextlib.suppress(FileExistsError):
                os.link(tmp, path)
        finally:
            os.unlink(tmp)
        return read_private(path, what)
    except OSError as e:
        raise ConfigError(f'cannot create the {what} file {path} ({e}): {instead}') from e


def read_private(path: Path, what: str) -> bytes:
    """Read a key file that must belong to the user and be private (mode 0600).

    Raises:
        FileNotFoundError: there is no such file.
        ConfigError: the file belongs to someone else, others may read or write it, or
            others may write the folder it is in.
    """
    fd = os.open(path, os.O_RDONLY | getattr(os, 'O_NOFOLLOW', 0))
    try:
        check_folder(path, what)
    except BaseException:
        os.close(fd)
        raise
    with os.fdopen(fd, 'rb') as f:
        st = os.fstat(f.fileno())
        if st.st_uid != os.getuid() or st.st_mode & 0o077:
            raise ConfigError(
                f'refusing the {what} file {path}: it must belong to you and be '
                f'readable by you only (mode 0600; it has {stat.filemode(st.st_mode)}, '
                f'owner uid {st.st_uid}). Fix it with `chmod 600 {path}`, or remove it to '
                'get a new key',
            )
        return f.read().strip()


def check_folder(path: Path, what: str) -> None:
    """Refuse a key file whose folder others may write.

    Whoever can write the folder can rename the key file away and put another in its
    place (or a link to one), so the file's own mode would not protect the key. The
    folder must belong to the user (or to root) and be writable by its owner only.

    Raises:
        ConfigError: the folder belongs to another user or its group or others may write
            it; or it cannot be examined.
    """
    folder = path.parent
    try:
        st = os.stat(folder)
    except OSError as e:
        raise ConfigError(f'cannot examine the folder of the {what} file {path}: {e}') from e
    if st.st_uid not in (os.getuid(), 0) or st.st_mode & 0o022:
        raise ConfigError(
            f'refusing the {what} file {path}: its folder {folder} can be written by others '
            f'({stat.filemode(st.st_mode)}, owner uid {st.st_uid}), who could replace the key. '
            f'Make the folder yours and writable by you only (`chmod go-w {folder}`), or '
            'keep the key file in another folder',
        )


def read_named(path: str | os.PathLike[str], what: str, env: str) -> bytes:
    """Read a key file named by the environment variable ``env`` (whitespace stripped).

    It may be readable by a group (a key shared between users), but neither the file
    nor its folder may be writable by anyone but their owners.

    Raises:
        ConfigError: the file cannot be read, or it or its folder may be written by others.
    """
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError as e:
        raise ConfigError(f'cannot read the {what} file {os.fspath(path)!r} (${env}): {e}') from e
    with os.fdopen(fd, 'rb') as f:
        st = os.fstat(f.fileno())
        if st.st_mode & 0o022:
            raise ConfigError(
                f'refusing the {what} file {os.fspath(path)!r} (${env}): others can write '
                f'it ({stat.filemode(st.st_mode)}), and could replace the key. Fix it with '
                f'`chmod go-w {os.fspath(path)}`',
            )
        check_folder(Path(os.path.abspath(path)), what)
        try:
            return f.read().strip()
        except OSError as e:
            raise ConfigError(
                f'cannot read the {what} file {os.fspath(path)!r} (${env}): {e}'
            ) from e


def write_private(path: str | os.PathLike[str], data: bytes) -> None:
    """Replace the file at ``path`` with ``data``, atomically, readable by its owner only.

    The bytes go to a temporary file (mode 0600) in the same directory, all of them
    (``os.write`` may write fewer than it is given), which then replaces ``path``.
    """
    path = os.fspath(path)
    tmp = f'{path}.{os.getpid()}.tmp'
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o600)
    write_and_replace(fd, tmp, path, [data])
