"""Envelope headers: every field is checked, hostile ones are refused, never raised."""

from __future__ import annotations

from typing import Any

import pytest

from tether.agents._codec import Codec
from tether.agents.message import Envelope, Rejected, Request, decode, encode


def test_a_request_survives_encode_and_decode() -> None:
    codec = Codec()
    msg = Request('client-a', 'agent-b', 7, 'echo', (b'x' * 1000, 2), {'k': 'v'})
    header, payloads = encode(msg, codec)
    back = decode(Envelope(header, [memoryview(p) for p in payloads]), codec)
    assert back == msg


@pytest.mark.parametrize(
    'field',
    [('k', ['request']), ('k', {'a': 1}), ('k', 'nonsense'), ('s', ['x']), ('t', True)],
)
def test_a_hostile_header_field_is_refused(field: tuple[str, Any]) -> None:
    header: dict[str, Any] = {'v': 1, 'k': 'ping', 's': 'client-a', 'd': 'agent-b', 't': 3}
    header[field[0]] = field[1]
    out = decode(Envelope(header, []), Codec())
    assert isinstance(out, Rejected)
    assert 'not valid' in str(out.error)
