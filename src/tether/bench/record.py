"""Task records: one JSON object per task, written as each task finishes.

Every record has these keys (times are UNIX timestamps in seconds, durations seconds):

``task_id``, ``function_name``, ``parent_task_ids`` (the tasks whose futures were passed
as arguments), ``submit_time`` (the client called ``submit``), ``received_time`` (the
client saw the result), ``input_transform_time`` (client: transforming the arguments),
``success``, ``exception`` (``null`` or ``{"type", "message", "traceback"}``) and
``execution`` (``null`` if the task never ran, else ``hostname``, ``pid``,
``execution_start_time``, ``execution_end_time``, ``input_resolve_time`` (worker:
resolving transformed arguments), ``function_time`` and ``result_transform_time``).
"""

from __future__ import annotations

import json
import math
import os
import threading
import time
from collections.abc import Iterator
from typing import Any, Protocol, runtime_checkable

from tether._closing import ClosingContext

__all__ = ['JSONRecordLogger', 'NullRecordLogger', 'Record', 'RecordLogger', 'read_records']

Record = dict[str, Any]
"""One task's record (TaPS's name for the type)."""


@runtime_checkable
class RecordLogger(Protocol):
    """Receives one record (a JSON-able dict) per finished task."""

    def log(self, record: dict[str, Any]) -> None:
        """Log one record."""
        ...

    def close(self) -> None:
        """Flush and release resources."""
        ...


class NullRecordLogger(ClosingContext):
    """Discards every record (a context manager, as every built-in logger is)."""

    def log(self, record: dict[str, Any]) -> None:
        """Discard ``record``."""

    def close(self) -> None:
        """Nothing to close."""


class JSONRecordLogger(ClosingContext):
    """Appends each record as one JSON line to a file (thread-safe).

    A context manager: ``with JSONRecordLogger(path) as logger:`` closes it.

    Lines are flushed to the file at most ``flush_interval`` seconds after they were
    logged (the first record after a quiet spell is flushed at once), and all of them by
    :meth:`close`: a flush per record would cost a system call per task.

    Args:
        filepath: The file (created with its directory; appended to if it exists).
        flush_interval: Longest time, in seconds, a logged record waits in the buffer
            (``0``: flush every record).
    """

    def __init__(self, filepath: str | os.PathLike[str], *, flush_interval: float = 0.5) -> None:
        if flush_interval < 0:
            raise ValueError(f'flush_interval must be >= 0, not {flush_interval}')
        self.filepath = os.fspath(filepath)
        self.flush_interval = flush_interval
        parent = os.path.dirname(self.filepath)
        if parent:
            os.makedirs(parent, exist_ok=True)
        self._file = open(self.filepath, 'a', encoding='utf-8')  # noqa: SIM115
        self._lock = threading.Lock()
        self._flushed = -math.inf  # the first record is flushed at once
        self._timer: threading.Timer | None = None

    def log(self, record: dict[str, Any]) -> None:
        """Write ``record`` as one line."""
        line = _dumps(record) + '\n'
        with self._lock:
            if self._file.closed:
                return
            self._file.write(line)
            now = time.monotonic()
            if now - self._flushed >= self.flush_interval:
                self._file.flush()
                self._flushed = now
            elif self._timer is None:
                # Flush what is buffered later, even if no other record comes.
                self._timer = threading.Timer(self.flush_interval, self.flush)
                self._timer.daemon = True
                self._timer.start()

    def flush(self) -> None:
        """Write the buffered records to the file now."""
        with self._lock:
            self._timer = None
            if not self._file.closed:
                self._file.flush()
                self._flushed = time.monotonic()

    def close(self) -> None:
        """Flush and close the file (later records are dropped)."""
        with self._lock:
            timer, self._timer = self._timer, None
            self._file.close()
        if timer is not None:
            timer.cancel()


_dumps = json.JSONEncoder(default=str).encode


def read_records(filepath: str | os.PathLike[str]) -> Iterator[dict[str, Any]]:
    """Yield the records of a JSON-lines file (no code runs: records are plain JSON)."""
    with open(filepath, encoding='utf-8') as f:
        for line in f:
            if line.strip():
                yield json.loads(line)
