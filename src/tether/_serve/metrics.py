"""Prometheus metrics of a tether server: one registry per server, an opt-in HTTP endpoint.

Each server makes one :class:`ServerMetrics` (its own ``CollectorRegistry``, never the
process-wide default: several servers may share a process) and records every request
with :meth:`ServerMetrics.observe` (or, on one event loop's hot path, in a :class:`Tally`
of plain numbers without a lock); state it already keeps (objects, memory, peers,
queue depths ...) is read at scrape time through :meth:`ServerMetrics.gauge` callbacks,
so the hot path only bumps a counter and a histogram.

:class:`MetricsEndpoint` serves the registry over HTTP. It is off unless a port is given
(:class:`MetricsOptions`), binds to loopback by default, and refuses any other address
unless a bearer token is configured; with a token, every scrape must carry
``Authorization: Bearer <token>`` (anything else: 401).

Label values are bounded: operations come from a fixed set per server (anything else is
counted as ``other``); no label ever holds a key, object id, user or task id.
"""

from __future__ import annotations

import bisect
import contextlib
import hmac
import ipaddress
import threading
import time
from collections.abc import Awaitable, Callable, Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

from pydantic import BaseModel, ConfigDict, Field, model_validator

from tether._serve.buckets import LATENCY_BUCKETS
from tether.exceptions import ConfigError

__all__ = [
    'MetricsEndpoint',
    'MetricsOptions',
    'Served',
    'ServerMetrics',
    'Tally',
    'click_options',
    'payload_bytes',
    'start_endpoint',
]

_BUCKETS = LATENCY_BUCKETS

GaugeValues = Callable[[], float | Mapping[tuple[str, ...], float]]


def _client() -> Any:
    try:
        import prometheus_client
    except ImportError as e:  # pragma: no cover - the extra is missing
        raise ConfigError(
            'metrics need the prometheus_client package: pip install "tether[metrics]"',
        ) from e
    return prometheus_client


class MetricsOptions(BaseModel):
    """Where a server's metrics endpoint listens (``port=None``: no endpoint, the default).

    The ``[metrics]`` table of a server's TOML configuration, and the ``--metrics-*``
    options of its command.

    Attributes:
        port: TCP port of the HTTP endpoint (0: any free port; ``None``: off).
        bind: Address to listen on; anything but loopback needs ``token_file``.
        token_file: File holding the bearer token every scrape must present.
    """

    model_config = ConfigDict(extra='forbid', frozen=True)

    port: int | None = Field(default=None, ge=0, le=65535)
    bind: str = '127.0.0.1'
    token_file: str | None = None

    @model_validator(mode='after')
    def _token_unless_loopback(self) -> MetricsOptions:
        if self.port is not None and self.token_file is None and not is_loopback(self.bind):
            raise ValueError(
                f'the metrics endpoint may listen on {self.bind} (not loopback) only with a '
                'bearer token: set token_file (--metrics-token-file), or bind to 127.0.0.1',
            )
        return self

    @property
    def enabled(self) -> bool:
        """Whether an endpoint is asked for."""
        return self.port is not None

    def token(self) -> str | None:
        """The bearer token (read from ``token_file`` now), or ``None``."""
        if self.token_file is None:
            return None
        try:
            token = Path(self.token_file).read_text().strip()
        except OSError as e:
            raise ConfigError(f'cannot read the metrics token file {self.token_file}: {e}') from e
        if not token:
            raise ConfigError(f'the metrics token file {self.token_file} is empty')
        return token


def payload_bytes(payloads: Iterable[Any]) -> int:
    """Bytes in a frame's payloads (a buffer, or a list or tuple of buffers, each).

    Anything else (a generator streamed out) counts as 0: it must not be consumed here.
    """
    total = 0
    for p in payloads:
        kind = type(p)
        if kind is bytes or kind is bytearray:  # the usual case: no memoryview made
            total += len(p)
        elif kind is list or kind is tuple:
            total += sum(memoryview(b).nbytes for b in p)
        else:
            with contextlib.suppress(TypeError):  # the rare case: its cost does not matter
                total += memoryview(p).nbytes
    return total


