"""The frame parser fed in arbitrary pieces (as a network delivers them)."""

from __future__ import annotations

import asyncio
import random

import pytest

from tether._wire import Limits, encode_head
from tether._wire._proto import FrameProtocol
from tether.exceptions import FrameTooLargeError, ProtocolError


def stream(frames: list[tuple[int, dict[str, object], list[bytes]]]) -> bytes:
    out = bytearray()
    for i, (mtype, header, payloads) in enumerate(frames):
        out += encode_head(mtype, header, [len(p) for p in payloads], request_id=i)
        for p in payloads:
            out += p
    return bytes(out)


def feed(proto: FrameProtocol, data: bytes, rng: random.Random) -> None:
    pos = 0
    while pos < len(data):
        buf = proto.get_buffer(-1)
        n = min(len(buf), len(data) - pos, rng.choice([1, 7, 24, 100, 4096, 1 << 20]))
        buf[:n] = data[pos : pos + n]
        pos += n
        proto.buffer_updated(n)


@pytest.mark.parametrize('seed', range(20))
def test_any_chunking_gives_the_same_frames(seed: int) -> None:
    rng = random.Random(seed)
    frames = [
        (
            32 + rng.randrange(5),
            {'n': i, 'pad': 'x' * rng.choice([0, 10, 70_000])},
            [rng.randbytes(rng.choice([0, 1, 5, 3000, 200_000])) for _ in range(rng.randrange(4))],
        )
        for i in range(12)
    ]
    data = stream(frames)

    async def main() -> None:
        proto = FrameProtocol(Limits(), 1)
        feed(proto, data, rng)
        for i, (mtype, header, payloads) in enumerate(frames):
            frame = await proto.recv()
            assert (frame.type, frame.request_id) == (mtype, i)
            assert frame.header == header
            assert [bytes(p) for p in frame.payloads] == payloads

    asyncio.run(main())


def test_limits_and_garbage_are_errors() -> None:
    async def main() -> None:
        proto = FrameProtocol(Limits(max_frame=10), 1)
        feed(proto, encode_head(32, None, [11]), random.Random(0))
        with pytest.raises(FrameTooLargeError):
            await proto.recv()
        proto = FrameProtocol(Limits(), 1)
        feed(proto, b'GET / HTTP/1.1\r\nHost: x\r\n\r\n', random.Random(0))
        with pytest.raises(ProtocolError, match='magic'):
            await proto.recv()

    asyncio.run(main())
