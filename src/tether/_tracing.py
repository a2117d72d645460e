"""The switch and the hooks of tether's OpenTelemetry traces (public face: :mod:`tether.tracing`).

Off by default, and then each hook is one test of a module-level flag: nothing of
OpenTelemetry is imported. Turned on by :func:`tether.tracing.enable` in a process, or by
the ``TETHER_TRACING`` environment variable in every process that inherits it (workers,
servers started from the command line): ``file:PATH`` (spans appended to ``PATH`` as
JSON lines), ``otlp`` (OpenTelemetry's OTLP exporter, configured by its own
``OTEL_EXPORTER_OTLP_*`` variables) or ``on`` (whatever tracer provider the program set
up, e.g. with ``opentelemetry-instrument``).
"""

from __future__ import annotations

import contextlib
import importlib
import os
import time
from collections.abc import Iterator, Mapping
from typing import Any

from tether.exceptions import ConfigError

__all__ = [
    'carrier_of',
    'disable',
    'enable',
    'on',
    'record',
    'resolving',
    'task_trace',
]

ENV = 'TETHER_TRACING'

on = False
"""Whether tether records spans in this process."""

_tracer: Any = None


def enable(tracer_provider: Any = None) -> None:
    """Record spans with ``tracer_provider`` (default: OpenTelemetry's global one)."""
    global on, _tracer
    try:
        from opentelemetry import trace
    except ImportError as e:
        raise ConfigError(
            'tracing needs OpenTelemetry: pip install "tether[trace]" '
            '(opentelemetry-api and opentelemetry-sdk)'
        ) from e
    from tether import __version__

    provider = tracer_provider or trace.get_tracer_provider()
    _tracer = provider.get_tracer('tether', __version__)
    on = True


def disable() -> None:
    """Stop recording spans (hooks go back to one flag test each)."""
    global on, _tracer
    on, _tracer = False, None


def _enable_from_env(value: str) -> None:
    if value in ('', '0', 'off'):
        return
    if value == 'on':
        enable()
        return
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor

    provider = TracerProvider()
    if value.startswith('file:'):
        from tether._trace_export import JSONLinesSpanExporter

        exporter: Any = JSONLinesSpanExporter(value[5:])  # a SpanExporter by its methods
        provider.add_span_processor(SimpleSpanProcessor(exporter))
    elif value == 'otlp':
        try:
            otlp = importlib.import_module('opentelemetry.exporter.otlp.proto.http.trace_exporter')
        except ImportError as e:
            raise ConfigError(
                f'{ENV}=otlp needs opentelemetry-exporter-otlp-proto-http installed'
            ) from e
        from opentelemetry.sdk.trace.export import BatchSpanProcessor

        provider.add_span_processor(BatchSpanProcessor(otlp.OTLPSpanExporter()))
    else:
        raise ConfigError(f'{ENV}={value!r}: expected file:PATH, otlp, on or off')
    enable(provider)


def record(name: str, start_perf_ns: int, attributes: Mapping[str, Any] | None = None) -> Any:
    """A finished span ``name`` from ``start_perf_ns`` (``time.perf_counter_ns()``) to
    now, a child of the current span; returns it (``None`` when tracing is off)."""
    if not on:
        return None
    now = time.time_ns()
    begin = now - (time.perf_counter_ns() - start_perf_ns)
    span = _tracer.start_span(name, start_time=begin, attributes=dict(attributes or {}))
    span.end(end_time=now)
    return span


def carrier_of(span: Any) -> dict[str, str] | None:
    """The W3C ``traceparent`` of ``span`` (what a proxy carries to join its
    resolution to its creation); ``None`` without a span."""
    if span is None:
        return None
    from opentelemetry import trace
    from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

    carrier: dict[str, str] = {}
    TraceContextTextMapPropagator().inject(carrier, context=trace.set_span_in_context(span))
    return carrier or None


@contextlib.contextmanager
def resolving(
    name: str, carrier: Mapping[str, str] | None, attributes: Mapping[str, Any] | None = None
) -> Iterator[None]:
    """A span ``name`` around the block, the current span within it, whose parent is the
    span ``carrier`` names (from another process), else the current span."""
    if not on:
        yield
        return
    from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

    context = TraceContextTextMapPropagator().extract(dict(carrier)) if carrier else None
    with _tracer.start_as_current_span(name, context=context, attributes=dict(attributes or {})):
        yield


def task_trace(
    name: str, stamps: Mapping[str, float | None], attributes: Mapping[str, Any] | None = None
) -> Any:
    """The spans of a task's lifetime from the times its stages were reached.

    Each process a task passes through stamps the time it reached a stage (the client
    submitted it, the service queued it, a worker started and ended it, ...); the stamps
    come back with the result. From them: one span ``name`` from the first stage to the
    last, and a child span per step between two consecutive stages, named
    ``"<stage> -> <next stage>"`` (stages in time order). Returns the root span (``None``
    when tracing is off or there are fewer than two stamps).
    """
    if not on:
        return None
    timed = sorted(
        ((float(t), stage) for stage, t in stamps.items() if isinstance(t, int | float)),
    )
    if len(timed) < 2:
        return None
    from opentelemetry import trace

    ns = [int(t * 1e9) for t, _ in timed]
    root = _tracer.start_span(name, start_time=ns[0], attributes=dict(attributes or {}))
    context = trace.set_span_in_context(root)
    for i in range(1, len(timed)):
        step = _tracer.start_span(
            f'{timed[i - 1][1]} -> {timed[i][1]}',
            context=context,
            start_time=ns[i - 1],
            attributes={'tether.stage.from': timed[i - 1][1], 'tether.stage.to': timed[i][1]},
        )
        step.end(end_time=ns[i])
    root.end(end_time=ns[-1])
    return root


if os.environ.get(ENV):
    _enable_from_env(os.environ[ENV])
