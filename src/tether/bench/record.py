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
import os
import threading
from collections.abc import Iterator
from typing import Any, Protocol, runtime_checkable

__all__ = ['JSONRecordLogger', 'NullRecordLogger', 'RecordLogger', 'read_records']


@runtime_checkable
class RecordLogger(Protocol):
    """Receives one record (a JSON-able dict) per finished task."""

    def log(self, record: dict[str, Any]) -> None:
        """Log one record."""
        ...

    def close(self) -> None:
        """Flush and release resources."""
        ...


class NullRecordLogger:
    """Discards every record."""

    def log(self, record: dict[str, Any]) -> None:
        """Discard ``record``."""

    def close(self) -> None:
        """Nothing to close."""


class JSONRecordLogger:
    """Appends each record as one JSON line to a file (thread-safe, flushed per line).

    Args:
        filepath: The file (created with its directory; appended to if it exists).
    """

    def __init__(self, filepath: str | os.PathLike[str]) -> None:
        self.filepath = os.fspath(filepath)
        parent = os.path.dirname(self.filepath)
        if parent:
            os.makedirs(parent, exist_ok=True)
        self._file = open(self.filepath, 'a', encoding='utf-8')  # noqa: SIM115
        self._lock = threading.Lock()

    def log(self, record: dict[str, Any]) -> None:
        """Write ``record`` as one line."""
        line = json.dumps(record, default=str) + '\n'
        with self._lock:
            if self._file.closed:
                return
            self._file.write(line)
            self._file.flush()

    def close(self) -> None:
        """Close the file (later records are dropped)."""
        with self._lock:
            self._file.close()


def read_records(filepath: str | os.PathLike[str]) -> Iterator[dict[str, Any]]:
    """Yield the records of a JSON-lines file (no code runs: records are plain JSON)."""
    with open(filepath, encoding='utf-8') as f:
        for line in f:
            if line.strip():
                yield json.loads(line)
