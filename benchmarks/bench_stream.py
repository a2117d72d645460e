"""Reproduce figure 4.12 of the dissertation: ProxyStream against data through the broker.

One producer process publishes ``items`` items of ``d`` bytes at ``rate`` items/s. The
dispatcher (this process) consumes the stream and submits one task per item to a pool
of workers (a ``ProcessPoolExecutor`` and a Parsl ``HighThroughputExecutor`` on
loopback); each task uses its item and sleeps ``sleep`` seconds. Modes:

* ``baseline``: the item itself goes through Redis pub/sub and on through the dispatcher
  to the worker (the seed's "Redis Pub/Sub" configuration);
* ``ps-redis``: ProxyStream, events through Redis pub/sub, data in a Redis store;
* ``ps-shm``: ProxyStream, events through Redis pub/sub, data in shared memory.

Measured per run: tasks completed per second (items / time from the first item received
to the last task done), dispatcher CPU seconds per item (``time.process_time()`` of
this process, which includes the executor's feeder threads that pickle task arguments)
and bytes the dispatcher handles per item (message received + task argument sent).
Redis is a private ``redis-server`` on a free port (no pub/sub output-buffer limit, so a
slow baseline dispatcher is not disconnected).

Usage::

    python benchmarks/bench_stream.py [--quick] [--executors process,parsl]
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import pickle
import statistics
import sys
import tempfile
import time
import uuid
from concurrent.futures import Future, ProcessPoolExecutor, wait
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from _stream_tasks import produce, simulate, warm  # noqa: E402

RESULTS = HERE / 'results' / 'bench_stream.json'
SIZES = {'100KB': 100_000, '1MB': 1_000_000, '10MB': 10_000_000}


def start_redis() -> Any:
    """Start a private redis-server (no persistence, no pub/sub buffer limit)."""
    from tether.testing import RedisServer

    server = RedisServer(args=['--client-output-buffer-limit', 'pubsub 0 0 0'])
    server.start()
    return server


class _Counting:
    """A subscriber that counts the bytes of the messages it hands out."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.nbytes = 0

    def next_message(self, timeout: float | None = None) -> bytes:
        message: bytes = self.inner.next_message(timeout)
        self.nbytes += len(message)
        return message

    def close(self) -> None:
        self.inner.close()


class Pool:
    """A ProcessPoolExecutor or a Parsl HighThroughputExecutor behind one submit()."""

    def __init__(self, kind: str, workers: int, run_dir: str) -> None:
        self.kind = kind
        if kind == 'process':
            self._pool: Any = ProcessPoolExecutor(
                workers,
                mp_context=multiprocessing.get_context('spawn'),
            )
            wait([self._pool.submit(warm, b'x', 0.1) for _ in range(workers * 2)])
            return
        import logging

        import parsl
        from parsl.config import Config
        from parsl.executors import HighThroughputExecutor
        from parsl.providers import LocalProvider

        logging.getLogger('parsl').setLevel(logging.WARNING)
        os.environ['PATH'] = f'{Path(sys.executable).parent}:{os.environ.get("PATH", "")}'
        os.environ['PYTHONPATH'] = f'{HERE}:{os.environ.get("PYTHONPATH", "")}'
        htex = HighThroughputExecutor(
            label='bench_stream',
            address='127.0.0.1',
            max_workers_per_node=workers,
            provider=LocalProvider(init_blocks=1, min_blocks=1, max_blocks=1),  # type: ignore[no-untyped-call]
        )
        self._dfk = parsl.load(Config(executors=[htex], run_dir=run_dir, strategy='none'))
        self._pool = htex
        wait([self.submit(warm, b'x', 0.1) for _ in range(workers * 2)])

    def submit(self, fn: Any, *args: Any) -> Future[Any]:
        if self.kind == 'process':
            return self._pool.submit(fn, *args)  # type: ignore[no-any-return]
        return self._pool.submit(fn, {}, *args)  # type: ignore[no-any-return]

    def close(self) -> None:
        if self.kind == 'process':
            self._pool.shutdown()
        else:
            self._dfk.cleanup()


def _dispatch(
    pool: Pool, mode: str, pubsub: Any, consumer: Any, sleep_s: float
) -> tuple[list[Future[Any]], int, float | None]:
    """Hand each streamed item to ``pool``; return the futures, bytes handled, first arrival."""
    futures: list[Future[Any]] = []
    handled = 0
    first: float | None = None
    while True:
        if mode == 'baseline':
            msg = pubsub.get_message(timeout=120)
            if msg is None:
                continue
            data = msg['data']
            if data == b'':
                break
            if first is None:
                first = time.perf_counter()
            handled += 2 * len(data)  # received from Redis, sent on to the worker
            futures.append(pool.submit(simulate, data, sleep_s))
        else:
            try:
                proxy = consumer.next()
            except StopIteration:
                break
            if first is None:
                first = time.perf_counter()
            handled += len(pickle.dumps(proxy))
            futures.append(pool.submit(simulate, proxy, sleep_s))
    return futures, handled, first


