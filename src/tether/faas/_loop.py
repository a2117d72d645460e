"""Event loops of the service, the endpoint agent and the SDK's result stream.

uvloop when it is installed (the ``faas`` extra installs it): every hop of a task is a
few socket reads and writes on some process's loop, and uvloop does them with less
Python per call. ``TETHER_FAAS_UVLOOP=0`` keeps asyncio's own loop (to compare, or to
debug with asyncio's tools).
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Coroutine
from typing import Any, TypeVar

__all__ = ['new_event_loop', 'run']

_T = TypeVar('_T')


def _uvloop() -> Any:
    if os.environ.get('TETHER_FAAS_UVLOOP', '1').strip().lower() in ('0', 'false', 'no', 'off'):
        return None
    try:
        import uvloop
    except ImportError:
        return None
    return uvloop


def new_event_loop() -> asyncio.AbstractEventLoop:
    """A new event loop (uvloop's when available)."""
    uvloop = _uvloop()
    loop: asyncio.AbstractEventLoop = (
        uvloop.new_event_loop() if uvloop is not None else asyncio.new_event_loop()
    )
    return loop


def run(main: Coroutine[Any, Any, _T]) -> _T:
    """Run ``main`` on a new event loop (as :func:`asyncio.run` does)."""
    with asyncio.Runner(loop_factory=new_event_loop) as runner:
        return runner.run(main)
