"""Overhead of tether's OpenTelemetry hooks on a store's hot path (small put + get).

One process, a store over the local connector (so that the store's own work, not a
server, is what is timed); rounds alternate tracing off, and on with an SDK tracer
provider that drops every span (a processor that does nothing), so that what is timed is
tether's hooks and the span objects, not an exporter. Prints a table and writes JSON.

    .venv/bin/python benchmarks/bench_tracing_overhead.py --rounds 9 --ops 20000
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path
from typing import Any

from tether import tracing
from tether.connectors.local import LocalConnector
from tether.store import Store


def _round(store: Store[Any], ops: int) -> float:
    data = b'x' * 1000
    start = time.perf_counter()
    for _ in range(ops):
        key = store.put(data)
        store.get(key)
        store.evict(key)
    return (time.perf_counter() - start) / ops * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument('--rounds', type=int, default=9)
    parser.add_argument('--ops', type=int, default=20000)
    parser.add_argument('--out', default='benchmarks/results/tracing_overhead.json')
    args = parser.parse_args()
    from opentelemetry.sdk.trace import SpanProcessor, TracerProvider

    provider = TracerProvider()
    provider.add_span_processor(SpanProcessor())  # drops every span
    off: list[float] = []
    on: list[float] = []
    with Store('bench-tracing', LocalConnector(), cache_size=0) as store:
        _round(store, args.ops // 10)  # warm up
        for _ in range(args.rounds):
            tracing.disable()
            off.append(_round(store, args.ops))
            tracing.enable(provider)
            on.append(_round(store, args.ops))
        tracing.disable()
    row = {
        'off_us_per_op': statistics.median(off),
        'on_us_per_op': statistics.median(on),
        'on_over_off': statistics.median(on) / statistics.median(off),
        'rounds': args.rounds,
        'ops': args.ops,
        'op': '1000-byte put + get + evict, LocalConnector, no cache',
    }
    print('| tracing off (µs/op) | tracing on (µs/op) | on/off |')
    print('|---:|---:|---:|')
    print(f'| {row["off_us_per_op"]:.2f} | {row["on_us_per_op"]:.2f} | {row["on_over_off"]:.2f} |')
    Path(args.out).write_text(json.dumps(row, indent=2) + '\n')


if __name__ == '__main__':
    main()
