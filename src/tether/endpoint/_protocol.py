"""Message types of the endpoint (on top of :mod:`tether._wire`).

Clients and peers use the node object server's requests (``PUT``, ``GET``, ``EXISTS``,
``EVICT``, ``STATUS``, ``SHUTDOWN``, replies ``OK``; see :mod:`tether.node._protocol`)
with one more header field, ``endpoint``: the UUID of the endpoint that owns the
objects. An endpoint answers requests for its own UUID and forwards the others to the
owner over a peer channel. ``PEERS`` (48) lists the peer channels and their paths.
``WARM_UP`` (49), from peer to peer only, carries zero bytes (one payload, at most
:data:`WARM_UP_MAX`) that the other side answers with as many: see ``PeerLink.warm``.
``CHANNEL`` (50), from a client, asks for a peer channel of the connection's own to the
endpoint its header names (``{'endpoint': uuid}``); after the ``OK`` reply
(``{'path': ...}``) the connection's frames go to that endpoint and its replies come
back, byte for byte (see ``Endpoint._own_channel``).
"""

from __future__ import annotations

from tether._wire import FIRST_APP_TYPE
from tether.node._protocol import EVICT, EXISTS, GET, OK, PUT, SHUTDOWN, STATUS, valid_id

__all__ = [
    'CHANNEL',
    'EVICT',
    'EXISTS',
    'GET',
    'OBJECT_TYPES',
    'OK',
    'PEERS',
    'PUT',
    'SHUTDOWN',
    'STATUS',
    'WARM_UP',
    'WARM_UP_MAX',
    'valid_id',
]

PEERS = FIRST_APP_TYPE + 16
WARM_UP = FIRST_APP_TYPE + 17
CHANNEL = FIRST_APP_TYPE + 18
WARM_UP_MAX = 64 << 20
OBJECT_TYPES = frozenset({PUT, GET, EXISTS, EVICT})
