"""OpenTelemetry traces of proxies and tasks (optional: ``pip install "tether[trace]"``).

Off by default. When on, tether records:

* **store operations** (``store.put``, ``store.get``, ``store.proxy``, ``store.evict``,
  the batches, cache hits and misses), each a span with the store's name and the bytes
  moved, a child of the span current when it ran;
* **proxy resolution across processes**: a proxy made by ``Store.proxy`` carries the W3C
  ``traceparent`` of its ``store.proxy`` span (an id, never a secret), and wherever the
  proxy resolves (another process, another site) a ``tether.proxy.resolve`` span, with
  the ``store.get`` inside it, joins that trace;
* **a task's lifetime**: when a result reaches the submitter (a function-service task
  through :class:`tether.faas.Executor`, a steering task through the Thinker's queues), a
  ``tether.faas.task`` or ``tether.steer.task`` span covers its whole life, with a child
  span for each step between the stages it passed (client to service, service queue,
  endpoint, worker, result back ...), timed by the clocks of the processes that reached
  each stage: the breakdown of the steering paper's figures 3 and 4, for any task.

Turn it on in one process with :func:`enable` (after setting up OpenTelemetry's tracer
provider and exporter as usual), or in every process of a run with the environment
variable ``TETHER_TRACING``: ``file:PATH`` (each process appends its spans to ``PATH`` as
JSON lines: :class:`JSONLinesSpanExporter`), ``otlp`` (OpenTelemetry's OTLP/HTTP
exporter, with its ``OTEL_EXPORTER_OTLP_*`` settings) or ``on`` (the provider the program
configured). Off, each hook costs one test of a flag.
"""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Sequence
from typing import Any

from tether import _tracing

__all__ = ['JSONLinesSpanExporter', 'disable', 'enable', 'is_enabled', 'read_spans']


def enable(tracer_provider: Any = None) -> None:
    """Record tether's spans in this process with ``tracer_provider`` (default:
    OpenTelemetry's global provider).

    Raises:
        ConfigError: OpenTelemetry is not installed.
    """
    _tracing.enable(tracer_provider)


def disable() -> None:
    """Stop recording tether's spans in this process."""
    _tracing.disable()


def is_enabled() -> bool:
    """Whether tether records spans in this process."""
    return _tracing.on


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
