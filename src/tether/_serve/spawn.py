"""Find this host's node server, or start one detached from the calling process."""

from __future__ import annotations

import contextlib
import logging
import os
import secrets
import signal
import socket
import ssl
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

from tether._serve.state import (
    ALL_INTERFACES,
    NodeState,
    check_name,
    locked,
    pid_alive,
    read_state,
    remove_stale_state,
)
from tether._serve.tls import client_context
from tether.exceptions import ConnectorError

if TYPE_CHECKING:
    from tether._serve.messages import NodeStatus

__all__ = [
    'detect_address',
    'launch_detached',
    'ensure_server',
    'find_server',
    'resolve_secret',
    'secret_file',
    'stop_server',
    'verify_server',
    'wait_gone',
]

logger = logging.getLogger(__name__)

T = TypeVar('T')

LAUNCHER = (
    'import subprocess, sys\n'
    'p = subprocess.Popen(sys.argv[2:], stdin=subprocess.DEVNULL, '
    'stdout=open(sys.argv[1], "ab"), stderr=subprocess.STDOUT, start_new_session=True)\n'
    'print(p.pid)\n'
)


def secret_file() -> Path:
    """``$TETHER_NODE_SECRET_FILE``, else ``~/.config/tether/node.secret``."""
    env = os.environ.get('TETHER_NODE_SECRET_FILE')
    return Path(env) if env else Path.home() / '.config' / 'tether' / 'node.secret'


def resolve_secret(secret: str | None) -> str:
    """The secret to use: ``secret``, else ``$TETHER_NODE_SECRET``, else the secret file.

    The secret file is created (mode 0600, 32 random bytes) on first use, so hosts that
    share a home directory share a secret without configuration.
    """
    if secret:
        return secret
    env = os.environ.get('TETHER_NODE_SECRET')
    if env:
        return env
    path = secret_file()
    try:
        return path.read_text().strip()
    except FileNotFoundError:
        pass
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    token = secrets.token_hex(32)
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        return path.read_text().strip()
    with os.fdopen(fd, 'w') as f:
        f.write(token + '\n')
    return token


def detect_address() -> str:
    """The address other hosts reach this one by: ``$TETHER_NODE_ADDRESS`` or a guess.

    The guess is the source address of the default route (found without sending
    anything), else the address of the host name, else ``127.0.0.1``.
    """
    env = os.environ.get('TETHER_NODE_ADDRESS')
    if env:
        return env
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            s.connect(('10.255.255.255', 1))
            addr: str = s.getsockname()[0]
            return addr
    except OSError:
        pass
    try:
        return socket.gethostbyname(socket.gethostname())
    except OSError:
        return '127.0.0.1'


def log_tail(path: Path) -> str:
    """The last 2000 characters of the log at ``path`` (for an error message)."""
    try:
        return path.read_text(errors='replace')[-2000:]
    except OSError:
        return '(no log)'


