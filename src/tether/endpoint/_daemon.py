"""Start an endpoint detached (PID file and log in its folder), stop it, ask its status."""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from tether.endpoint._config import EndpointConfig, find_config, read_state
from tether.exceptions import EndpointError, RemoteError, WireError
from tether.node._spawn import _LAUNCHER, _log_tail

__all__ = ['endpoint_status', 'run_foreground', 'start_endpoint', 'stop_endpoint']

logger = logging.getLogger(__name__)


def run_foreground(name: str, home: str | None = None) -> None:
    """Run endpoint ``name`` in this process until it is stopped."""
    from tether._wire import run
    from tether.endpoint._server import Endpoint

    logging.basicConfig(
        level=logging.INFO,
        format='%(asctime)s %(name)s %(levelname)s %(message)s',
        stream=sys.stderr,
    )
    config = find_config(name, Path(home) if home else None)
    endpoint = Endpoint(config, Path(home) if home else None)
    try:
        run(endpoint.serve())
    except OSError as e:
        raise EndpointError(
            f'endpoint {config.name} cannot listen on {config.host}:{config.port} (or its '
            f'peering port {config.peering.bind}:{config.peering.port}): {e.strerror or e}',
        ) from e


def start_endpoint(name: str, home: Path | None = None, timeout: float = 30.0) -> dict[str, Any]:
    """Start endpoint ``name`` detached; return its state once it serves.

    Raises:
        EndpointError: it runs already, or it exited during start-up (the message ends
            with its log).
    """
    config = find_config(name, home)
    folder = config.folder(home)
    state = read_state(folder)
    if state is not None:
        raise EndpointError(f'endpoint {config.name} already runs (pid {state["pid"]})')
    log = folder / 'endpoint.log'
    cmd = [sys.executable, '-m', 'tether.endpoint', config.name]
    if home is not None:
        cmd.append(str(home))
    out = subprocess.run(
        [sys.executable, '-c', _LAUNCHER, str(log), *cmd],
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    if out.returncode != 0:
        raise EndpointError(f'cannot launch endpoint {config.name}: {out.stderr.strip()}')
    pid = int(out.stdout.strip())
    deadline = time.monotonic() + timeout
    from tether.node._state import pid_alive

    while time.monotonic() < deadline:
        state = read_state(folder)
        if state is not None and state['pid'] == pid:
            return state
        if not pid_alive(pid):
            raise EndpointError(
                f'endpoint {config.name} exited during start-up; its log {log} ends with:\n'
                f'{_log_tail(log)}',
            )
        time.sleep(0.02)
    raise EndpointError(f'endpoint {config.name} (pid {pid}) did not start within {timeout} s')


def _request(config: EndpointConfig, home: Path | None, mtype: int, header: Any) -> Any:
    from tether._wire import SyncConnection

    state = read_state(config.folder(home))
    if state is None:
        raise EndpointError(
            f'endpoint {config.name} is not running: start it with '
            f'`tether endpoint start {config.name}`',
        )
    conn = SyncConnection(
        state['host'], state['port'], secret=config.client_token(home), timeout=30.0
    )
    try:
        return conn.request(mtype, header)
    finally:
        conn.close()


def endpoint_status(name: str, home: Path | None = None, **query: Any) -> dict[str, Any]:
    """The running endpoint's status (or, with a query, its peers, the relay's list or NAT).

    Raises:
        EndpointError: it is not running, does not answer, or refused the query (the
            message says why: e.g. a NAT check without a registered relay).
    """
    from tether.endpoint import _protocol as proto

    config = find_config(name, home)
    mtype = proto.PEERS if query else proto.STATUS
    try:
        info: dict[str, Any] = _request(config, home, mtype, query or None).header
    except RemoteError as e:
        # It answered, and refused: its message says why (without the socket's name).
        _, refused, why = str(e).partition(' refused: ')
        raise EndpointError(why if refused else str(e)) from e
    except WireError as e:
        raise EndpointError(f'endpoint {config.name} does not answer: {e}') from e
    return info


def stop_endpoint(name: str, home: Path | None = None, timeout: float = 10.0) -> bool:
    """Stop endpoint ``name`` (``SHUTDOWN``, then SIGTERM, then SIGKILL).

    Returns:
        Whether it is gone (also ``True`` if it was not running).
    """
    from tether.endpoint import _protocol as proto
    from tether.node._state import pid_alive

    config = find_config(name, home)
    state = read_state(config.folder(home))
    if state is None:
        return True
    pid = int(state['pid'])
    try:
        _request(config, home, proto.SHUTDOWN, None)
    except (WireError, EndpointError) as e:
        logger.info('endpoint %s does not answer (%s): SIGTERM', config.name, e)
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGTERM)
    for sig in (None, signal.SIGKILL):
        if sig is not None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, sig)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if not pid_alive(pid):
                return True
            time.sleep(0.02)
    return not pid_alive(pid)
