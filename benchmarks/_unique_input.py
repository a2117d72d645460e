"""Unique benchmark inputs, made cheaply (standard library only: the peer scripts, run
in their own virtual environments, import it too)."""

from __future__ import annotations

import os
import uuid

__all__ = ['unique_input']

_BLOCKS: dict[int, bytes] = {}


def unique_input(size: int) -> bytes:
    """A unique (so not cacheable) input of ``size`` bytes, made cheaply.

    A fresh 16-byte prefix in front of one random block per size: a copy of ``size``
    bytes (~2 ms at 10 MB) where ``os.urandom(size)`` costs ~27 ms of the Thinker's CPU
    at 10 MB, which delayed the other task in flight and dwarfed the overheads measured.
    The same on both sides of the comparison.
    """
    block = _BLOCKS.get(size)
    if block is None:
        block = _BLOCKS[size] = os.urandom(size)
    prefix = uuid.uuid4().bytes[:size]
    return b''.join((prefix, memoryview(block)[len(prefix) :]))
