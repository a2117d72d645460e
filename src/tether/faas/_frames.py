"""tether wire frames as single messages (WebSocket messages and HTTP bodies).

The service, its endpoints and the SDK exchange binary messages framed exactly like every
other tether connection (:mod:`tether._wire`): the versioned fixed prefix, the payload
lengths, a JSON header, then the raw payloads. Control data is JSON; only payloads are
bytes, and the service never deserializes them.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from tether._wire._frame import (
    PREFIX,
    PROTOCOL_VERSION,
    Frame,
    Limits,
    check_sizes,
    decode_header,
    encode_head,
    flatten,
    unpack_prefix,
)
from tether.exceptions import ProtocolError, ProtocolVersionError

__all__ = [
    'ACK',
    'CONTENT_TYPE',
    'FUNCTION',
    'HEARTBEAT',
    'HELLO',
    'RESULTS',
    'RESULTS_OK',
    'SUBMIT',
    'SUBMITTED',
    'SUBMIT_FAILED',
    'TASKS',
    'decode',
    'encode',
]

CONTENT_TYPE = 'application/x-tether-frame'

# Message types (tether._wire numbers applications' types from 32).
HELLO = 40  # endpoint -> service: held task ids, allowlist, engine
TASKS = 41  # service -> endpoint: tasks (one payload each)
ACK = 42  # endpoint -> service: tasks handed to workers / client -> service: results taken
RESULTS = 43  # endpoint -> service -> client: results (one payload each)
RESULTS_OK = 44  # service -> endpoint: results stored durably, forget them
HEARTBEAT = 45  # endpoint -> service: workers, idle, pending
SUBMIT = 46  # client -> service (HTTP body, or on a result stream): a batch of tasks
FUNCTION = 47  # client -> service (HTTP body): a function to register
SUBMITTED = 48  # service -> client (result stream): the batch ``request`` is recorded
SUBMIT_FAILED = 49  # service -> client (result stream): it was refused (error, message)
ACKED = 50  # service -> client (result stream): every ACK up to the one naming ``sync`` is stored


def encode(mtype: int, header: dict[str, Any], payloads: Sequence[Any] = ()) -> bytes:
    """One message: prefix, sizes, JSON header, payloads."""
    sizes, buffers = flatten(list(payloads))
    return b''.join([encode_head(mtype, header, sizes), *buffers])


def decode(data: bytes | bytearray | memoryview, limits: Limits | None = None) -> Frame:
    """Parse one message; payloads are zero-copy views of ``data``.

    Raises:
        ProtocolError: if the bytes are not one well-formed frame.
        ProtocolVersionError: if the frame carries another protocol version.
        FrameTooLargeError: if it exceeds ``limits``.
    """
    limits = limits or Limits()
    view = memoryview(data).cast('B')
    if view.nbytes < PREFIX.size:
        raise ProtocolError(f'message of {view.nbytes} bytes is shorter than a frame prefix')
    version, flags, mtype, rid, hlen, count = unpack_prefix(bytes(view[: PREFIX.size]), limits)
    if version != PROTOCOL_VERSION:
        raise ProtocolVersionError(
            f'message speaks wire protocol {version}, this side speaks {PROTOCOL_VERSION}',
        )
    pos = PREFIX.size
    sizes = check_sizes(bytes(view[pos : pos + 8 * count]), count, limits)
    pos += 8 * count
    header = decode_header(bytes(view[pos : pos + hlen]))
    pos += hlen
    if pos + sum(sizes) != view.nbytes:
        raise ProtocolError(
            f'message of {view.nbytes} bytes does not match its frame '
            f'({pos} bytes of framing and {sum(sizes)} of payloads)',
        )
    payloads = []
    for size in sizes:
        payloads.append(view[pos : pos + size])
        pos += size
    return Frame(mtype, header, payloads, rid, flags, version)
