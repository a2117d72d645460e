"""The endpoint's control connection to its relay (requests both ways, reconnects)."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from tether._serve import codes
from tether._serve import signalling as rp
from tether._serve.tls import client_context
from tether._wire import ERROR, Connection, Frame, Reply, connect, error_reply
from tether._wire._handshake import decode_refusal
from tether.exceptions import EndpointError, ProtocolError, RemoteError, WireError

__all__ = ['RelayLink']

logger = logging.getLogger(__name__)

OfferHandler = Callable[[rp.Offer], Awaitable[dict[str, Any]]]
TunnelHandler = Callable[[rp.TunnelOpen], Awaitable[None]]
R = TypeVar('R', rp.Registered, rp.Endpoints, rp.Connected, rp.Ticket)


class RelayLink:
    """Registers the endpoint with the relay and keeps it registered.

    Args:
        address: ``(host, port)`` of the relay.
        register: The ``REGISTER`` request (token, uuid, name, certificate).
        ca_file: What the relay's certificate must chain to (``None``: the system's).
        server_hostname: Name checked against the relay's certificate.
        insecure: No TLS (tests on loopback only).
        on_offer: Answers a peering offer pushed by the relay.
        on_tunnel: Opens our side of a relayed channel.
        on_change: Called when the endpoint registers, loses its registration, or fails
            to register for another reason than before (see :attr:`connected` and
            :attr:`last_error`).
        retry_max: Longest wait, in seconds, between two attempts to register while the
            relay cannot be reached (the wait starts at 0.5 s, or this if smaller, and
            doubles after each failed attempt).
    """

    def __init__(
        self,
        address: tuple[str, int],
        register: rp.Register,
        *,
        ca_file: str | None,
        server_hostname: str | None,
        insecure: bool,
        on_offer: OfferHandler,
        on_tunnel: TunnelHandler,
        on_change: Callable[[], None] = lambda: None,
        retry_max: float = 5.0,
    ) -> None:
        self.address = address
        self._register = register
        self._ssl = None if insecure else client_context(ca_file)
        self._server_hostname = server_hostname or address[0]
        self._on_offer = on_offer
        self._on_tunnel = on_tunnel
        self._on_change = on_change
        self._retry_max = retry_max
        self._conn: Connection | None = None
        self._ids = itertools.count(1)
        self._pending: dict[int, asyncio.Future[Frame]] = {}
        self._tasks: set[asyncio.Task[Any]] = set()
        self._runner: asyncio.Task[None] | None = None
        self._connected = asyncio.Event()
        self.info: rp.Registered | None = None
        """What the relay answered our registration (``None`` before it did)."""
        self.last_error: str | None = None

    @property
    def connected(self) -> bool:
        """Whether the endpoint is registered right now."""
        return self._conn is not None and not self._conn.transport.is_closing()

    @property
    def registered(self) -> rp.Registered:
        """:attr:`info`, once registered.

        Raises:
            EndpointError: the relay has not taken this endpoint's registration (yet).
        """
        if self.info is None:
            raise EndpointError(
                f'not registered with the relay {self.address[0]}:{self.address[1]}'
            )
        return self.info

    def state(self) -> dict[str, Any]:
        """The link's state, as the endpoint's status reports it."""
        return {
            'address': f'{self.address[0]}:{self.address[1]}',
            'connected': self.connected,
            'user': None if self.info is None else self.info.user,
            'error': None if self.connected else self.last_error,
        }

    async def check_nat(self, name: str, detect: Callable[[], Awaitable[dict[str, Any]]]) -> Reply:
        """``detect()``'s NAT type once registered with the relay, or why it cannot be seen
        (an error reply of endpoint ``name``)."""
        if not self.connected or self.info is None:
            address = f'{self.address[0]}:{self.address[1]}'
            return error_reply(
                'relay',
                f'endpoint {name} is not registered with its relay {address} '
                f'({self.last_error or "not connected"}); it keeps trying',
            )
        return codes.OK, await detect(), ()

    def _spawn(self, coro: Awaitable[Any]) -> None:
        task = asyncio.ensure_future(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def start(self, timeout: float = 10.0) -> None:
        """Register once (raising if the relay refuses us), then keep registered.

        An unreachable relay is not fatal: the endpoint keeps serving local clients and
        retries in the background.

        Raises:
            EndpointError: the relay refused the token or the registration.
        """
        try:
            await self._open(timeout)
        except EndpointError:
            raise
        except (WireError, OSError) as e:
            self._failed(str(e))
            logger.warning('relay %s:%d unreachable (%s): retrying', *self.address, e)
        self._runner = asyncio.ensure_future(self._keep())

    def _failed(self, error: str) -> None:
        changed = error != self.last_error
        self.last_error = error
        if changed:
            self._on_change()

    async def _open(self, timeout: float) -> None:
        conn = await connect(
            *self.address,
            ssl=self._ssl,
            server_hostname=self._server_hostname,
            timeout=timeout,
            client='tether endpoint',
        )
        self._conn = conn
        reader = asyncio.ensure_future(self._read(conn))
        self._tasks.add(reader)
        reader.add_done_callback(self._tasks.discard)
        try:
            info = await self.call(self._register, rp.Registered, timeout=timeout)
        except RemoteError as e:
            conn.abort()
            self._conn = None
            raise EndpointError(f'relay {self.address[0]}:{self.address[1]}: {e}') from e
        self.info = info
        self.last_error = None
        self._connected.set()
        self._on_change()
        logger.info('registered with relay %s:%d as user %s', *self.address, info.user)

    async def _keep(self) -> None:
        first = min(0.5, self._retry_max)
        delay = first
        while True:
            conn = self._conn
            if conn is not None and not conn.transport.is_closing():
                await asyncio.sleep(0.5)
                delay = first
                continue
            self._connected.clear()
            try:
                await self._open(10.0)
            except (WireError, OSError, EndpointError) as e:
                self._failed(str(e))
                logger.info('relay %s:%d: %s (retrying in %.1f s)', *self.address, e, delay)
                await asyncio.sleep(delay)
                delay = min(delay * 2, self._retry_max)

    async def _read(self, conn: Connection) -> None:
        try:
            while True:
                frame = await conn.recv()
                if frame.type in (rp.OK, ERROR):
                    fut = self._pending.pop(frame.request_id, None)
                    if fut is not None and not fut.done():
                        fut.set_result(frame)
                elif frame.type in (rp.OFFER, rp.TUNNEL_OPEN):
                    self._pushed(conn, frame)
        except (WireError, OSError) as e:
            logger.info('relay connection lost: %s', e)
            self._failed(f'the connection to the relay was lost: {e}')
        finally:
            conn.abort()
            for fut in self._pending.values():
                if not fut.done():
                    fut.set_exception(EndpointError('the connection to the relay dropped'))
            self._pending.clear()

    def _pushed(self, conn: Connection, frame: Frame) -> None:
        try:
            message = rp.decode(frame.type, frame.header)
        except ProtocolError as e:
            logger.warning('the relay pushed a malformed message: %s', e)
            return
        if isinstance(message, rp.Offer):
            self._spawn(self._answer(conn, message, frame.request_id))
        elif isinstance(message, rp.TunnelOpen):
            self._spawn(self._on_tunnel(message))

    async def _answer(self, conn: Connection, offer: rp.Offer, request_id: int) -> None:
        try:
            answer = rp.Answer(answer=await self._on_offer(offer))
        except Exception as e:
            logger.warning('cannot answer the offer of %s: %r', offer.sender, e)
            answer = rp.Answer(error=repr(e))
        with contextlib.suppress(WireError, OSError):
            await conn.send(*rp.encode(answer), request_id=request_id)

    async def call(self, message: rp.Message, kind: type[R], *, timeout: float = 30.0) -> R:
        """Send a request to the relay and wait for its answer, a ``kind`` record.

        Raises:
            EndpointError: no relay connection, a timeout, or the relay refused.
            RemoteError: the relay answered with an error.
            ProtocolError: its answer does not fit ``kind``.
        """
        mtype, header = rp.encode(message)
        conn = self._conn
        if conn is None or conn.transport.is_closing():
            raise EndpointError(
                f'not connected to the relay {self.address[0]}:{self.address[1]}'
                + (f' ({self.last_error})' if self.last_error else ''),
            )
        rid = next(self._ids)
        fut: asyncio.Future[Frame] = asyncio.get_running_loop().create_future()
        self._pending[rid] = fut
        try:
            await conn.send(mtype, header, request_id=rid)
            frame = await asyncio.wait_for(fut, timeout)
        except TimeoutError as e:
            raise EndpointError(f'the relay did not answer within {timeout} s') from e
        except (WireError, OSError) as e:
            raise EndpointError(f'the relay connection failed: {e}') from e
        finally:
            self._pending.pop(rid, None)
        if frame.type == ERROR:
            refusal = decode_refusal(frame)
            raise RemoteError(refusal.code, refusal.message)
        return rp.decode_reply(kind, frame.header)

    async def close(self) -> None:
        """Drop the connection and stop reconnecting."""
        if self._runner is not None:
            self._runner.cancel()
        for task in list(self._tasks):
            task.cancel()
        if self._conn is not None:
            self._conn.abort()
