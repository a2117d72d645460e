"""Start an endpoint detached (PID file and log in its folder), stop it, ask its status."""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import sys
from pathlib import Path
from typing import Any

from tether._serve import codes as proto
from tether._serve.site import SiteConfig, find_config, read_state
from tether._serve.spawn import launch_detached, wait_gone
from tether._serve.state import pid_alive
from tether.exceptions import EndpointError, RemoteError, WireError

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
    cmd = [sys.executable, '-m', 'tether.endpoint', config.name]
    if home is not None:
        cmd.append(str(home))

    def started(pid: int) -> dict[str, Any] | None:
        state = read_state(folder)
        return state if state is not None and state['pid'] == pid else None

    return launch_detached(
        f'endpoint {config.name}',
        cmd,
        folder / 'endpoint.log',
        started,
        timeout=timeout,
        error=EndpointError,
    )


def _request(config: SiteConfig, home: Path | None, mtype: int, header: Any) -> Any:
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
        if wait_gone(pid, timeout):
            return True
    return not pid_alive(pid)
