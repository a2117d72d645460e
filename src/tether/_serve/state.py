"""Discovery files: ``<run_dir>/<name>.json`` tells local processes where a server is."""

from __future__ import annotations

import contextlib
import dataclasses
import fcntl
import json
import logging
import os
import re
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from tether.exceptions import ConfigError

__all__ = [
    'ALL_INTERFACES',
    'NodeState',
    'check_name',
    'default_run_dir',
    'locked',
    'pid_alive',
    'read_state',
    'remove_stale_state',
    'remove_state',
    'write_state',
]

logger = logging.getLogger(__name__)

ALL_INTERFACES = frozenset({'0.0.0.0', '::', ''})
"""Bind addresses that listen on every interface of the host."""

_NAME = re.compile(r'[A-Za-z0-9][A-Za-z0-9_.-]{0,99}')


def check_name(name: object) -> str:
    """Return ``name`` if it is a valid node server name, else raise.

    A name becomes part of file names in the run directory: letters, digits, ``_``,
    ``-`` and ``.`` only, starting with a letter or digit, at most 100 characters.

    Raises:
        ConfigError: if the name is not valid (``'../x'``, ``'a/b'``, ``''`` ...).
    """
    if not isinstance(name, str) or _NAME.fullmatch(name) is None:
        raise ConfigError(
            f'invalid node server name {name!r}: use letters, digits, "_", "-" and "." '
            '(starting with a letter or digit, at most 100 characters; no path separators)',
        )
    return name


@dataclasses.dataclass(frozen=True)
class NodeState:
    """What a running node server publishes about itself (file mode 0600).

    Attributes:
        name: Server name.
        pid: Process id.
        host: Address local clients connect to.
        port: Port.
        address: Address written into keys (reachable from other hosts).
        secret: The shared secret, if any.
        bind: The address the server listens on (``0.0.0.0``: every interface).
        tls: Whether the server speaks TLS.
    """

    name: str
    pid: int
    host: str
    port: int
    address: str
    secret: str | None = None
    bind: str | None = None
    tls: bool = False


def default_run_dir() -> Path:
    """Where discovery files live.

    ``$TETHER_NODE_RUN_DIR``, else ``$XDG_RUNTIME_DIR/tether-node``, else
    ``/tmp/tether-node-<uid>``.
    """
    env = os.environ.get('TETHER_NODE_RUN_DIR')
    if env:
        return Path(env)
    xdg = os.environ.get('XDG_RUNTIME_DIR')
    if xdg and os.path.isdir(xdg):
        return Path(xdg) / 'tether-node'
    return Path(f'/tmp/tether-node-{os.getuid()}')


def _path(run_dir: Path, name: str) -> Path:
    return run_dir / f'{check_name(name)}.json'


def read_state(run_dir: Path, name: str) -> NodeState | None:
    """Return the published state of server ``name``, or ``None``.

    A file that another user owns, or that others may write, is ignored (with a warning):
    only this user's servers publish here.
    """
    path = _path(run_dir, name)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    except OSError:
        return None
    with os.fdopen(fd) as f:
        st = os.fstat(fd)
        if st.st_uid != os.getuid() or st.st_mode & 0o022:
            logger.warning(
                'ignoring discovery file %s: not owned by this user, or writable by others', path
            )
            return None
        try:
            data: dict[str, Any] = json.loads(f.read())
            return NodeState(**data)
        except (OSError, ValueError, TypeError):
            return None


def write_state(run_dir: Path, state: NodeState) -> None:
    """Publish ``state`` atomically, readable by this user only."""
    check_name(state.name)
    run_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
    tmp = run_dir / f'.{state.name}.{state.pid}.tmp'
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, 'w') as f:
        json.dump(dataclasses.asdict(state), f)
    os.replace(tmp, _path(run_dir, state.name))


def remove_state(run_dir: Path, name: str, pid: int) -> None:
    """Remove the state file of ``name`` if process ``pid`` wrote it."""
    state = read_state(run_dir, name)
    if state is not None and state.pid == pid:
        with contextlib.suppress(FileNotFoundError):
            _path(run_dir, name).unlink()


def remove_stale_state(run_dir: Path, name: str) -> None:
    """Remove the discovery file of ``name`` (the caller found it does not lead to it)."""
    with contextlib.suppress(FileNotFoundError):
        _path(run_dir, name).unlink()


def pid_alive(pid: int) -> bool:
    """Return whether process ``pid`` exists (and is not a zombie)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        with open(f'/proc/{pid}/stat') as f:
            return f.read().rsplit(')', 1)[1].split()[0] != 'Z'
    except OSError:
        return True


@contextlib.contextmanager
def locked(run_dir: Path, name: str, timeout: float = 60.0) -> Iterator[None]:
    """Hold the per-name file lock (serialises discovery and spawning on this host).

    Raises:
        TimeoutError: if another process holds the lock for ``timeout`` seconds.
    """
    check_name(name)
    run_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
    fd = os.open(run_dir / f'{name}.lock', os.O_RDWR | os.O_CREAT, 0o600)
    deadline = time.monotonic() + timeout
    try:
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() > deadline:
                    raise TimeoutError(
                        f'lock {run_dir / name}.lock held by another process for {timeout} s',
                    ) from None
                time.sleep(0.01)
        yield
    finally:
        fcntl.flock(fd, fcntl.LOCK_UN)
        os.close(fd)