def is_loopback(host: str) -> bool:
    """Whether ``host`` names this host only (``localhost`` or a loopback address)."""
    if host == 'localhost':
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


class _OpStats:
    """One operation's request counts, bytes and latency buckets (plain numbers)."""

    __slots__ = ('buckets', 'bytes_in', 'bytes_out', 'count', 'errors', 'seconds')

    def __init__(self) -> None:
        self.count = self.errors = self.bytes_in = self.bytes_out = 0
        self.seconds = 0.0
        self.buckets = [0] * len(_BUCKETS)


class _Row:
    """One operation's numbers in a :class:`Tally` (attributes: cheaper to bump than items)."""

    __slots__ = ('buckets', 'bytes_in', 'bytes_out', 'errors', 'quick', 'seconds', 'untimed')

    def __init__(self) -> None:
        self.untimed = self.errors = self.bytes_in = self.bytes_out = self.quick = 0
        self.seconds = 0.0
        self.buckets = [0] * len(_BUCKETS)


class Tally:
    """Per-operation request numbers written by one thread only, without a lock.

    For a server's hot path on its event loop: recording a request is a few attribute
    updates (no lock, no call into :class:`ServerMetrics`). Each operation label has one
    row of plain numbers: ``untimed`` (requests counted but not timed), ``errors``,
    ``bytes_in``, ``bytes_out``, ``seconds`` (the sum over timed requests), ``quick``
    (timed requests within the first bucket's bound, :attr:`FIRST`) and ``buckets``
    (timed requests per bucket, :meth:`bucket`; its first item left to ``quick``).

    Only the thread that owns the tally may write it; a scrape reads it from its own
    thread, each number whole (the GIL), so it may see a request's count before its
    bytes, but never a torn or lost number. Made by :meth:`ServerMetrics.tally`, which
    merges it into every scrape.

    Args:
        ops: The operation label of each message type (others count as ``other``).
        label: The label value of an operation name (see :meth:`ServerMetrics.op`).
    """

    FIRST = _BUCKETS[0]
    """The first bucket's bound, in seconds: a request timed under it counts in ``quick``."""

    def __init__(self, ops: Mapping[int, str], label: Callable[[str], str]) -> None:
        names = {label(name) for name in ops.values()} | {'other'}
        self.rows = {name: _Row() for name in sorted(names)}
        self.by_type = {t: self.rows[label(name)] for t, name in ops.items()}
        """The row of each known message type."""
        self.other = self.rows['other']
        """The row of any other message type."""

    @staticmethod
    def bucket(seconds: float) -> int:
        """The index of the first bucket whose bound is at least ``seconds``."""
        return bisect.bisect_left(_BUCKETS, seconds)

    def add_to(self, out: dict[str, _OpStats]) -> None:
        """Add every operation's numbers to ``out`` (an operation with no request: none)."""
        for op, row in self.rows.items():
            buckets = list(row.buckets)  # one copy, taken whole
            buckets[0] += row.quick
            count = row.untimed + sum(buckets)
            if not count:
                continue
            stats = out.get(op)
            if stats is None:
                stats = out[op] = _OpStats()
            stats.count += count
            stats.errors += row.errors
            stats.bytes_in += row.bytes_in
            stats.bytes_out += row.bytes_out
            stats.seconds += row.seconds
            stats.buckets = [a + b for a, b in zip(stats.buckets, buckets, strict=True)]


