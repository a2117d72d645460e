"""The link between an endpoint and a manager running in one of its blocks.

A manager started in a batch job connects back to the endpoint over TCP. Before either
side reads anything else, each proves that it holds the endpoint's link key (32 random
bytes the endpoint wrote, mode 0600, in its run folder, which the cluster's nodes share):
the endpoint sends a nonce, the manager answers with its own nonce and an HMAC of both,
and the endpoint answers with an HMAC of both under another label. Only then are frames
exchanged: a 4-byte length and a pickle (protocol 5) of one message tuple. Pickles are
read only from a peer that proved the key (the endpoint and its own managers), and a
frame longer than the reader's limit closes the link before it is read.
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import pickle
import secrets
import socket
import struct
import threading
from collections.abc import Iterator
from typing import Any

from tether.exceptions import AuthenticationError, ProtocolError

__all__ = ['Link', 'accept_manager', 'connect_manager']

_MAGIC = b'TFBM1'
_NONCE = 32
_HEADER = struct.Struct('!I')
_HANDSHAKE_S = 30.0


def _mac(key: bytes, label: bytes, first: bytes | bytearray, second: bytes | bytearray) -> bytes:
    return hmac.new(key, label + first + second, hashlib.sha256).digest()


def _read_exact(sock: socket.socket, n: int) -> bytearray:
    buf = bytearray(n)
    view = memoryview(buf)
    got = 0
    while got < n:
        k = sock.recv_into(view[got:])
        if k == 0:
            raise EOFError('the link closed')
        got += k
    return buf  # not copied: a frame may be a result of up to max_result_bytes


class Link:
    """One authenticated link: frames sent whole (thread-safe), read by one thread."""

    def __init__(self, sock: socket.socket, max_frame: int) -> None:
        self.sock = sock
        self.max_frame = max_frame
        self._send_lock = threading.Lock()

    def send(self, message: tuple[Any, ...]) -> None:
        """Send one message (raises :class:`OSError` if the link is gone)."""
        data = pickle.dumps(message, protocol=5)
        with self._send_lock:
            self.sock.sendall(_HEADER.pack(len(data)))
            self.sock.sendall(data)

    def recv(self) -> tuple[Any, ...]:
        """The next message (raises :class:`EOFError` when the peer closed the link)."""
        (size,) = _HEADER.unpack(_read_exact(self.sock, _HEADER.size))
        if size > self.max_frame:
            raise ProtocolError(f'a frame of {size} bytes is over the limit of {self.max_frame}')
        message = pickle.loads(_read_exact(self.sock, size))
        if not isinstance(message, tuple) or not message or not isinstance(message[0], str):
            raise ProtocolError('a message is not an (operation, ...) tuple')
        return message

    def messages(self) -> Iterator[tuple[Any, ...]]:
        """The messages read until the link closes, fails or breaks the protocol (the
        reader of each side loops over them)."""
        while True:
            try:
                yield self.recv()
            except (EOFError, OSError, ProtocolError):
                return

    def close(self) -> None:
        """Close the link (the peer's reads end)."""
        with contextlib.suppress(OSError):
            self.sock.shutdown(socket.SHUT_RDWR)
        self.sock.close()


def accept_manager(sock: socket.socket, key: bytes, max_frame: int) -> Link:
    """The endpoint's side of the handshake on an accepted connection.

    Raises:
        AuthenticationError: the peer does not hold the key.
        OSError, EOFError: the connection failed or closed (or took over 30 s).
    """
    sock.settimeout(_HANDSHAKE_S)
    ours = secrets.token_bytes(_NONCE)
    sock.sendall(_MAGIC + ours)
    answer = _read_exact(sock, _NONCE + hashlib.sha256().digest_size)
    theirs, mac = answer[:_NONCE], answer[_NONCE:]
    if not hmac.compare_digest(mac, _mac(key, b'manager', ours, theirs)):
        raise AuthenticationError('a manager connected without the endpoint link key')
    sock.sendall(_mac(key, b'endpoint', theirs, ours))
    sock.settimeout(None)
    return Link(sock, max_frame)


def connect_manager(address: str, port: int, key: bytes, max_frame: int) -> Link:
    """A manager's link to its endpoint at ``address``:``port``.

    Raises:
        AuthenticationError: the endpoint did not prove the key (not ours).
        OSError, EOFError: the endpoint cannot be reached, or closed the connection.
    """
    sock = socket.create_connection((address, port), timeout=_HANDSHAKE_S)
    try:
        hello = _read_exact(sock, len(_MAGIC) + _NONCE)
        if not hello.startswith(_MAGIC):
            raise ProtocolError(f'{address}:{port} is not a tether endpoint')
        theirs = hello[len(_MAGIC) :]
        ours = secrets.token_bytes(_NONCE)
        sock.sendall(ours + _mac(key, b'manager', theirs, ours))
        proof = _read_exact(sock, hashlib.sha256().digest_size)
        if not hmac.compare_digest(proof, _mac(key, b'endpoint', ours, theirs)):
            raise AuthenticationError(f'{address}:{port} does not hold this block link key')
        sock.settimeout(None)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    except BaseException:
        sock.close()
        raise
    return Link(sock, max_frame)
