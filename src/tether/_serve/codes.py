"""Message types of the object servers, node and endpoint (on top of :mod:`tether._wire`).

Every request carries ``{'ids': [object id, ...]}`` in its header; object ids are
32-character hex strings chosen by the client, so every request is idempotent.

=========  ====  ==========================================  ===========================
request    type  request payloads                            reply (``OK``)
=========  ====  ==========================================  ===========================
PUT        32    one per id                                  ``{}``
GET        33    none                                        ``{'found': [bool]}`` + one
                                                             payload per found object
EXISTS     34    none                                        ``{'exists': [bool]}``
EVICT      35    none                                        ``{}``
STATUS     36    none                                        statistics
SHUTDOWN   37    none                                        ``{}``, then the server stops
=========  ====  ==========================================  ===========================

The endpoint's clients and peers use the same requests with one more header field,
``endpoint``: the UUID of the endpoint that owns the objects. An endpoint answers
requests for its own UUID and forwards the others to the owner over a peer channel.
``PEERS`` (48) lists the peer channels and their paths. ``WARM_UP`` (49), from peer to
peer only, carries zero bytes (one payload, at most :data:`WARM_UP_MAX`) that the other
side answers with as many: see ``PeerLink.warm``. ``CHANNEL`` (50), from a client, asks
for a peer channel of the connection's own to the endpoint its header names
(``{'endpoint': uuid}``); after the ``OK`` reply (``{'path': ...}``) the connection's
frames go to that endpoint and its replies come back, byte for byte (see
``Endpoint._own_channel``).
"""

from __future__ import annotations

import re

from tether._wire import FIRST_APP_TYPE

__all__ = [
    'CHANNEL',
    'EVICT',
    'EXISTS',
    'GET',
    'ID',
    'OBJECT_TYPES',
    'OK',
    'OP_NAMES',
    'PEERS',
    'PUT',
    'SHUTDOWN',
    'STATUS',
    'WARM_UP',
    'WARM_UP_MAX',
    'valid_id',
]

PUT = FIRST_APP_TYPE
GET = FIRST_APP_TYPE + 1
EXISTS = FIRST_APP_TYPE + 2
EVICT = FIRST_APP_TYPE + 3
STATUS = FIRST_APP_TYPE + 4
SHUTDOWN = FIRST_APP_TYPE + 5
OK = FIRST_APP_TYPE + 6
PEERS = FIRST_APP_TYPE + 16
WARM_UP = FIRST_APP_TYPE + 17
CHANNEL = FIRST_APP_TYPE + 18
WARM_UP_MAX = 64 << 20
OBJECT_TYPES = frozenset({PUT, GET, EXISTS, EVICT})
OP_NAMES = {
    PUT: 'put',
    GET: 'get',
    EXISTS: 'exists',
    EVICT: 'evict',
    STATUS: 'status',
    SHUTDOWN: 'shutdown',
}
"""The operation each node request is counted as in a server's metrics."""

ID = re.compile(r'[A-Za-z0-9_-]{1,128}')
"""What an object id is made of (see :func:`valid_id`)."""


def valid_id(oid: object) -> bool:
    """Return whether ``oid`` is a valid object id (safe as a file name)."""
    return isinstance(oid, str) and ID.fullmatch(oid) is not None
