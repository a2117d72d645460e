"""Frame layout: a fixed binary prefix, payload lengths, a JSON header, raw payloads.

See ``docs/wire.md`` for the byte-level description and the rules for evolving it.
"""

from __future__ import annotations

import dataclasses
import json
import struct
from collections.abc import Sequence
from json import encoder as _json_encoder
from typing import Any

from tether.exceptions import FrameTooLargeError, ProtocolError, ProtocolVersionError

__all__ = [
    'AUTH',
    'CHALLENGE',
    'ERROR',
    'FIRST_APP_TYPE',
    'Frame',
    'HELLO',
    'Limits',
    'MAGIC',
    'PREFIX',
    'PROTOCOL_VERSION',
    'Payload',
    'WELCOME',
    'check_sizes',
    'decode_frame',
    'decode_header',
    'encode_head',
    'encode_one',
    'flatten',
    'payload_sizes',
    'unpack_prefix',
    'with_request_id',
]

MAGIC = b'TTHR'
PROTOCOL_VERSION = 1

# magic, version, flags, message type, request id, header length, payload count
PREFIX = struct.Struct('!4sBBHQII')
_ONE_SIZE = struct.Struct('!Q')
_REQUEST_ID_AT = 8  # offset of the request id in PREFIX

# One encoder for every header: json.dumps with separators builds a new one per call.
_ENCODER = json.JSONEncoder(separators=(',', ':'))
_DECODER = json.JSONDecoder()
# The C encoder and scanner behind those two, kept instead of rebuilt per header. The
# encoder skips the circular-reference check: whatever it cannot encode (a cycle
# included) goes through _ENCODER again for the usual error.
_C_ENCODER: Any = _json_encoder.c_make_encoder  # type: ignore[attr-defined]
_ENCODE_FAST = (
    None
    if _C_ENCODER is None
    else _C_ENCODER(
        None,
        _ENCODER.default,
        _json_encoder.encode_basestring_ascii,
        None,
        ':',
        ',',
        False,
        False,
        True,
    )
)
_SCAN: Any = _DECODER.scan_once  # type: ignore[attr-defined]

# Message types 0-31 belong to the wire core; applications number theirs from 32.
HELLO = 1
CHALLENGE = 2
AUTH = 3
WELCOME = 4
ERROR = 5
FIRST_APP_TYPE = 32

Payload = Any
"""A payload to send: one bytes-like object, or a sequence of them sent back to back."""


@dataclasses.dataclass(frozen=True, slots=True)
class Limits:
    """Bounds a receiver enforces before allocating anything.

    Attributes:
        max_header: Largest JSON header, in bytes.
        max_payloads: Most payloads in one frame.
        max_frame: Largest sum of payload lengths in one frame, in bytes.
        handshake_timeout: Seconds the whole handshake may take.
        frame_timeout: Seconds a partly received frame may go without any new byte
            before the connection is dropped (``None``: no limit). Waiting between frames
            is not bounded by it.
    """

    max_header: int = 1 << 20
    max_payloads: int = 1 << 16
    max_frame: int = 1 << 36
    handshake_timeout: float = 10.0
    frame_timeout: float | None = 60.0


@dataclasses.dataclass(slots=True)
class Frame:
    """One received message.

    Attributes:
        type: Message type (an application-defined integer, or a core type).
        header: The decoded JSON header (a dict).
        payloads: The raw payloads, each in its own buffer.
        request_id: Matches a reply to its request.
        flags: Application-defined bits.
        version: The protocol version the sender spoke.
    """

    type: int
    header: dict[str, Any]
    payloads: list[Any]
    request_id: int = 0
    flags: int = 0
    version: int = PROTOCOL_VERSION


def _parts(payload: Payload) -> list[memoryview]:
    if isinstance(payload, bytes | bytearray | memoryview):
        return [memoryview(payload).cast('B')]
    try:
        return [memoryview(payload).cast('B')]
    except TypeError:
        return [memoryview(p).cast('B') for p in payload]


def flatten(payloads: Sequence[Payload]) -> tuple[list[int], list[memoryview]]:
    """Return each payload's length and the flat list of buffers to write."""
    sizes: list[int] = []
    buffers: list[memoryview] = []
    for payload in payloads:
        parts = _parts(payload)
        if len(parts) == 1:  # the usual case: one buffer, no generator
            n = parts[0].nbytes
            sizes.append(n)
            if n:
                buffers.append(parts[0])
            continue
        sizes.append(sum(p.nbytes for p in parts))
        buffers.extend(p for p in parts if p.nbytes)
    return sizes, buffers


def payload_sizes(payloads: Sequence[Payload]) -> list[int]:
    """Return the length of each payload."""
    return flatten(payloads)[0]


def _pack_sizes(sizes: Sequence[int]) -> bytes:
    if len(sizes) == 1:
        return _ONE_SIZE.pack(sizes[0])
    return struct.pack(f'!{len(sizes)}Q', *sizes) if sizes else b''


def _encode_json(header: dict[str, Any]) -> str:
    if _ENCODE_FAST is not None:
        try:
            return ''.join(_ENCODE_FAST(header, 0))
        except (TypeError, ValueError, RecursionError):
            pass
    return _ENCODER.encode(header)


def encode_head(  # noqa: PLR0917
    mtype: int,
    header: dict[str, Any] | None,
    sizes: Sequence[int],
    request_id: int = 0,
    flags: int = 0,
    version: int = PROTOCOL_VERSION,
) -> bytes:
    """Encode everything of a frame that precedes its payloads."""
    body = _encode_json(header).encode() if header else b''
    return b''.join(
        (
            PREFIX.pack(MAGIC, version, flags, mtype, request_id, len(body), len(sizes)),
            _pack_sizes(sizes),
            body,
        ),
    )


