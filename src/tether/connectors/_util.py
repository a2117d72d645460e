"""Small helpers shared by connector implementations."""

from __future__ import annotations

import uuid
from collections.abc import Sequence

from tether.serialize import BytesLike

__all__ = ['new_id', 'total_size']


def new_id() -> str:
    """Return a fresh random object id (32 hex characters)."""
    return uuid.uuid4().hex


def total_size(parts: Sequence[BytesLike]) -> int:
    """Return the number of bytes in ``parts``."""
    return sum(memoryview(p).nbytes for p in parts)
