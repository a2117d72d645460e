"""Two transports spliced together: what one reads, the other writes, with flow control.

Used where bytes are carried without being parsed: the relay's relayed channels, and an
endpoint's client connections with a peer channel of their own.
"""

from __future__ import annotations

import asyncio

__all__ = ['SpliceEnd']


class SpliceEnd(asyncio.Protocol):
    """The protocol of one spliced transport: it writes what it reads to ``dest``.

    ``dest`` (the other transport) is set when the two are paired; until then nothing is
    forwarded and flow control has nothing to act on. While this end's own transport is
    full (``pause_writing``) the other transport stops reading, so a fast sender cannot
    make either side buffer without bound.
    """

    dest: asyncio.Transport | None = None

    def data_received(self, data: bytes) -> None:
        self.forward(data)

    def forward(self, data: bytes) -> None:
        """Write ``data`` to the other transport (subclasses may count or refuse it)."""
        assert self.dest is not None
        self.dest.write(data)

    def pause_writing(self) -> None:
        if self.dest is not None:
            self.dest.pause_reading()

    def resume_writing(self) -> None:
        if self.dest is not None and not self.dest.is_closing():
            self.dest.resume_reading()
