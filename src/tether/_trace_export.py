"""The JSON-lines span exporter of :mod:`tether.tracing` (``TETHER_TRACING=file:PATH``)."""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Sequence
from typing import Any

__all__ = ['JSONLinesSpanExporter', 'read_spans']


class JSONLinesSpanExporter:
    """An OpenTelemetry span exporter that appends one JSON object per span to a file
    (``name``, ``trace_id``, ``span_id``, ``parent_id`` as hex, ``start`` and ``end`` in
    ns since the epoch, ``attributes``, ``pid``). Several processes may share the file:
    each span is one ``write`` of one line to a file opened for appending."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = os.fspath(path)
        self._lock = threading.Lock()

    def export(self, spans: Sequence[Any]) -> Any:
        """Write ``spans`` (OpenTelemetry's ``SpanExporter.export``)."""
        from opentelemetry.sdk.trace.export import SpanExportResult

        lines = ''.join(json.dumps(_span_dict(span), default=str) + '\n' for span in spans)
        with self._lock:
            fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
            try:
                os.write(fd, lines.encode())
            finally:
                os.close(fd)
        return SpanExportResult.SUCCESS

    def shutdown(self) -> None:
        """Nothing to release."""

    def force_flush(self, timeout_millis: int = 30_000) -> bool:
        """Every span is written when exported."""
        return True


def _span_dict(span: Any) -> dict[str, Any]:
    context = span.get_span_context()
    parent = span.parent
    return {
        'name': span.name,
        'trace_id': f'{context.trace_id:032x}',
        'span_id': f'{context.span_id:016x}',
        'parent_id': f'{parent.span_id:016x}' if parent is not None else None,
        'start': span.start_time,
        'end': span.end_time,
        'attributes': dict(span.attributes or {}),
        'pid': os.getpid(),
    }


def read_spans(path: str | os.PathLike[str]) -> list[dict[str, Any]]:
    """The spans a :class:`JSONLinesSpanExporter` wrote to ``path`` (plain JSON)."""
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]
