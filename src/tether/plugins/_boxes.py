"""Results that travel in a one-item list ("box"), shared by the Parsl and Ray plugins.

An owned proxy must have one holder. Engines keep their own future (and its result)
alive for a while, so a task returns ``[result]`` and the caller's future takes the
result *out* of the box, leaving the engine's copy empty.
"""

from __future__ import annotations

import concurrent.futures
import weakref
from typing import Any

from tether._futures import pass_outcome

__all__ = ['unbox_into']


def unbox_into(
    source: concurrent.futures.Future[Any],
    ref: weakref.ref[concurrent.futures.Future[Any]],
) -> None:
    """Complete the future behind ``ref`` with the outcome of ``source``, unboxed."""
    target = ref()
    if target is not None:
        pass_outcome(source, target, list.pop)
