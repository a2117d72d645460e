"""The object servers' messages (node and endpoint): one typed, frozen record per kind.

A request's header is checked once, here, when it is decoded (:func:`decode`), and the
server reads the record's attributes; a reply's header is checked by :func:`decode_reply`
before a client uses any payload. :func:`encode` is the other way: a record to the JSON
header it travels as. The message types are in :mod:`tether._serve.codes`.

Records are named tuples (immutable, slotted): building one costs about what a tuple
does, a third of a frozen dataclass on this machine's Python.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, NamedTuple

from tether._serve import codes
from tether._wire._fields import field, optional
from tether.exceptions import ProtocolError

__all__ = [
    'ChannelReply',
    'ChannelRequest',
    'Empty',
    'Message',
    'NodeStatus',
    'ObjectReply',
    'ObjectRequest',
    'PeersRequest',
    'decode',
    'decode_object',
    'decode_reply',
    'decode_status',
    'encode',
]


class ObjectRequest(NamedTuple):
    """``PUT``, ``GET``, ``EXISTS`` or ``EVICT`` of objects.

    Attributes:
        ids: The object ids (each a valid id, see :func:`codes.valid_id`).
        endpoint: The UUID or name of the endpoint that owns them (an endpoint's
            requests; ``None``: the server's own).
    """

    ids: list[str]
    endpoint: str | None = None


class PeersRequest(NamedTuple):
    """``PEERS``: the peer channels, the relay's endpoints, or the NAT check."""

    relay: bool = False
    check_nat: bool = False


class ChannelRequest(NamedTuple):
    """``CHANNEL``: a peer channel of the connection's own to ``endpoint``."""

    endpoint: str


class Empty(NamedTuple):
    """A request whose header carries nothing (``STATUS``, ``SHUTDOWN``, ``WARM_UP``)."""


Message = ObjectRequest | PeersRequest | ChannelRequest | Empty


class ObjectReply(NamedTuple):
    """The ``OK`` that answers an object request.

    Attributes:
        ids: The ids it answers for (a client checks they are the ones it asked for).
        found: For a ``GET``, whether each object was found (one payload per ``True``).
        exists: For an ``EXISTS``, whether each object exists.
    """

    ids: list[str]
    found: list[bool] | None = None
    exists: list[bool] | None = None


class ChannelReply(NamedTuple):
    """The ``OK`` that answers ``CHANNEL``: the path of the channel."""

    path: str


class NodeStatus(NamedTuple):
    """The ``OK`` that answers a node server's ``STATUS`` (``tether node status``).

    Attributes:
        name: The server's name.
        pid: Its process id.
        address: The address written into its keys.
        bind: The address it listens on.
        all_interfaces: Whether ``bind`` is every interface.
        tls: Whether it speaks TLS.
        port: The port it listens on.
        objects: Objects held (in memory and spilled).
        memory_used: Bytes of objects in memory.
        memory_limit: Its memory budget for objects.
        spilled_objects: Objects spilled to disk now.
        disk_used: Bytes of spilled objects.
        spills: Objects spilled so far.
        spill_dir: Its private spill folder.
        inflight: Bytes of requests being received into memory.
        disk_inflight: Bytes of requests being received into spill files.
        frame_timeouts: Connections dropped for a stalled request.
        pool_bytes: Bytes held by its buffer pool.
        pool_hits: Buffers taken from the pool so far.
        clients: Clients connected now.
        refused: Connections refused so far.
        requests: Requests answered so far.
        peers: The distinct client hosts seen.
        metrics: The address of its Prometheus endpoint (``None``: none).
        uptime: Seconds since it started.
    """

    name: str
    pid: int
    address: str
    bind: str
    all_interfaces: bool
    tls: bool
    port: int
    objects: int
    memory_used: int
    memory_limit: int
    spilled_objects: int
    disk_used: int
    spills: int
    spill_dir: str
    inflight: int
    disk_inflight: int
    frame_timeouts: int
    pool_bytes: int
    pool_hits: int
    clients: int
    refused: int
    requests: int
    peers: list[str]
    metrics: tuple[str, int] | None
    uptime: float


# The type of each field of a STATUS reply, in the record's order (None: the address).
_STATUS_KINDS: tuple[type | tuple[type, ...] | None, ...] = (
    str, int, str, str, bool, bool, int, int, int, int, int, int, int, str,
    int, int, int, int, int, int, int, int, list, None, (int, float),
)  # fmt: skip


def decode_status(header: Mapping[str, Any]) -> NodeStatus:
    """The record of a node server's ``STATUS`` reply (the inverse of ``_asdict()``).

    Raises:
        ProtocolError: a field is missing or of another type.
    """
    values: list[Any] = []
    for name, kind in zip(NodeStatus._fields, _STATUS_KINDS, strict=True):
        if kind is not None:
            values.append(field(header, name, kind, 'STATUS reply'))
            continue
        address = optional(header, name, list, 'STATUS reply')
        if address is not None:
            if len(address) != 2 or type(address[0]) is not str or type(address[1]) is not int:
                raise ProtocolError(f'STATUS reply: field {name!r} must be [host, port]')
            address = (address[0], address[1])
        values.append(address)
    if not all(type(p) is str for p in values[NodeStatus._fields.index('peers')]):
        raise ProtocolError("STATUS reply: field 'peers' must be a list of strings")
    return NodeStatus(*values)


_BAD_IDS = 'ids must be a list of object ids'


_new = tuple.__new__  # builds a record without the Python-level __new__ of a named tuple


def decode(mtype: int, header: Mapping[str, Any]) -> Message:
    """The record of a request of type ``mtype`` with this header.

    Raises:
        ProtocolError: the header does not fit the message type (or the type is unknown).
    """
    if mtype in codes.OBJECT_TYPES:
        return decode_object(header)
    if mtype == codes.PEERS:
        return PeersRequest(
            bool(optional(header, 'relay', bool, 'PEERS', False)),
            bool(optional(header, 'check_nat', bool, 'PEERS', False)),
        )
    if mtype == codes.CHANNEL:
        return ChannelRequest(field(header, 'endpoint', str, 'CHANNEL'))
    if mtype in _EMPTY:
        return Empty()
    raise ProtocolError(f'unknown message type {mtype}')


def decode_object(header: Mapping[str, Any]) -> ObjectRequest:
    """The record of an object request (``PUT``, ``GET``, ``EXISTS`` or ``EVICT``).

    Raises:
        ProtocolError: the ids are not a list of object ids, or the endpoint not a string.
    """
    ids = header.get('ids', _NO_IDS)
    if type(ids) is not list:
        raise ProtocolError(_BAD_IDS)
    for i in ids:
        if type(i) is not str or _ID_MATCH(i) is None:
            raise ProtocolError(_BAD_IDS)
    endpoint = header.get('endpoint')
    if endpoint is not None and type(endpoint) is not str:
        raise ProtocolError('endpoint must be a UUID or a name')
    request: ObjectRequest = _new(ObjectRequest, (ids, endpoint or None))
    return request


_NO_IDS: list[str] = []
_ID_MATCH = codes.ID.fullmatch


_EMPTY = frozenset({codes.STATUS, codes.SHUTDOWN, codes.WARM_UP})


def encode(message: Message) -> dict[str, Any]:
    """The JSON header of a request record (the inverse of :func:`decode`)."""
    if isinstance(message, ObjectRequest):
        if message.endpoint is None:
            return {'ids': message.ids}
        return {'ids': message.ids, 'endpoint': message.endpoint}
    if isinstance(message, PeersRequest):
        return {k: True for k, v in zip(message._fields, message, strict=True) if v}
    if isinstance(message, ChannelRequest):
        return {'endpoint': message.endpoint}
    return {}


def _flags(header: Mapping[str, Any], name: str, n: int) -> list[bool] | None:
    value = header.get(name)
    if value is None:
        return None
    if type(value) is not list or len(value) != n or not all(type(v) is bool for v in value):
        raise ProtocolError(f'reply field {name!r} must be a list of {n} booleans')
    return value


def decode_reply(header: Mapping[str, Any], ids: list[str], payloads: int) -> ObjectReply:
    """The record of the ``OK`` answering a request for ``ids`` that carried ``payloads``.

    Raises:
        ProtocolError: the reply is about other objects (the connection is out of step:
            never hand out data that answers another request), or its flags do not match
            its ids or its payloads.
    """
    got = header.get('ids')
    if got != ids:
        raise ProtocolError(
            f'reply about objects {got!r} to a request for objects {ids!r}: '
            'the connection is out of step',
        )
    n = len(ids)
    found = _flags(header, 'found', n)
    if found is not None and sum(found) != payloads:
        raise ProtocolError(f'reply finds {sum(found)} objects but carries {payloads}')
    return ObjectReply(ids, found, _flags(header, 'exists', n))
