"""object_reply_now: one-object replies answered as encoded frames agree with object_reply."""

from __future__ import annotations

import asyncio
from pathlib import Path

from tether._serve import codes as proto
from tether._serve.objects import BufferPool, ObjectTable
from tether._serve.requests import object_reply, object_reply_now
from tether._wire import Limits
from tether._wire._proto import FrameProtocol


def decode(raw: bytearray) -> tuple[int, int, dict[str, object], list[bytes]]:
    async def main() -> tuple[int, int, dict[str, object], list[bytes]]:
        parser = FrameProtocol(Limits(), 1)
        buf = parser.get_buffer(len(raw))
        buf[: len(raw)] = raw
        parser.buffer_updated(len(raw))
        frame = await parser.recv()
        return frame.type, frame.request_id, frame.header, [bytes(p) for p in frame.payloads]

    return asyncio.run(main())


def test_one_object_replies(tmp_path: Path) -> None:
    table = ObjectTable(1 << 20, tmp_path, BufferPool(1 << 20))

    def put_one_reply(t: ObjectTable, oid: str, data: bytearray, rid: int) -> object:
        return object_reply_now(t, proto.PUT, [oid], [data], rid)

    def get_one_reply(t: ObjectTable, oid: str, rid: int) -> object:
        return object_reply_now(t, proto.GET, [oid], (), rid)

    raw = put_one_reply(table, 'obj-1', bytearray(b'hello'), 77)
    assert isinstance(raw, bytearray)
    assert decode(raw) == (proto.OK, 77, {'ids': ['obj-1']}, [])
    assert decode(raw)[2] == object_reply(table, proto.PUT, ['obj-1'], [b'hello'])[1]
    small = get_one_reply(table, 'obj-1', 78)
    assert isinstance(small, bytearray)
    assert decode(small) == (proto.OK, 78, {'ids': ['obj-1'], 'found': [True]}, [b'hello'])
    assert decode(small)[2] == object_reply(table, proto.GET, ['obj-1'], ())[1]
    # Missing, and large: the usual (type, header, payloads) reply.
    missing = get_one_reply(table, 'nope', 79)
    assert isinstance(missing, tuple)
    assert missing[:2] == object_reply(table, proto.GET, ['nope'], ())[:2]
    assert list(missing[2]) == []
    big = bytearray(100_000)
    table.put('big', big)
    reply = get_one_reply(table, 'big', 80)
    assert isinstance(reply, tuple)
    assert reply[:2] == (proto.OK, {'ids': ['big'], 'found': [True]})
    assert [len(p) for p in reply[2]] == [100_000]
    # More than one object: object_reply's answer as it is.
    both = object_reply_now(table, proto.GET, ['obj-1', 'nope'], (), 81)
    assert both == object_reply(table, proto.GET, ['obj-1', 'nope'], ())
