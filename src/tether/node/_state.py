"""Discovery files: ``<run_dir>/<name>.json`` tells local processes where a server is."""

from __future__ import annotations

import contextlib
import dataclasses
import fcntl
import json
import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

__all__ = [
    'NodeState',
    'default_run_dir',
    'locked',
    'pid_alive',
    'read_state',
    'remove_state',
    'write_state',
]


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
    """

    name: str
    pid: int
    host: str
    port: int
    address: str
    secret: str | None = None


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
    return run_dir / f'{name}.json'


def read_state(run_dir: Path, name: str) -> NodeState | None:
    """Return the published state of server ``name``, or ``None``."""
    try:
        data: dict[str, Any] = json.loads(_path(run_dir, name).read_text())
        return NodeState(**data)
    except (OSError, ValueError, TypeError):
        return None


def write_state(run_dir: Path, state: NodeState) -> None:
    """Publish ``state`` atomically, readable by this user only."""
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
