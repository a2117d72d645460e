"""A blocking WebSocket client connection for the hosted exchange, on websockets' sans-I/O
protocol: the transport's own reader thread reads the socket and gets whole messages,
with no thread of the library's in between (one thread hand-off less per message)."""

from __future__ import annotations

import contextlib
import socket
import ssl
import threading
from collections.abc import Iterator
from typing import Any

from tether._wire._cleanup import closed_on_error
from tether.exceptions import AuthenticationError, WireConnectionError

__all__ = ['Connection']

_READ = 1 << 18


class Connection:
    """One WebSocket connection: :meth:`send` from any thread, :meth:`messages` from one.

    Raises (from the constructor):
        AuthenticationError: the server refused the token (HTTP 401).
        WireConnectionError: the server cannot be reached or refused the upgrade.
    """

    def __init__(
        self, url: str, headers: dict[str, str], ssl_ctx: ssl.SSLContext | None, timeout: float
    ) -> None:
        from websockets.client import ClientProtocol
        from websockets.http11 import Response
        from websockets.uri import parse_uri

        uri = parse_uri(url)
        self.url = url
        self._lock = threading.Lock()
        try:
            sock = socket.create_connection((uri.host, uri.port), timeout)
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            if ssl_ctx is not None:
                sock = ssl_ctx.wrap_socket(sock, server_hostname=uri.host)
        except (OSError, ssl.SSLError) as e:
            raise WireConnectionError(f'cannot reach the hosted exchange at {url}: {e}') from e
        self.sock = sock
        self.proto = ClientProtocol(uri, max_size=None)
        request = self.proto.connect()
        for name, value in headers.items():
            request.headers[name] = value
        self.proto.send_request(request)
        with closed_on_error(sock.close, OSError, lambda e: f'hosted exchange {url}: {e}'):
            self._flush()
            response: Response | None = None
            self._early: list[Any] = []  # frames that came with the handshake's answer
            while response is None:
                data = sock.recv(_READ)
                if not data:
                    raise WireConnectionError(
                        f'the hosted exchange at {url} closed the connection'
                    )
                self.proto.receive_data(data)
                for event in self.proto.events_received():
                    if isinstance(event, Response):
                        response = event
                    else:
                        self._early.append(event)
            if response.status_code == 401:
                raise AuthenticationError(
                    f'the hosted exchange at {url} refused the token (HTTP 401): '
                    f'{(response.body or b"").decode(errors="replace").strip()}'
                )
            if self.proto.handshake_exc is not None:
                raise WireConnectionError(
                    f'the hosted exchange at {url} refused the connection: '
                    f'{self.proto.handshake_exc}'
                ) from self.proto.handshake_exc
        sock.settimeout(None)
        self._pending = b''
        self.closed = False

    def _flush(self) -> None:
        data = b''.join(self.proto.data_to_send())
        if data:
            self.sock.sendall(data)

    def send(self, data: bytes) -> None:
        """Send one binary message (thread-safe)."""
        try:
            with self._lock:
                self.proto.send_binary(data)
                self._flush()
        except Exception as e:
            raise WireConnectionError(f'hosted exchange {self.url}: {e}') from e

    def messages(self) -> Iterator[bytes]:
        """The messages received, until the connection closes (one reader thread)."""
        from websockets.frames import Opcode

        parts: list[bytes] = []
        events: list[Any] = self._early
        data = b'-'
        while True:
            for frame in events:
                if frame.opcode in (Opcode.BINARY, Opcode.CONT, Opcode.TEXT):
                    parts.append(frame.data)
                    if frame.fin:
                        yield parts[0] if len(parts) == 1 else b''.join(parts)
                        parts = []
            if not data:
                return
            try:
                data = self.sock.recv(_READ)
            except OSError:
                return
            with self._lock:
                if data:
                    self.proto.receive_data(data)
                else:
                    self.proto.receive_eof()
                events = self.proto.events_received()
                try:
                    self._flush()  # pongs, close answers
                except OSError:
                    return

    def close(self) -> None:
        """Close the connection (the reader's :meth:`messages` then ends)."""
        if self.closed:
            return
        self.closed = True
        try:
            with self._lock:
                self.proto.send_close(1000)
                self._flush()
        except Exception:  # already closed by the peer
            pass
        with contextlib.suppress(OSError):
            self.sock.shutdown(socket.SHUT_RDWR)
        self.sock.close()
