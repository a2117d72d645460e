"""The tether wire protocol: framing, handshake and authentication for every connection.

Every tether server (node object servers, endpoints, relay, agent exchange, function
service) speaks this protocol. A frame is a fixed 24-byte prefix (magic, version, flags,
message type, request id, header length, payload count), the payload lengths, a small
JSON header, then the raw payloads, written without joining them. A connection starts
with a handshake that checks the protocol version and runs an HMAC-SHA256
challenge-response over a shared secret (never sent), optionally inside TLS.

Message types are plain integers; applications number theirs from
:data:`FIRST_APP_TYPE`. The format and the rules for evolving it are in ``docs/wire.md``.

* :class:`Server` (asyncio) dispatches each frame to a handler and sends its reply;
* :func:`connect` opens an asyncio client :class:`Connection`;
* :class:`SyncClient` is a thread-safe pool of blocking :class:`SyncConnection`;
* :class:`MemoryBudget` counts each frame's claimed payload bytes against a server's
  budget before allocating them;
* :func:`decode_frame` reads a whole frame held in bytes (a WebSocket message, a frame
  kept in Redis); :data:`PREFIX`, :func:`unpack_prefix`, :func:`check_sizes`,
  :func:`decode_header`, :func:`encode_head` and :func:`flatten` read and write the parts
  of one, for the formats that embed a frame.
"""

from __future__ import annotations

from tether._wire._aio import Server
from tether._wire._budget import MemoryBudget
from tether._wire._conn import (
    Connection,
    Handler,
    InlineHandler,
    Later,
    RawReply,
    Reply,
    SecretLookup,
    client_handshake,
    client_protocol,
    connect,
    error_reply,
    run,
)
from tether._wire._frame import (
    ERROR,
    FIRST_APP_TYPE,
    PREFIX,
    PROTOCOL_VERSION,
    Frame,
    Limits,
    Payload,
    check_sizes,
    decode_frame,
    decode_header,
    encode_head,
    encode_one,
    flatten,
    unpack_prefix,
    with_request_id,
)
from tether._wire._handshake import PRE_AUTH_LIMITS, check_reply
from tether._wire._proto import FastFrame, FastPath, FrameMemory, FrameRouter
from tether._wire._splice import Splice, SpliceEnd
from tether._wire._sync import SyncClient, SyncConnection

__all__ = [
    'Connection',
    'ERROR',
    'FIRST_APP_TYPE',
    'FastFrame',
    'FastPath',
    'Frame',
    'FrameMemory',
    'FrameRouter',
    'Handler',
    'InlineHandler',
    'Later',
    'Limits',
    'MemoryBudget',
    'PREFIX',
    'PRE_AUTH_LIMITS',
    'PROTOCOL_VERSION',
    'Payload',
    'RawReply',
    'Reply',
    'SecretLookup',
    'Server',
    'Splice',
    'SpliceEnd',
    'SyncClient',
    'SyncConnection',
    'check_reply',
    'check_sizes',
    'client_handshake',
    'client_protocol',
    'connect',
    'decode_frame',
    'decode_header',
    'encode_head',
    'encode_one',
    'error_reply',
    'flatten',
    'run',
    'unpack_prefix',
    'with_request_id',
]