class ServerMetrics:
    """The metrics of one server, in a registry of its own.

    Requests are counted in plain numbers under one lock (about a microsecond per
    request), or by one thread in a :class:`Tally` without a lock, and turned into
    Prometheus counters and a histogram only when scraped.

    Args:
        kind: What the server is (``node``, ``endpoint``, ``relay``, ``faas``, ...).
        name: The server's name (a label of ``tether_server_info`` only).
        ops: The operation names :meth:`observe` accepts as labels; others count as ``other``.
    """

    def __init__(self, kind: str, name: str, ops: Iterable[str]) -> None:
        pc = _client()
        self.kind = kind
        self.registry = pc.CollectorRegistry(auto_describe=True)
        self._ops = frozenset(ops) | {'other'}
        pc.Info(
            'tether_server', 'The tether server behind this endpoint', registry=self.registry
        ).info({'kind': kind, 'name': name})
        self._lock = threading.Lock()
        self._stats: dict[str, _OpStats] = {}
        self._tallies: list[Tally] = []
        self.registry.register(_Requests(self))
        self._gauges: list[tuple[str, str, tuple[str, ...], GaugeValues, bool]] = []
        self.registry.register(_Callbacks(self._gauges))

    def op(self, name: str) -> str:
        """The label value for operation ``name`` (``other`` if not a known one)."""
        return name if name in self._ops else 'other'

    def _of(self, op: str) -> _OpStats:
        """The numbers of ``op``'s label (under the lock); only labels are keys, so an
        unknown operation name never grows the table."""
        stats = self._stats.get(op)
        if stats is None:
            label = self.op(op)
            stats = self._stats.get(label)
            if stats is None:
                stats = self._stats[label] = _OpStats()
        return stats

    def observe(
        self,
        op: str,
        seconds: float,
        nbytes_in: int = 0,
        nbytes_out: int = 0,
        *,
        error: bool = False,
    ) -> None:
        """Record one request of operation ``op``."""
        bucket = bisect.bisect_left(_BUCKETS, seconds)
        with self._lock:
            stats = self._of(op)
            stats.count += 1
            stats.seconds += seconds
            stats.buckets[bucket] += 1
            stats.bytes_in += nbytes_in
            stats.bytes_out += nbytes_out
            if error:
                stats.errors += 1

    def count(self, op: str, nbytes_in: int = 0) -> None:
        """Count one request of ``op`` that is not timed (passed on, answered later)."""
        with self._lock:
            stats = self._of(op)
            stats.count += 1
            stats.bytes_in += nbytes_in

    def tally(self, ops: Mapping[int, str]) -> Tally:
        """A new :class:`Tally` for one thread's requests, merged into every scrape.

        ``ops`` names the operation of each message type (names this server does not
        know count as ``other``).
        """
        tally = Tally(ops, self.op)
        with self._lock:
            self._tallies = [*self._tallies, tally]
        return tally

    def snapshot(self) -> dict[str, _OpStats]:
        """A copy of every operation's numbers (for a scrape)."""
        out: dict[str, _OpStats] = {}
        with self._lock:
            for op, stats in self._stats.items():
                copy = out[op] = _OpStats()
                copy.count, copy.errors = stats.count, stats.errors
                copy.bytes_in, copy.bytes_out = stats.bytes_in, stats.bytes_out
                copy.seconds, copy.buckets = stats.seconds, list(stats.buckets)
            tallies = self._tallies
        for tally in tallies:
            tally.add_to(out)
        return out

    def timer(self) -> float:
        """A start time for :meth:`observe` (``time.perf_counter``)."""
        return time.perf_counter()

    def gauge(
        self,
        name: str,
        doc: str,
        values: GaugeValues,
        labels: tuple[str, ...] = (),
        *,
        counter: bool = False,
    ) -> None:
        """Export a value read at scrape time (a gauge, or with ``counter`` a counter).

        ``values`` returns a number, or (with ``labels``) a mapping from label values to
        numbers; label values must come from a bounded set (states, paths, directions).
        A counter's ``name`` gets ``_total`` appended in the exposition.
        """
        self._gauges.append((name, doc, labels, values, counter))


