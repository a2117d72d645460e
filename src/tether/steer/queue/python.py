"""Queues between processes of one machine, over :mod:`multiprocessing` queues."""

from __future__ import annotations

import multiprocessing
import queue as _queue
import uuid
import weakref
from typing import Any

from tether.exceptions import SteerQueueError, SteerTimeoutError
from tether.steer.queue.base import BaseQueues

__all__ = ['PipeQueues']

_FLUSH_QUIET = 0.05

# The PipeQueues made in this process, or inherited by fork, by id: a pickled PipeQueues
# is its id, and unpickles as the queues of that id this process holds.
_live: weakref.WeakValueDictionary[str, PipeQueues] = weakref.WeakValueDictionary()


def _inherited(queue_id: str) -> PipeQueues:
    queues = _live.get(queue_id)
    if queues is None:
        raise SteerQueueError(
            f'PipeQueues {queue_id} were unpickled in a process that did not inherit them: '
            'they travel only to processes forked after they were made (a forked '
            'Process, Pool or task server); use RedisQueues across other processes'
        )
    return queues


class PipeQueues(BaseQueues):
    """Queues for a Thinker and a task server forked from the same process.

    Create them before starting the task server. Arguments as for
    :class:`~tether.steer.queue.base.BaseQueues`.

    They pickle as their id: unpickled in a process forked after they were made (a
    ``multiprocessing`` ``Pool`` task or ``Process`` argument, under the fork start
    method), they are the queues that process inherited; anywhere else unpickling
    raises :class:`~tether.exceptions.SteerQueueError`.
    """

    def _open(self) -> None:
        self._queue_id = f'pipe:{uuid.uuid4().hex}'
        ctx = multiprocessing.get_context('fork')
        self._requests: Any = ctx.Queue()
        self._results: dict[str, Any] = {t: ctx.Queue() for t in self.topics}
        _live[self._queue_id] = self

    def __reduce__(self) -> tuple[Any, ...]:
        return (_inherited, (self._queue_id,))

    @staticmethod
    def _get(q: Any, timeout: float | None, what: str) -> bytes:
        try:
            message: bytes = q.get(timeout=timeout)
        except _queue.Empty:
            raise SteerTimeoutError(f'no {what} within {timeout} s') from None
        return message

    def _send_request(self, message: bytes) -> None:
        self._requests.put(message)

    def _get_request(self, timeout: float | None) -> bytes:
        return self._get(self._requests, timeout, 'task request')

    def _send_result(self, message: bytes, topic: str) -> None:
        self._results[topic].put(message)

    def _get_result(self, topic: str, timeout: float | None) -> bytes:
        return self._get(self._results[topic], timeout, f'result on topic {topic!r}')

    def flush(self) -> None:
        """Drop every message waiting in the request queue and the result topics.

        A message put by this process a moment ago may still be on its way into the
        pipe (multiprocessing queues feed it from a thread): each queue is read until
        it stays empty for ``_FLUSH_QUIET`` seconds.
        """
        for q in [self._requests, *self._results.values()]:
            try:
                while True:
                    q.get(timeout=_FLUSH_QUIET)
            except _queue.Empty:
                pass