def launch_detached(
    what: str,
    cmd: list[str],
    log: Path,
    started: Callable[[int], T | None],
    *,
    timeout: float,
    error: type[Exception] = ConnectorError,
    env: dict[str, str] | None = None,
) -> T:
    """Run ``cmd`` detached from this process (its own session, output to ``log``) and
    wait until ``started(pid)`` returns its state.

    Shared by every daemon tether starts (node servers, endpoints): ``started`` reads the
    state file the daemon writes once it serves, and returns ``None`` until then.

    Raises:
        error: the launch failed, the daemon exited during start-up (the message ends
            with its log), or it did not start within ``timeout`` seconds.
    """
    out = subprocess.run(
        [sys.executable, '-c', LAUNCHER, str(log), *cmd],
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    if out.returncode != 0:
        raise error(f'cannot launch {what}: {out.stderr.strip()}')
    pid = int(out.stdout.strip())
    logger.info('started %s (pid %d, log %s)', what, pid, log)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        state = started(pid)
        if state is not None:
            return state
        if not pid_alive(pid):
            raise error(
                f'{what} exited during start-up; its log {log} ends with:\n{log_tail(log)}',
            )
        time.sleep(0.01)
    raise error(f'{what} (pid {pid}) did not start within {timeout} s')


def wait_gone(pid: int, timeout: float, same: Callable[[], bool] = lambda: True) -> bool:
    """Wait up to ``timeout`` seconds for process ``pid`` to end (or, per ``same``, to
    be another process); return whether it did."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not pid_alive(pid) or not same():
            return True
        time.sleep(0.01)
    return False


def verify_server(
    state: NodeState, secret: str | None = None, timeout: float = 5.0
) -> NodeStatus | None:
    """Ask the server a discovery file names for its status; ``None`` unless it is ours.

    The server must answer an authenticated ``STATUS`` request (with ``secret``, else the
    secret of the discovery file) with the name and pid the file gives: a stale file
    whose pid now belongs to another process, or whose port another program took, does
    not pass.
    """
    from tether._serve import codes as proto
    from tether._serve.messages import decode_status
    from tether._wire import SyncConnection
    from tether.exceptions import WireError

    if not pid_alive(state.pid):
        return None
    try:
        conn = SyncConnection(
            state.host,
            state.port,
            secret=secret or state.secret,
            ssl=_control_tls() if state.tls else None,
            timeout=timeout,
            client='tether node control',
        )
        try:
            info = decode_status(conn.request(proto.STATUS).header)
        finally:
            conn.close()
    except (WireError, OSError) as e:
        logger.info(
            'discovery file of %r (pid %d) does not lead to it: %s', state.name, state.pid, e
        )
        return None
    if info.pid != state.pid or info.name != state.name:
        logger.info(
            'discovery file of %r names pid %d, the server there is %r (pid %s)',
            state.name,
            state.pid,
            info.name,
            info.pid,
        )
        return None
    return info


def _control_tls() -> ssl.SSLContext:
    # Local control connections (status, stop) authenticate with the shared secret; the
    # certificate is not what proves the server's identity here.
    return client_context(verify=False)


def find_server(
    run_dir: Path, name: str, secret: str | None = None, timeout: float = 5.0
) -> NodeState | None:
    """Return the state of server ``name`` if it runs and answers as itself, else ``None``."""
    state = read_state(run_dir, name)
    if state is None or verify_server(state, secret, timeout) is None:
        return None
    return state


def ensure_server(
    name: str,
    run_dir: Path,
    *,
    secret: str,
    address: str,
    bind: str,
    port: int = 0,
    memory: str | None = None,
    spill_dir: str | None = None,
    idle_timeout: float | None = None,
    timeout: float = 30.0,
    tls_cert: str | None = None,
    tls_key: str | None = None,
) -> NodeState:
    """Return the state of server ``name`` on this host, starting it if it is not running.

    The server runs in its own session (it outlives the caller) and logs to
    ``<run_dir>/<name>.log``.

    Raises:
        ConnectorError: if the server cannot be started.
    """
    check_name(name)
    cmd = [
        *('start', '--name', name, '--run-dir', str(run_dir)),
        *('--bind', bind, '--port', str(port), '--address', address),
        *('--idle-timeout', str(idle_timeout or 0)),
    ]
    if memory is not None:
        cmd += ['--memory', str(memory)]
    if spill_dir is not None:
        cmd += ['--spill-dir', spill_dir]
    if tls_cert is not None:
        cmd += ['--tls-cert', tls_cert]
        if tls_key is not None:
            cmd += ['--tls-key', tls_key]

    def started(pid: int) -> NodeState | None:
        state = read_state(run_dir, name)
        return state if state is not None and state.pid == pid else None

    try:
        with locked(run_dir, name, timeout):
            # Checked with the discovery file's own secret: a caller with another secret
            # gets the server's authentication error on its first request, not a second
            # server under the same name.
            state = find_server(run_dir, name, timeout=min(timeout, 5.0))
            if state is not None:
                return state
            remove_stale_state(run_dir, name)
            if bind in ALL_INTERFACES:
                logger.warning(
                    'starting node server %r listening on every interface (%s): other hosts '
                    'can connect (with the shared secret). Pass bind= (or address=) to '
                    'NodeConnector to choose an interface.',
                    name,
                    bind,
                )
            return launch_detached(
                f'node server {name!r}',
                [sys.executable, '-m', 'tether.node', *cmd],
                run_dir / f'{name}.log',
                started,
                timeout=timeout,
                env={**os.environ, 'TETHER_NODE_SECRET': secret},
            )
    except TimeoutError as e:
        raise ConnectorError(f'cannot start node server {name!r}: {e}') from e


def stop_server(run_dir: Path, name: str, *, timeout: float = 10.0) -> bool:
    """Stop server ``name`` on this host (``SHUTDOWN`` request, then SIGTERM, then SIGKILL).

    Nothing is signalled unless the process answered an authenticated status request as
    server ``name`` with that pid: a discovery file naming a dead process is removed, and
    one naming a live process that is not this server is refused.

    Returns:
        Whether the server is gone (``True`` also when it was not running).

    Raises:
        ConnectorError: if the discovery file names a live process that does not answer
            as this server (it is left alone).
    """
    from tether._serve import codes as proto
    from tether._wire import SyncConnection
    from tether.exceptions import WireError

    state = read_state(run_dir, name)
    if state is None:
        return True
    if not pid_alive(state.pid):
        remove_stale_state(run_dir, name)
        return True
    if verify_server(state, timeout=min(timeout, 5.0)) is None:
        raise ConnectorError(
            f'the discovery file of node server {name!r} names pid {state.pid}, which does '
            f'not answer as that server: not signalling it (if it is a hung node server, '
            f'stop it yourself; remove {run_dir / (name + ".json")} if it is stale)',
        )
    started = _start_time(state.pid)
    try:
        conn = SyncConnection(
            state.host,
            state.port,
            secret=state.secret,
            ssl=_control_tls() if state.tls else None,
            timeout=5.0,
        )
        try:
            conn.request(proto.SHUTDOWN)
        finally:
            conn.close()
    except WireError as e:
        logger.info('node server %r did not take the shutdown request (%s)', name, e)
    for sig in (None, signal.SIGTERM, signal.SIGKILL):
        if sig is not None:
            if _start_time(state.pid) != started:
                return True  # gone, and the pid was reused: never signal the new process
            with contextlib.suppress(ProcessLookupError):
                os.kill(state.pid, sig)
        if wait_gone(state.pid, timeout, lambda: _start_time(state.pid) == started):
            return True
    return not pid_alive(state.pid)


def _start_time(pid: int) -> str | None:
    """The start time of process ``pid`` (tells a reused pid from the original)."""
    try:
        with open(f'/proc/{pid}/stat') as f:
            return f.read().rsplit(')', 1)[1].split()[19]
    except (OSError, IndexError):
        return None
