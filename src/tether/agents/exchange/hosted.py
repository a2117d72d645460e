"""A hosted exchange: one tether process serves the mailboxes of many users over
WebSocket (``ws://`` or, with a certificate, ``wss://``).

Agents and clients at any site reach it with :class:`~tether.agents.exchange.HttpExchange`
(or academy-py's :class:`~tether.agents.exchange.HttpExchangeFactory`). Every connection
presents a user's bearer token (checked before the WebSocket opens: a wrong token is
refused with HTTP 401); every mailbox belongs to the user who made it. Another user
cannot read, write, see or discover it unless its owner shares it (:meth:`HttpExchange.share`);
the agent may then answer that user. Per-user limits (:class:`UserLimits`): mailboxes,
message size, queued bytes (clear errors) and message rate (the sender waits).

Serve it with ``tether agents exchange serve --users users.toml`` (see ``docs/agents.md``).
Mailboxes live in the server's memory: they outlive agents and clients, not the server.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
from pathlib import Path
from typing import Any

from tether._clock import SYSTEM_CLOCK, Clock
from tether._serve.metrics import MetricsOptions
from tether.agents.exchange._hosted_metrics import hosted_metrics
from tether.agents.exchange._hosted_server import Conn, HostedState, frame_limit
from tether.agents.exchange._hosted_users import (
    UserLimits,
    UserRecord,
    add_user,
    find_user,
    hash_token,
    load_users,
)
from tether.exceptions import InvalidArgumentError

__all__ = [
    'HostedExchangeServer',
    'MetricsOptions',
    'UserLimits',
    'UserRecord',
    'add_user',
    'hash_token',
    'load_users',
]

logger = logging.getLogger(__name__)


class HostedExchangeServer:
    """Serves a hosted exchange.

    Args:
        users: The users (name to :class:`UserRecord`), or the path of a users file.
        host: Address to listen on.
        port: Port (0: a free one, see :attr:`port` once started).
        cert_file: TLS certificate (PEM); with it the server speaks ``wss://``.
        key_file: Its private key (``None``: in ``cert_file``).
        clock: The clock of the rate limits (tests pass a FakeClock).
        metrics: Where to serve Prometheus metrics (default: nowhere; see
            ``docs/observability.md``); :attr:`metrics_address` once started.
    """

    def __init__(
        self,
        users: dict[str, UserRecord] | str | Path,
        *,
        host: str = '127.0.0.1',
        port: int = 0,
        cert_file: str | Path | None = None,
        key_file: str | Path | None = None,
        clock: Clock = SYSTEM_CLOCK,
        metrics: MetricsOptions | None = None,
    ) -> None:
        if not isinstance(users, dict):
            users = load_users(users)
        if key_file is not None and cert_file is None:
            raise InvalidArgumentError('key_file needs cert_file')
        self.host = host
        self.port = port
        self.cert_file = cert_file
        self.key_file = key_file
        self.state = HostedState(users, clock)
        self._metrics = hosted_metrics(self.state, metrics or MetricsOptions())
        self._server: Any = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._stopped: asyncio.Event | None = None

    @property
    def url(self) -> str:
        """What clients connect to."""
        scheme = 'wss' if self.cert_file else 'ws'
        return f'{scheme}://{self.host}:{self.port}'

    @property
    def metrics_address(self) -> tuple[str, int] | None:
        """Where the metrics are served (``None``: nowhere)."""
        return self._metrics.address()

    @property
    def throttled(self) -> int:
        """How many sends have waited for their user's rate limit so far."""
        return self.state.throttled

    def _authenticate(self, connection: Any, request: Any) -> Any:
        auth = request.headers.get('Authorization', '')
        scheme, _, token = auth.partition(' ')
        record = find_user(self.state.records, token) if scheme.lower() == 'bearer' else None
        if record is None:
            return connection.respond(
                401, 'tether hosted exchange: missing or wrong bearer token\n'
            )
        connection.tether_user = record
        return None

    async def _handle(self, ws: Any) -> None:
        record: UserRecord = ws.tether_user
        ws.protocol.max_message_size = frame_limit(record)  # refused from frame headers on
        await self.state.serve(Conn(record.name, ws))

    async def serve(self, ready: threading.Event | None = None) -> None:
        """Serve until :meth:`stop` (or cancellation)."""
        from websockets.asyncio.server import serve

        ssl_ctx = None
        if self.cert_file is not None:
            from tether._serve.tls import server_context

            ssl_ctx = server_context(self.cert_file, self.key_file)
        # Frames are refused by size before they are read: the server-wide bound is the
        # largest user's; each connection is narrowed to its user's once authenticated.
        biggest = max((frame_limit(r) for r in self.state.records.values()), default=4096)
        self._loop = asyncio.get_running_loop()
        self._stopped = asyncio.Event()
        async with serve(
            self._handle,
            self.host,
            self.port,
            process_request=self._authenticate,
            ssl=ssl_ctx,
            max_size=biggest,
            compression=None,
            server_header=None,
        ) as server:
            self._server = server
            self.port = server.sockets[0].getsockname()[1]
            self._metrics.open()
            try:
                if ready is not None:
                    ready.set()
                await self._stopped.wait()
            finally:
                self._metrics.close()

    def start(self) -> HostedExchangeServer:
        """Serve in a thread of this process; return once listening."""
        ready = threading.Event()
        failure: list[BaseException] = []

        def run() -> None:
            try:
                asyncio.run(self.serve(ready))
            except BaseException as e:  # reported to start()
                failure.append(e)
                ready.set()

        self._thread = threading.Thread(target=run, name='tether-hosted-exchange', daemon=True)
        self._thread.start()
        ready.wait()
        if failure:
            raise failure[0]
        return self

    def stop(self) -> None:
        """Stop serving (connections are closed)."""
        loop, stopped = self._loop, self._stopped
        if loop is not None and stopped is not None:
            with contextlib.suppress(RuntimeError):  # the loop already ended
                loop.call_soon_threadsafe(stopped.set)
        if self._thread is not None:
            self._thread.join(30)
            self._thread = None

    def __enter__(self) -> HostedExchangeServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
