"""The object requests of a node server (PUT, GET, EXISTS, EVICT) against an object table.

Shared by the node server and the endpoint (:mod:`tether.endpoint`), which serves the
same requests for the objects it owns.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from tether._serve import codes as proto
from tether._serve.objects import ObjectTable
from tether._wire import RawReply, Reply, encode_one, error_reply

__all__ = ['object_reply', 'object_reply_now']

_RAW_MAX = 64 * 1024
"""Objects up to this size are answered as one encoded frame (:func:`object_reply_now`)."""


def object_reply(table: ObjectTable, mtype: int, ids: list[str], payloads: Sequence[Any]) -> Reply:
    """Apply one object request to ``table`` and return the reply.

    Every reply names the object ids it answers for (``'ids'``), so that a client checks
    that the reply is about the objects it asked for before it uses any payload.
    """
    if mtype == proto.GET:
        datas = [table.get(i) for i in ids]
        return (
            proto.OK,
            {'ids': ids, 'found': [d is not None for d in datas]},
            [d for d in datas if d is not None],
        )
    if mtype == proto.PUT:
        if len(ids) != len(payloads):
            return error_reply('bad-request', f'{len(ids)} ids for {len(payloads)} objects')
        for oid, data in zip(ids, payloads, strict=True):
            table.put(oid, data)
        return proto.OK, {'ids': ids}, ()
    if mtype == proto.EXISTS:
        return proto.OK, {'ids': ids, 'exists': [i in table for i in ids]}, ()
    if mtype == proto.EVICT:
        for oid in ids:
            table.evict(oid)
        return proto.OK, {'ids': ids}, ()
    return error_reply('bad-request', f'unknown message type {mtype}')


def object_reply_now(
    table: ObjectTable, mtype: int, ids: list[str], payloads: Sequence[Any], request_id: int
) -> Reply | RawReply:
    """:func:`object_reply`, for an inline server: the ``GET`` or ``PUT`` of one object is
    answered as a whole encoded frame carrying ``request_id`` (a ``RawReply``; a ``GET``
    only if the object is small), which saves the header dict, its encoding and the
    payload list on the way out.

    As for :func:`object_reply`, ``ids`` must be valid object ids (whose characters need
    no JSON escaping: the one-frame headers are written out directly).
    """
    if len(ids) == 1:
        if mtype == proto.GET:
            return _get_one(table, ids[0], request_id)
        if mtype == proto.PUT and len(payloads) == 1:
            table.put(ids[0], payloads[0])
            return encode_one(proto.OK, b'{"ids":["%s"]}' % ids[0].encode(), request_id)
    return object_reply(table, mtype, ids, payloads)


def _get_one(table: ObjectTable, oid: str, request_id: int) -> Reply | RawReply:
    data = table.get(oid)
    if data is None:
        return proto.OK, {'ids': [oid], 'found': [False]}, ()
    if len(data) > _RAW_MAX:
        return proto.OK, {'ids': [oid], 'found': [True]}, [data]
    body = b'{"ids":["%s"],"found":[true]}' % oid.encode()
    return encode_one(proto.OK, body, request_id, data)
