"""The handshake messages, shared by the asyncio and the synchronous sides.

1. client -> server ``HELLO {nonce, client}`` (its prefix carries the protocol version);
2. server -> client ``CHALLENGE {nonce, auth, proof}`` or ``ERROR {code: 'version'}``;
3. client -> server ``AUTH {proof}``;
4. server -> client ``WELCOME {server}`` or ``ERROR {code: 'auth'}``.

Each message has a typed, frozen record (:class:`Hello`, :class:`Challenge`,
:class:`Auth`, :class:`Welcome`, and :class:`Refusal` for any ``ERROR`` frame), checked
once by :func:`decode`; :func:`encode` is the other way.
"""

from __future__ import annotations

from typing import Any, NamedTuple

from tether._wire import _auth
from tether._wire._fields import optional
from tether._wire._frame import AUTH, CHALLENGE, ERROR, HELLO, WELCOME, Frame, Limits
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
    'Auth',
    'Challenge',
    'Hello',
    'Refusal',
    'Welcome',
    'answer_challenge',
    'challenge_header',
    'check_auth',
    'check_welcome',
    'check_reply',
    'decode',
    'decode_refusal',
    'encode',
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


class Hello(NamedTuple):
    """``HELLO``: the client's nonce and what it says it is."""

    nonce: bytes
    client: str = ''


class Challenge(NamedTuple):
    """``CHALLENGE``: the server's nonce, and its proof (``auth`` ``'none'``: no secret)."""

    nonce: bytes
    auth: str
    proof: str | None = None


class Auth(NamedTuple):
    """``AUTH``: the client's proof (``None``: the server asked for none)."""

    proof: str | None = None


class Welcome(NamedTuple):
    """``WELCOME``: the server's name and protocol version."""

    server: str = ''
    version: int | None = None


class Refusal(NamedTuple):
    """``ERROR``: why a request (or the handshake) was refused."""

    code: str
    message: str


Message = Hello | Challenge | Auth | Welcome | Refusal


def _nonce(header: dict[str, Any], what: str) -> bytes:
    try:
        nonce = bytes.fromhex(header['nonce'])
    except (KeyError, TypeError, ValueError) as e:
        raise ProtocolError(f'{what} without a valid nonce') from e
    if len(nonce) != _auth.NONCE_BYTES:
        raise ProtocolError(f'{what} nonce has the wrong length')
    return nonce


def decode(frame: Frame, peer: str = 'the peer') -> Message:
    """The record of a handshake (or ``ERROR``) frame.

    Raises:
        ProtocolError: the frame is of another type, or its header does not fit its type.
    """
    h = frame.header
    if frame.type == ERROR:
        code, message = h.get('code'), h.get('message')
        return Refusal(
            code if isinstance(code, str) else 'unknown',
            message if isinstance(message, str) else 'no message',
        )
    if frame.type == HELLO:
        return Hello(_nonce(h, 'HELLO'), str(h.get('client', '')))
    if frame.type == CHALLENGE:
        auth = optional(h, 'auth', str, 'CHALLENGE', 'hmac-sha256')
        return Challenge(
            _nonce(h, f'{peer} sent a CHALLENGE'), auth, optional(h, 'proof', str, 'CHALLENGE')
        )
    if frame.type == AUTH:
        return Auth(optional(h, 'proof', str, 'AUTH'))
    if frame.type == WELCOME:
        return Welcome(str(h.get('server', '')), optional(h, 'version', int, 'WELCOME'))
    raise ProtocolError(f'{peer} sent message type {frame.type} during the handshake')


_TYPES = {Hello: HELLO, Challenge: CHALLENGE, Auth: AUTH, Welcome: WELCOME, Refusal: ERROR}


def encode(message: Message) -> tuple[int, dict[str, Any]]:
    """The message type and JSON header of a handshake record."""
    header: dict[str, Any] = {}
    for name, value in zip(message._fields, message, strict=True):
        if value is not None:
            header[name] = value.hex() if isinstance(value, bytes) else value
    return _TYPES[type(message)], header


def decode_refusal(frame: Frame) -> Refusal:
    """The record of an ``ERROR`` frame."""
    refusal = decode(frame)
    assert isinstance(refusal, Refusal)
    return refusal


def error_from_frame(frame: Frame, peer: str) -> WireError:
    """Turn an ``ERROR`` frame into the matching exception."""
    refusal = decode_refusal(frame)
    code = refusal.code
    message = f'{peer} refused: {refusal.message}'
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
    return encode(Hello(nonce, client))[1]


def parse_hello(frame: Frame) -> Hello:
    """The client's ``HELLO`` (nonce and name).

    Raises:
        ProtocolError: the frame is not a well-formed ``HELLO``.
    """
    hello = decode(frame)
    if not isinstance(hello, Hello):
        raise ProtocolError(f'first message has type {frame.type}, expected HELLO')
    return hello


def challenge_header(
    secret: bytes | None, client_nonce: bytes, server_nonce: bytes
) -> dict[str, Any]:
    """Header of the server's ``CHALLENGE``."""
    if secret is None:
        return encode(Challenge(server_nonce, 'none'))[1]
    proof = _auth.server_proof(secret, client_nonce, server_nonce)
    return encode(Challenge(server_nonce, 'hmac-sha256', proof))[1]


def answer_challenge(
    frame: Frame, secret: bytes | None, client_nonce: bytes, peer: str
) -> dict[str, Any]:
    """Check the server's proof and return the header of the client's ``AUTH``."""
    if frame.type == ERROR:
        raise error_from_frame(frame, peer)
    if frame.type != CHALLENGE:
        raise ProtocolError(f'{peer} sent message type {frame.type} instead of CHALLENGE')
    challenge = decode(frame, peer)
    assert isinstance(challenge, Challenge)
    if challenge.auth == 'none':
        return {}
    if secret is None:
        raise AuthenticationError(
            f'{peer} requires a shared secret and none was given: pass the secret of the '
            'server (or set it in the environment the server documents)',
        )
    expected = _auth.server_proof(secret, client_nonce, challenge.nonce)
    if not _auth.verify(expected, challenge.proof):
        raise AuthenticationError(
            f'{peer} could not prove it knows the shared secret: the secrets differ '
            '(or this is not the server you meant to reach)',
        )
    return encode(Auth(_auth.client_proof(secret, client_nonce, challenge.nonce)))[1]


def check_auth(
    frame: Frame, secret: bytes | None, client_nonce: bytes, server_nonce: bytes
) -> None:
    """Check the client's ``AUTH`` frame (server side)."""
    if secret is None:
        return
    auth = decode(frame)
    assert isinstance(auth, Auth)
    expected = _auth.client_proof(secret, client_nonce, server_nonce)
    if not _auth.verify(expected, auth.proof):
        raise AuthenticationError('client failed the challenge: wrong shared secret')


def check_welcome(frame: Frame, peer: str) -> dict[str, Any]:
    """Check the server's final answer and return its header (what it said of itself)."""
    if frame.type == ERROR:
        raise error_from_frame(frame, peer)
    if frame.type != WELCOME:
        raise ProtocolError(f'{peer} sent message type {frame.type} instead of WELCOME')
    decode(frame, peer)
    return frame.header
