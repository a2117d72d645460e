"""The hosted exchange's frames: one WebSocket binary message is a 4-byte header length,
a JSON header, then the raw body (an agent envelope, or nothing)."""

from __future__ import annotations

import json
import struct
from typing import Any

from tether.exceptions import ProtocolError

__all__ = ['OVERHEAD', 'TOKEN_HEADER', 'pack', 'unpack']

_LEN = struct.Struct('>I')
#: Room a frame needs beyond its body (its header), counted in the per-connection limit.
OVERHEAD = 16384
TOKEN_HEADER = 'Authorization'


def pack(header: dict[str, Any], body: bytes | memoryview = b'') -> bytes:
    """One frame: ``header`` (JSON) then ``body``."""
    head = json.dumps(header, separators=(',', ':')).encode()
    return b''.join([_LEN.pack(len(head)), head, body])


def unpack(data: bytes | str) -> tuple[dict[str, Any], memoryview]:
    """The header and body of a frame.

    Raises:
        ProtocolError: if ``data`` is not a frame.
    """
    if isinstance(data, str):
        raise ProtocolError('the hosted exchange speaks binary frames, got a text message')
    view = memoryview(data)
    if view.nbytes < _LEN.size:
        raise ProtocolError(f'frame of {view.nbytes} bytes is shorter than its length prefix')
    (hlen,) = _LEN.unpack(view[: _LEN.size])
    if hlen > min(OVERHEAD, view.nbytes - _LEN.size):
        raise ProtocolError(f'frame header of {hlen} bytes is longer than allowed or sent')
    try:
        header = json.loads(bytes(view[_LEN.size : _LEN.size + hlen]))
    except ValueError as e:
        raise ProtocolError(f'frame header is not JSON: {e}') from e
    if not isinstance(header, dict):
        raise ProtocolError('frame header is not a JSON object')
    return header, view[_LEN.size + hlen :]
