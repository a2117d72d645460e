"""Message types of the node object server (numbers on top of :mod:`tether._wire`).

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
"""

from __future__ import annotations

import re

from tether._wire import FIRST_APP_TYPE

__all__ = ['EVICT', 'EXISTS', 'GET', 'OK', 'PUT', 'SHUTDOWN', 'STATUS', 'valid_id']

PUT = FIRST_APP_TYPE
GET = FIRST_APP_TYPE + 1
EXISTS = FIRST_APP_TYPE + 2
EVICT = FIRST_APP_TYPE + 3
STATUS = FIRST_APP_TYPE + 4
SHUTDOWN = FIRST_APP_TYPE + 5
OK = FIRST_APP_TYPE + 6

_ID = re.compile(r'[A-Za-z0-9_-]{1,128}')


def valid_id(oid: object) -> bool:
    """Return whether ``oid`` is a valid object id (safe as a file name)."""
    return isinstance(oid, str) and _ID.fullmatch(oid) is not None
