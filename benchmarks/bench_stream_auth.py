"""What the stream's trust checks cost: pinned, open and signed consumers, and the peer.

Isolates the per-event cost (small items, an in-process queue and a local store, no
network): a producer sends ``items`` items of 100 bytes, then a consumer turns every
event into a proxy (not resolved). Timed separately, per item; each round takes one
sample of every mode (after a warm-up run), and the table shows medians over rounds:

* ``pinned``: tether's default (no stream key; the consumer accepts the stores it has
  registered);
* ``open``: no key, ``accept_unknown_stores=True`` (the store rebuilt from the event
  after the allowlist check; main's behaviour before the checks existed);
* ``signed``: a stream key (HMAC-SHA256 per message, replay and freshness checks);
* ``peer``: ProxyStore's ``StreamProducer``/``StreamConsumer`` with its queue shim and
  local connector, in the peer venv (``benchmarks/peer_env.sh``), same workload.

Usage::

    python benchmarks/bench_stream_auth.py [--quick] [--no-peer]
"""

from __future__ import annotations

import argparse
import json
import os
import queue
import secrets
import statistics
import subprocess
import sys
import time
from typing import Any

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

PAYLOAD = b'x' * 100


def _collect(once: Any, repeats: int) -> dict[str, list[float]]:
    """Run ``once() -> (produce, consume)`` once to warm up, then ``repeats`` times."""
    once()
    samples = [once() for _ in range(repeats)]
    return {'produce': [p for p, _ in samples], 'consume': [c for _, c in samples]}


def _timed(produce: Any, consume: Any, items: int) -> tuple[float, float]:
    """Seconds per item of ``produce()`` and of ``consume()`` (which returns a count)."""
    t0 = time.perf_counter()
    produce()
    t1 = time.perf_counter()
    n = consume()
    t2 = time.perf_counter()
    assert n == items, n
    return (t1 - t0) / items, (t2 - t1) / items


def run_tether(mode: str, items: int, repeats: int) -> dict[str, list[float]]:
    from tether.connectors.local import LocalConnector
    from tether.store import Store
    from tether.stream import StreamConsumer, StreamProducer
    from tether.stream.shims.queue import QueuePublisher, QueueSubscriber

    key: Any = secrets.token_hex(32) if mode == 'signed' else False

    def once() -> tuple[float, float]:
        store = Store(f'bench-{mode}-{secrets.token_hex(4)}', LocalConnector(), register=True)
        q: queue.Queue[bytes] = queue.Queue()

        def produce() -> None:
            with StreamProducer(QueuePublisher({'t': q}), store, key=key) as producer:
                for _ in range(items):
                    producer.send('t', PAYLOAD, evict=False)

        def consume() -> int:
            unknown = mode != 'pinned'
            consumer = StreamConsumer(
                QueueSubscriber(q, 't'), key=key, accept_unknown_stores=unknown
            )
            return sum(1 for _ in consumer)

        try:
            return _timed(produce, consume, items)
        finally:
            store.close()

    return _collect(once, repeats)


def run_peer_inline(items: int, repeats: int) -> dict[str, list[float]]:
    """Runs inside the peer venv."""
    from proxystore.connectors.local import LocalConnector
    from proxystore.store import Store
    from proxystore.stream import StreamConsumer, StreamProducer
    from proxystore.stream.shims.queue import QueuePublisher, QueueSubscriber

    def once() -> tuple[float, float]:
        store: Any = Store(f'bench-peer-{secrets.token_hex(4)}', LocalConnector(), register=True)
        q: queue.Queue[bytes] = queue.Queue()

        def produce() -> None:
            producer: Any = StreamProducer(QueuePublisher({'t': q}), stores={'t': store})
            for _ in range(items):
                producer.send('t', PAYLOAD, evict=False)
            producer.close_topics('t')
            producer.close()

        def consume() -> int:
            return sum(1 for _ in StreamConsumer(QueueSubscriber(q)))

        try:
            return _timed(produce, consume, items)
        finally:
            store.close()

    return _collect(once, repeats)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('--quick', action='store_true')
    parser.add_argument('--no-peer', action='store_true')
    parser.add_argument('--peer-side', action='store_true', help=argparse.SUPPRESS)
    parser.add_argument('--items', type=int, default=None)
    parser.add_argument('--repeats', type=int, default=None)
    args = parser.parse_args()
    items = args.items or (1000 if args.quick else 5000)
    repeats = args.repeats or (3 if args.quick else 9)
    if args.peer_side:
        print(json.dumps(run_peer_inline(items, repeats)))
        return

    from _common import peer_python, print_table, write_json

    # Rounds interleave the modes (one sample of each per round), so that the load of a
    # shared machine weighs on every mode alike.
    modes = ['pinned', 'open', 'signed'] + ([] if args.no_peer else ['peer'])
    results: dict[str, dict[str, list[float]]] = {m: {'produce': [], 'consume': []} for m in modes}
    python = None if args.no_peer else peer_python()
    for r in range(repeats):
        print(f'round {r + 1}/{repeats} ...', file=sys.stderr, flush=True)
        for mode in modes:
            if mode == 'peer':
                assert python is not None
                cmd = [python, __file__, '--peer-side', '--items', str(items), '--repeats', '1']
                out = subprocess.run(cmd, check=True, capture_output=True, text=True, timeout=900)
                sample = json.loads(out.stdout.strip().splitlines()[-1])
            else:
                sample = run_tether(mode, items, 1)
            for k in ('produce', 'consume'):
                results[mode][k].extend(sample[k])

    med = {m: {k: statistics.median(v) for k, v in r.items()} for m, r in results.items()}
    base = med['pinned']
    peer = med.get('peer')
    rows = []
    for mode, m in med.items():
        rows.append(
            [
                mode,
                f'{m["produce"] * 1e6:.1f}',
                f'{m["produce"] / base["produce"]:.2f}',
                '-' if peer is None else f'{m["produce"] / peer["produce"]:.2f}',
                f'{m["consume"] * 1e6:.1f}',
                f'{m["consume"] / base["consume"]:.2f}',
                '-' if peer is None else f'{m["consume"] / peer["consume"]:.2f}',
            ]
        )
    print_table(
        f'stream trust checks: {items} items of 100 B, median of {repeats} rounds',
        [
            'mode',
            'produce us/item',
            'x pinned',
            'x peer',
            'consume us/item',
            'x pinned',
            'x peer',
        ],
        rows,
    )
    write_json(
        'stream_auth',
        {
            'items': items,
            'repeats': repeats,
            'load': os.getloadavg(),
            'results': results,
            'medians': med,
        },
    )


if __name__ == '__main__':
    main()
