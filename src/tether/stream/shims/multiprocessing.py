"""Multiprocessing queues as a stream broker (processes of one machine).

The queue shim (:mod:`tether.stream.shims.queue`) over :class:`multiprocessing.Queue`:
:func:`make_queues` makes one bounded queue per topic; pass the mapping to the
producer's process and one queue to each consumer's process (as an argument of
``Process``, or inherited through ``fork``).

Delivery: as for in-process queues, messages wait in the queue until taken (kept while a
consumer is slow or not started, lost if every process holding the queue exits);
several consumers of one queue share its messages; a full queue blocks the producer up
to ``timeout`` seconds, then raises :class:`~tether.exceptions.StreamBackpressureError`.
"""

from __future__ import annotations

import multiprocessing
from collections.abc import Iterable
from typing import Any

from tether.stream.shims.queue import QueuePublisher, QueueSubscriber

__all__ = ['MultiprocessingQueuePublisher', 'MultiprocessingQueueSubscriber', 'make_queues']


def make_queues(
    topics: Iterable[str],
    *,
    maxsize: int = 1024,
    context: Any = None,
) -> dict[str, Any]:
    """Return a bounded :class:`multiprocessing.Queue` for each topic."""
    ctx = context if context is not None else multiprocessing.get_context()
    return {topic: ctx.Queue(maxsize) for topic in topics}


class MultiprocessingQueuePublisher(QueuePublisher):
    """Puts each message on the multiprocessing queue of its topic."""


class MultiprocessingQueueSubscriber(QueueSubscriber):
    """Takes messages from one multiprocessing queue."""
