"""Small helpers shared by connector implementations."""

from __future__ import annotations

import uuid
from collections.abc import Sequence

from tether.serialize import BytesLike

__all__ = ['glob_escape', 'new_id', 'total_size']


def new_id() -> str:
    """Return a fresh random object id (32 hex characters)."""
    return uuid.uuid4().hex


def total_size(parts: Sequence[BytesLike]) -> int:
    """Return the number of bytes in ``parts``."""
    return sum(memoryview(p).nbytes for p in parts)


def glob_escape(text: str) -> str:
    """Escape the glob characters of ``text`` (``* ? [ ] \\``) for Redis ``MATCH``/``KEYS``.

    ``glob_escape(prefix) + '*'`` matches the keys that start with ``prefix`` literally.
    """
    return ''.join('\\' + c if c in '*?[]\\' else c for c in text)