class _Requests:
    """A collector turning a server's request numbers into Prometheus families."""

    def __init__(self, metrics: ServerMetrics) -> None:
        self._metrics = metrics

    def describe(self) -> list[Any]:
        return []

    def collect(self) -> Iterator[Any]:
        from prometheus_client.core import CounterMetricFamily, HistogramMetricFamily

        stats = self._metrics.snapshot()
        requests = CounterMetricFamily(
            'tether_requests', 'Requests handled, by operation', labels=['op']
        )
        errors = CounterMetricFamily(
            'tether_request_errors',
            'Requests answered with an error, by operation',
            labels=['op'],
        )
        nbytes = CounterMetricFamily(
            'tether_request_bytes',
            'Payload bytes received (in) and sent (out), by operation',
            labels=['op', 'direction'],
        )
        latency = HistogramMetricFamily(
            'tether_request_seconds', 'Seconds to handle a request, by operation', labels=['op']
        )
        for op, s in sorted(stats.items()):
            requests.add_metric([op], s.count)
            errors.add_metric([op], s.errors)
            if s.bytes_in:
                nbytes.add_metric([op, 'in'], s.bytes_in)
            if s.bytes_out:
                nbytes.add_metric([op, 'out'], s.bytes_out)
            timed = sum(s.buckets)
            if timed:
                cumulative, buckets = 0, []
                for bound, n in zip(_BUCKETS, s.buckets, strict=True):
                    cumulative += n
                    buckets.append((_bound(bound), cumulative))
                latency.add_metric([op], buckets, sum_value=s.seconds)
        yield from (requests, errors, nbytes, latency)


def _bound(value: float) -> str:
    return '+Inf' if value == float('inf') else repr(value)


class _Callbacks:
    """A collector reading the gauges of a server when scraped."""

    def __init__(self, gauges: list[tuple[str, str, tuple[str, ...], GaugeValues, bool]]) -> None:
        self._gauges = gauges

    def describe(self) -> list[Any]:
        return []  # the gauges are added after registration; describe nothing up front

    def collect(self) -> Iterator[Any]:
        from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

        for name, doc, labels, values, counter in list(self._gauges):
            got = values()
            kind = CounterMetricFamily if counter else GaugeMetricFamily
            family = kind(name, doc, labels=list(labels) if labels else None)
            if isinstance(got, Mapping):
                for key, value in got.items():
                    family.add_metric(list(key), float(value))
            else:
                family.add_metric([], float(got))
            yield family


class _Quiet(WSGIRequestHandler):
    # One request at a time: a client that sends nothing must not hold the endpoint
    # (nor its close) for longer than this many seconds.
    timeout = 10.0

    def handle(self) -> None:
        with contextlib.suppress(TimeoutError):  # a silent client: dropped, not logged
            super().handle()

    def log_message(self, format: str, *args: Any) -> None:
        pass  # scrapes are not worth a log line each


