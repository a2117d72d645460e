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

from typing import Any

from tether import _tracing
from tether._trace_export import JSONLinesSpanExporter, read_spans

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