def run_one(
    pool: Pool,
    mode: str,
    size: int,
    *,
    redis_port: int,
    items: int,
    rate: float,
    sleep_s: float,
) -> dict[str, Any]:
    """Stream ``items`` items of ``size`` bytes through ``mode``; return the measures."""
    import redis

    from tether.stream import StreamConsumer
    from tether.stream.shims.redis import RedisSubscriber

    topic = f'bench-{uuid.uuid4().hex[:8]}'
    prefix = f'bench-{uuid.uuid4().hex[:8]}:'
    store_kind = 'shm' if mode == 'ps-shm' else 'redis'
    pubsub: Any = None
    consumer: Any = None
    counting: Any = None
    if mode == 'baseline':
        client = redis.Redis('127.0.0.1', redis_port)
        pubsub = client.pubsub(ignore_subscribe_messages=True)  # type: ignore[no-untyped-call]
        pubsub.subscribe(topic)
        while pubsub.get_message(timeout=1) is None and not pubsub.subscribed:
            pass
    else:
        counting = _Counting(RedisSubscriber('127.0.0.1', redis_port, topic))
        consumer = StreamConsumer(counting, timeout=120)
    ctx = multiprocessing.get_context('spawn')
    producer = ctx.Process(
        target=produce,
        args=(
            {
                'mode': mode,
                'redis_port': redis_port,
                'topic': topic,
                'size': size,
                'count': items,
                'rate': rate,
                'store_kind': store_kind,
                'prefix': prefix,
            },
        ),
    )
    producer.start()
    cpu0 = time.process_time()
    futures, handled, first = _dispatch(pool, mode, pubsub, consumer, sleep_s)
    dispatch_cpu = time.process_time() - cpu0
    done, _ = wait(futures)
    end = time.perf_counter()
    cpu = time.process_time() - cpu0
    assert all(f.result() == size for f in done)
    producer.join(60)
    if counting is not None:
        handled += counting.nbytes
        consumer.close()
    else:
        pubsub.close()
        client.close()
    if store_kind == 'shm':
        from tether.connectors.shared_memory import cleanup

        cleanup(prefix.strip(':').replace('-', '_'))
    assert first is not None
    return {
        'tasks_per_s': items / (end - first),
        'cpu_per_item_ms': 1000 * cpu / items,
        'dispatch_cpu_per_item_ms': 1000 * dispatch_cpu / items,
        'bytes_per_item': handled / items,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('--quick', action='store_true', help='short run')
    parser.add_argument('--executors', default='process,parsl')
    parser.add_argument('--modes', default='baseline,ps-redis,ps-shm')
    parser.add_argument('--sizes', default='100KB,1MB,10MB')
    parser.add_argument('--workers', type=int, default=4)
    parser.add_argument('--sleep', type=float, default=0.05, help='task sleep s (seconds)')
    parser.add_argument('--rate', type=float, default=200.0, help='producer items/s')
    parser.add_argument('--items', type=int, default=60)
    parser.add_argument('--repeats', type=int, default=3)
    parser.add_argument('--out', type=Path, default=None, help='JSON results file')
    args = parser.parse_args()
    if args.quick:
        args.items, args.repeats = 20, 1
    out = args.out or (RESULTS.with_name('bench_stream_quick.json') if args.quick else RESULTS)
    redis = start_redis()
    port = redis.port
    rows: list[dict[str, Any]] = []
    try:
        for kind in args.executors.split(','):
            with tempfile.TemporaryDirectory() as run_dir:
                pool = Pool(kind, args.workers, run_dir)
                try:
                    for size_name in args.sizes.split(','):
                        for mode in args.modes.split(','):
                            runs = [
                                run_one(
                                    pool,
                                    mode,
                                    SIZES[size_name],
                                    redis_port=port,
                                    items=args.items,
                                    rate=args.rate,
                                    sleep_s=args.sleep,
                                )
                                for _ in range(args.repeats)
                            ]
                            row = {
                                'executor': kind,
                                'size': size_name,
                                'mode': mode,
                                **{k: statistics.median(r[k] for r in runs) for k in runs[0]},
                            }
                            rows.append(row)
                            print(_fmt(row), flush=True)
                finally:
                    pool.close()
    finally:
        redis.stop()
    _table(rows, args)
    out.parent.mkdir(exist_ok=True)
    params = {k: str(v) if isinstance(v, Path) else v for k, v in vars(args).items()}
    out.write_text(json.dumps({'params': params, 'rows': rows}, indent=2) + '\n')
    print(f'wrote {out}')


def _fmt(row: dict[str, Any]) -> str:
    return (
        f'{row["executor"]:8} {row["size"]:6} {row["mode"]:9} '
        f'{row["tasks_per_s"]:8.1f} tasks/s  {row["cpu_per_item_ms"]:8.2f} ms CPU/item  '
        f'{row["bytes_per_item"]:12.0f} B/item'
    )


def _table(rows: list[dict[str, Any]], args: argparse.Namespace) -> None:
    print()
    print(
        f'workers={args.workers} sleep={args.sleep}s rate={args.rate}/s items={args.items} '
        f'repeats={args.repeats} (medians)',
    )
    header = (
        f'{"executor":8} {"size":6} {"mode":9} {"tasks/s":>8} {"x base":>7} '
        f'{"CPU ms/item":>11} {"B/item":>12}'
    )
    print(header)
    print('-' * len(header))
    base = {(r['executor'], r['size']): r for r in rows if r['mode'] == 'baseline'}
    for r in rows:
        b = base.get((r['executor'], r['size']))
        ratio = r['tasks_per_s'] / b['tasks_per_s'] if b else float('nan')
        r['speedup_vs_baseline'] = ratio
        print(
            f'{r["executor"]:8} {r["size"]:6} {r["mode"]:9} {r["tasks_per_s"]:8.1f} '
            f'{ratio:7.2f} {r["cpu_per_item_ms"]:11.2f} {r["bytes_per_item"]:12.0f}',
        )


if __name__ == '__main__':
    main()
