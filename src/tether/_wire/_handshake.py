"""The handshake messages, shared by the asyncio and the synchronous sides.

1. client -> server ``HELLO {nonce, client}`` (its prefix carries the protocol version);
2. server -> client ``CHALLENGE {nonce, auth, proof}`` or ``ERROR {code: 'version'}``;
3. client -> server ``AUTH {proof}``;
4. server -> client ``WELCOME {server}`` or ``ERROR {code: 'auth'}``.
"""

from __future__ import annotations

from typing import Any

from tether._wire import _auth
from tether._wire._frame import CHALLENGE, ERROR, WELCOME, Frame, Limits
from tether.exceptions import (
    AuthenticationError,
    FrameTooLargeError,
    ProtocolError,
    ProtocolVersionError,
    RemoteError,
    WireError,
)

__all__ = [
    'HANDSHAKE_LIMITS',
    'PRE_AUTH_LIMITS',
    'answer_challenge',
    'challenge_header',
    'check_auth',
    'check_welcome',
    'check_reply',
    'error_from_frame',
    'hello_header',
    'parse_hello',
]

HANDSHAKE_LIMITS = Limits(max_header=4096, max_payloads=0, max_frame=0)
PRE_AUTH_LIMITS = Limits(max_header=16 * 1024, max_payloads=1, max_frame=16 * 1024)
"""Frame limits of a connection that is still to authenticate in the handler (a token)."""

_ERRORS: dict[str, type[WireError]] = {
    'auth': AuthenticationError,
    'version': ProtocolVersionError,
    'protocol': ProtocolError,
    'too-large': FrameTooLargeError,
}


def error_from_frame(frame: Frame, peer: str) -> WireError:
    """Turn an ``ERROR`` frame into the matching exception."""
    code = str(frame.header.get('code', 'unknown'))
    message = f'{peer} refused: {frame.header.get("message", "no message")}'
    cls = _ERRORS.get(code)
    if cls is None:
        return RemoteError(code, message)
    return cls(message)


def check_reply(frame: Frame, request_id: int, peer: str) -> Frame:
    """Return ``frame`` if it answers ``request_id``; raise its error if it is ``ERROR``.

    Raises:
        ProtocolError: the frame answers another request (the caller must drop the
            connection: its replies are out of step).
    """
    if frame.type == ERROR:
        raise error_from_frame(frame, peer)
    if frame.request_id != request_id:
        raise ProtocolError(f'{peer} answered request {frame.request_id}, expected {request_id}')
    return frame


def hello_header(nonce: bytes, client: str) -> dict[str, Any]:
    """Header of the client's ``HELLO``."""
    return {'nonce': nonce.hex(), 'client': client}


def parse_hello(frame: Frame) -> bytes:
    """Return the client nonce of a ``HELLO`` frame."""
    try:
        nonce = bytes.fromhex(frame.header['nonce'])
    except (KeyError, TypeError, ValueError) as e:
        raise ProtocolError('HELLO without a valid nonce') from e
    if len(nonce) != _auth.NONCE_BYTES:
        raise ProtocolError('HELLO nonce has the wrong length')
    return nonce


def challenge_header(
    secret: bytes | None, client_nonce: bytes, server_nonce: bytes
) -> dict[str, Any]:
    """Header of the server's ``CHALLENGE``."""
    if secret is None:
        return {'nonce': server_nonce.hex(), 'auth': 'none'}
    return {
        'nonce': server_nonce.hex(),
        'auth': 'hmac-sha256',
        'proof': _auth.server_proof(secret, client_nonce, server_nonce),
    }


def answer_challenge(
    frame: Frame, secret: bytes | None, client_nonce: bytes, peer: str
) -> dict[str, Any]:
    """Check the server's proof and return the header of the client's ``AUTH``."""
    if frame.type == ERROR:
        raise error_from_frame(frame, peer)
    if frame.type != CHALLENGE:
        raise ProtocolError(f'{peer} sent message type {frame.type} instead of CHALLENGE')
    try:
        server_nonce = bytes.fromhex(frame.header['nonce'])
    except (KeyError, TypeError, ValueError) as e:
        raise ProtocolError(f'{peer} sent a CHALLENGE without a valid nonce') from e
    if frame.header.get('auth') == 'none':
        return {}
    if secret is None:
        raise AuthenticationError(
            f'{peer} requires a shared secret and none was given: pass the secret of the '
            'server (or set it in the environment the server documents)',
        )
    expected = _auth.server_proof(secret, client_nonce, server_nonce)
    if not _auth.verify(expected, frame.header.get('proof')):
        raise AuthenticationError(
            f'{peer} could not prove it knows the shared secret: the secrets differ '
            '(or this is not the server you meant to reach)',
        )
    return {'proof': _auth.client_proof(secret, client_nonce, server_nonce)}


def check_auth(
    frame: Frame, secret: bytes | None, client_nonce: bytes, server_nonce: bytes
) -> None:
    """Check the client's ``AUTH`` frame (server side)."""
    if secret is None:
        return
    expected = _auth.client_proof(secret, client_nonce, server_nonce)
    if not _auth.verify(expected, frame.header.get('proof')):
        raise AuthenticationError('client failed the challenge: wrong shared secret')


def check_welcome(frame: Frame, peer: str) -> dict[str, Any]:
    """Check the server's final answer and return its header."""
    if frame.type == ERROR:
        raise error_from_frame(frame, peer)
    if frame.type != WELCOME:
        raise ProtocolError(f'{peer} sent message type {frame.type} instead of WELCOME')
    return frame.header