def encode_one(mtype: int, body: bytes, request_id: int, payload: Any = None) -> bytearray:
    """A whole frame of at most one payload whose JSON header is already encoded (``body``).

    For a server's small replies of a fixed shape: one buffer, written as it is (a
    ``RawReply``), with no header dict, encoder or payload list on the way.
    """
    if payload is None:
        frame = bytearray(PREFIX.size + len(body))
        PREFIX.pack_into(frame, 0, MAGIC, PROTOCOL_VERSION, 0, mtype, request_id, len(body), 0)
        frame[PREFIX.size :] = body
        return frame
    n = len(payload)
    start = PREFIX.size + 8 + len(body)
    frame = bytearray(start + n)
    PREFIX.pack_into(frame, 0, MAGIC, PROTOCOL_VERSION, 0, mtype, request_id, len(body), 1)
    _ONE_SIZE.pack_into(frame, PREFIX.size, n)
    frame[PREFIX.size + 8 : start] = body
    frame[start:] = payload
    return frame


def with_request_id(raw: Any, request_id: int) -> bytearray:
    """A copy of the encoded frame ``raw`` that carries ``request_id`` instead of its own."""
    frame = bytearray(raw)
    _ONE_SIZE.pack_into(frame, _REQUEST_ID_AT, request_id)
    return frame


def unpack_prefix(
    data: Any, limits: Limits, offset: int = 0
) -> tuple[int, int, int, int, int, int]:
    """Check and decode a prefix: ``(version, flags, type, request_id, hlen, count)``.

    ``data`` is any buffer holding the prefix at ``offset`` (read in place, not copied).
    The version is returned, not checked: the caller decides what it accepts.

    Raises:
        ProtocolError: if the magic bytes are wrong (not a tether peer).
        FrameTooLargeError: if the header or payload count exceed ``limits``.
    """
    magic, version, flags, mtype, rid, hlen, count = PREFIX.unpack_from(data, offset)
    if magic != MAGIC:
        raise ProtocolError(f'not a tether wire frame (magic {magic!r}, expected {MAGIC!r})')
    if hlen > limits.max_header:
        raise FrameTooLargeError(
            f'frame header of {hlen} bytes exceeds the limit of {limits.max_header}',
        )
    if count > limits.max_payloads:
        raise FrameTooLargeError(
            f'frame with {count} payloads exceeds the limit of {limits.max_payloads}',
        )
    return version, flags, mtype, rid, hlen, count


def check_sizes(raw: Any, count: int, limits: Limits, offset: int = 0) -> tuple[int, ...]:
    """Decode the payload lengths (in ``raw`` at ``offset``) and check their sum."""
    if count == 1:
        sizes: tuple[int, ...] = _ONE_SIZE.unpack_from(raw, offset)
    else:
        sizes = struct.unpack_from(f'!{count}Q', raw, offset) if count else ()
    total = sum(sizes)
    if total > limits.max_frame:
        raise FrameTooLargeError(
            f'frame of {total} payload bytes exceeds the limit of {limits.max_frame}',
        )
    return sizes


def decode_header(raw: Any) -> dict[str, Any]:
    """Decode a UTF-8 JSON header from any buffer (empty gives an empty dict)."""
    if not raw:
        return {}
    try:
        text = str(raw, 'utf-8')
        try:
            header, end = _SCAN(text, 0)
        except StopIteration:
            end = -1
        if end != len(text):  # whitespace, trailing data or an error: the full decoder
            header = _DECODER.decode(text)
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise ProtocolError(f'frame header is not valid JSON: {e}') from e
    if not isinstance(header, dict):
        raise ProtocolError(f'frame header must be a JSON object, got {type(header).__name__}')
    return header


def decode_frame(data: Any, limits: Limits) -> tuple[int, int, int, dict[str, Any], list[Any]]:
    """Decode one whole frame held in memory: ``(flags, type, request_id, header, payloads)``.

    ``data`` is any buffer holding exactly one frame (a WebSocket message, an HTTP body, a
    value kept in Redis); the payloads are zero-copy views of it.

    Raises:
        ProtocolError: if the bytes are not exactly one well-formed frame (too short, wrong
            magic, a header that is not a JSON object or nests too deeply, a length that
            does not match the framing).
        ProtocolVersionError: if the frame is of another protocol version (checked before
            its sizes and header are read).
        FrameTooLargeError: if it exceeds ``limits``.
    """
    view = memoryview(data)
    if view.format != 'B':
        view = view.cast('B')
    size = view.nbytes
    if size < PREFIX.size:
        raise ProtocolError(f'message of {size} bytes is shorter than a frame prefix')
    version, flags, mtype, rid, hlen, count = unpack_prefix(view, limits)
    if version != PROTOCOL_VERSION:
        raise ProtocolVersionError(
            f'message speaks wire protocol {version}, this side speaks {PROTOCOL_VERSION}',
        )
    start = PREFIX.size + 8 * count
    pos = start + hlen
    if pos > size:
        raise ProtocolError(
            f'message of {size} bytes is shorter than its framing ({pos} bytes)',
        )
    sizes = check_sizes(view, count, limits, PREFIX.size)
    try:
        header = decode_header(view[start:pos])
    except RecursionError as e:  # JSON nested deeper than the parser can go
        raise ProtocolError('frame header nests too deeply') from e
    total = sum(sizes)
    if pos + total != size:
        raise ProtocolError(
            f'message of {size} bytes does not match its frame '
            f'({pos} bytes of framing and {total} of payloads)',
        )
    payloads = []
    for n in sizes:
        payloads.append(view[pos : pos + n])
        pos += n
    return flags, mtype, rid, header, payloads
