"""A whole frame held in memory (``decode_frame``), and the two formats that read one with it."""

from __future__ import annotations

import pytest

from tether._wire import PREFIX, Limits, decode_frame, encode_head, flatten
from tether.agents._codec import Codec
from tether.agents.message import Envelope, Rejected, Request, decode, encode
from tether.exceptions import (
    FrameTooLargeError,
    MessageRejectedError,
    ProtocolError,
    ProtocolVersionError,
)
from tether.faas import _frames


def _frame(mtype: int, header: dict[str, object], payloads: list[bytes], **kw: int) -> bytes:
    sizes, buffers = flatten(payloads)
    return b''.join([encode_head(mtype, header, sizes, **kw), *buffers])


def test_a_frame_in_memory_decodes_with_views_of_its_payloads() -> None:
    raw = bytearray(_frame(40, {'k': 'é'}, [b'abc', b'', b'de'], request_id=9, flags=2))
    flags, mtype, rid, header, payloads = decode_frame(raw, Limits())
    assert (flags, mtype, rid, header) == (2, 40, 9, {'k': 'é'})
    assert [bytes(p) for p in payloads] == [b'abc', b'', b'de']
    raw[-1:] = b'E'  # zero-copy: the views see the buffer
    assert bytes(payloads[2]) == b'dE'
    assert decode_frame(memoryview(_frame(41, {}, [])), Limits())[1:4] == (41, 0, {})


def test_every_truncation_is_a_protocol_error() -> None:
    raw = _frame(40, {'tasks': [1, 2]}, [b'abc', b'defg'])
    for cut in range(len(raw)):
        with pytest.raises(ProtocolError):
            decode_frame(raw[:cut], Limits())
    with pytest.raises(ProtocolError, match='does not match its frame'):
        decode_frame(raw + b'x', Limits())


def test_bad_magic_versions_limits_and_headers_are_refused() -> None:
    raw = _frame(40, {'a': 1}, [b'xyz'])
    with pytest.raises(ProtocolError, match='not a tether wire frame'):
        decode_frame(b'XXXX' + raw[4:], Limits())
    # Another version is named before its sizes and header are read (their layout may differ).
    other = raw[:4] + bytes([2]) + raw[5 : PREFIX.size] + b'\xff' * 8
    with pytest.raises(ProtocolVersionError, match='wire protocol 2'):
        decode_frame(other, Limits())
    with pytest.raises(FrameTooLargeError):
        decode_frame(raw, Limits(max_frame=2))
    with pytest.raises(ProtocolError, match='JSON object'):
        decode_frame(_frame(40, {}, [])[: PREFIX.size - 8] + b'\0\0\0\x02\0\0\0\0[]', Limits())
    deep = '[' * 100_000 + ']' * 100_000
    head = encode_head(40, {'x': 1}, [])
    nested = head[: PREFIX.size - 8] + len(deep).to_bytes(4, 'big') + b'\0\0\0\0' + deep.encode()
    with pytest.raises(ProtocolError, match='nests too deeply'):
        decode_frame(nested, Limits())


def test_agent_envelopes_and_faas_messages_refuse_corrupt_bytes_with_their_errors() -> None:
    raw = encode(Request('client-a', 'agent-b', 7, 'echo', (b'x' * 100,), {}), Codec()).to_bytes()
    assert isinstance(decode(raw, Codec()), Request)
    for cut in (10, PREFIX.size, PREFIX.size + 4, len(raw) - 1):
        with pytest.raises(MessageRejectedError, match='not a valid envelope'):
            Envelope.from_bytes(raw[:cut])
        assert isinstance(decode(raw[:cut], Codec()), Rejected)
    with pytest.raises(MessageRejectedError, match='type 40'):
        Envelope.from_bytes(_frame(40, {}, []))
    message = _frames.encode(_frames.TASKS, {'tasks': [1]}, [b'abc'])
    assert _frames.decode(message).type == _frames.TASKS
    for cut in (10, PREFIX.size, PREFIX.size + 4, len(message) - 1):
        with pytest.raises(ProtocolError):
            _frames.decode(message[:cut])