class MetricsEndpoint:
    """An HTTP endpoint serving one registry at ``/metrics`` (in a thread of its own).

    Args:
        registry: The registry to serve.
        options: Where to listen, and the token.

    Raises:
        ConfigError: if the address is not loopback and no token is configured, or the
            token file cannot be read.
    """

    def __init__(self, registry: Any, options: MetricsOptions) -> None:
        if options.port is None:
            raise ConfigError('the metrics endpoint is off (no port given)')
        self._token = options.token()
        if self._token is None and not is_loopback(options.bind):
            raise ConfigError(
                f'the metrics endpoint may listen on {options.bind} (not loopback) only with '
                'a bearer token: give --metrics-token-file, or bind to 127.0.0.1',
            )
        self._app = _client().make_wsgi_app(registry)
        self._server: WSGIServer = make_server(
            options.bind, options.port, self._wsgi, handler_class=_Quiet
        )
        self._thread = threading.Thread(
            target=self._server.serve_forever, name='tether-metrics', daemon=True
        )
        self._thread.start()

    @property
    def address(self) -> tuple[str, int]:
        """The bound (host, port)."""
        host, port = self._server.server_address[:2]
        return str(host), int(port)

    def _wsgi(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> Any:
        if self._token is not None:
            given = environ.get('HTTP_AUTHORIZATION', '')
            expected = f'Bearer {self._token}'
            if not hmac.compare_digest(given.encode(), expected.encode()):
                start_response(
                    '401 Unauthorized',
                    [('Content-Type', 'text/plain'), ('WWW-Authenticate', 'Bearer')],
                )
                return [b'a valid bearer token is required\n']
        return self._app(environ, start_response)

    def close(self) -> None:
        """Stop serving."""
        self._server.shutdown()
        self._server.server_close()
        self._thread.join()


def start_endpoint(
    metrics: ServerMetrics | None, options: MetricsOptions
) -> MetricsEndpoint | None:
    """Serve ``metrics`` if ``options`` asks for an endpoint, else return ``None``."""
    if metrics is None or not options.enabled:
        return None
    return MetricsEndpoint(metrics.registry, options)


def click_options(command: Callable[..., Any]) -> Callable[..., Any]:
    """Add ``--metrics-port``, ``--metrics-bind`` and ``--metrics-token-file`` to a command.

    The command receives them as one ``metrics`` argument (a :class:`MetricsOptions`).
    """
    import functools

    import click

    @functools.wraps(command)
    def wrapper(
        *args: Any,
        metrics_port: int | None,
        metrics_bind: str,
        metrics_token_file: str | None,
        **kwargs: Any,
    ) -> Any:
        from pydantic import ValidationError

        token_file = str(Path(metrics_token_file).resolve()) if metrics_token_file else None
        try:
            options = MetricsOptions(port=metrics_port, bind=metrics_bind, token_file=token_file)
        except ValidationError as e:
            raise click.UsageError(
                '; '.join(str(err['msg']) for err in e.errors()),
            ) from e
        return command(*args, metrics=options, **kwargs)

    for option in reversed(
        (
            click.option(
                '--metrics-port',
                type=int,
                default=None,
                help='Serve Prometheus metrics over HTTP on this port (0: any free port; '
                'default: no metrics).',
            ),
            click.option(
                '--metrics-bind',
                default='127.0.0.1',
                show_default=True,
                help='Address of the metrics endpoint (not loopback: needs --metrics-token-file).',
            ),
            click.option(
                '--metrics-token-file',
                default=None,
                help='File holding the bearer token every scrape must present.',
            ),
        )
    ):
        wrapper = option(wrapper)
    return wrapper


class Served:
    """A server's metrics (``None`` when off) and their HTTP endpoint, opened and closed
    with the server.

    Args:
        metrics: The server's metrics, or ``None`` (metrics off: nothing is recorded).
        options: Where to serve them.
    """

    def __init__(self, metrics: ServerMetrics | None, options: MetricsOptions) -> None:
        self.metrics = metrics
        self.endpoint: MetricsEndpoint | None = None
        self._options = options

    def observed(
        self, handler: Callable[[Any, Any], Awaitable[Any]], ops: Mapping[int, str]
    ) -> Callable[[Any, Any], Awaitable[Any]]:
        """An async frame handler recording each request (``handler`` itself when off).

        ``ops`` names the operation of each message type; a reply ``(type, header,
        payloads)`` whose type is not ``ok`` counts as an error.
        """
        m = self.metrics
        if m is None:
            return handler
        ok = self.ok_type

        async def handle(conn: Any, frame: Any) -> Any:
            start = time.perf_counter()
            reply = await handler(conn, frame)
            out = 0 if not isinstance(reply, tuple) else payload_bytes(reply[2])
            error = isinstance(reply, tuple) and ok is not None and reply[0] != ok
            op = ops.get(frame.type, 'other')
            m.observe(
                op, time.perf_counter() - start, payload_bytes(frame.payloads), out, error=error
            )
            return reply

        return handle

    ok_type: int | None = None
    """The message type of a successful reply (``None``: no reply counts as an error)."""

    def open(self) -> None:
        """Start the HTTP endpoint, if configured."""
        self.endpoint = start_endpoint(self.metrics, self._options)

    def close(self) -> None:
        """Stop the HTTP endpoint."""
        if self.endpoint is not None:
            self.endpoint.close()
            self.endpoint = None

    def address(self) -> tuple[str, int] | None:
        """Where the metrics are served (``None``: nowhere)."""
        return None if self.endpoint is None else self.endpoint.address
