"""Handshake records and header fields: checked once at decode, with a clear error."""

from __future__ import annotations

from typing import Any

import pytest

from tether._wire import Frame
from tether._wire._auth import NONCE_BYTES
from tether._wire._fields import field, optional
from tether._wire._frame import AUTH, CHALLENGE, ERROR, HELLO, WELCOME
from tether._wire._handshake import (
    Auth,
    Challenge,
    Hello,
    Refusal,
    Welcome,
    decode,
    encode,
    error_from_frame,
)
from tether.exceptions import AuthenticationError, ProtocolError, RemoteError

NONCE = bytes(range(NONCE_BYTES))


@pytest.mark.parametrize(
    'message',
    [
        Hello(NONCE, 'client-1'),
        Challenge(NONCE, 'none'),
        Challenge(NONCE, 'hmac-sha256', 'proof'),
        Auth('proof'),
        Auth(),
        Welcome('server', 1),
        Refusal('auth', 'no'),
    ],
)
def test_handshake_records_round_trip(message: Any) -> None:
    mtype, header = encode(message)
    assert decode(Frame(mtype, header, [])) == message


@pytest.mark.parametrize(
    ('mtype', 'header', 'match'),
    [
        (HELLO, {}, 'HELLO without a valid nonce'),
        (HELLO, {'nonce': 'zz'}, 'HELLO without a valid nonce'),
        (HELLO, {'nonce': 'abcd'}, 'wrong length'),
        (CHALLENGE, {'nonce': NONCE.hex(), 'proof': 5}, "'proof' must be str"),
        (AUTH, {'proof': ['x']}, "'proof' must be str"),
        (WELCOME, {'version': 'one'}, "'version' must be int"),
        (99, {}, 'message type 99 during the handshake'),
    ],
)
def test_malformed_handshake_messages_are_protocol_errors(
    mtype: int, header: dict[str, Any], match: str
) -> None:
    with pytest.raises(ProtocolError, match=match):
        decode(Frame(mtype, header, []))


def test_an_error_frame_of_any_shape_is_a_refusal() -> None:
    assert decode(Frame(ERROR, {'code': 5}, [])) == Refusal('unknown', 'no message')
    error = error_from_frame(Frame(ERROR, {'code': 'auth', 'message': 'm'}, []), 'peer')
    assert isinstance(error, AuthenticationError)
    error = error_from_frame(Frame(ERROR, {'code': 'busy', 'message': 'm'}, []), 'peer')
    assert isinstance(error, RemoteError)
    assert error.code == 'busy'


def test_fields_name_the_message_and_the_field() -> None:
    header = {'n': 1, 'flag': True, 's': 'x'}
    assert field(header, 'n', int, 'M') == 1
    assert optional(header, 'missing', str, 'M', 'd') == 'd'
    with pytest.raises(ProtocolError, match="M without the field 'x'"):
        field(header, 'x', int, 'M')
    with pytest.raises(ProtocolError, match="M: field 'flag' must be int, got bool"):
        field(header, 'flag', int, 'M')
    with pytest.raises(ProtocolError, match="M: field 's' must be int or float, got str"):
        optional(header, 's', (int, float), 'M')
