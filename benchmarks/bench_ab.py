"""A/B driver: the same hot-path micro-benchmarks on two git revisions, paired and alternated.

Issue 26's rule for the redesign: no hot-path figure slower by more than 3%. This driver
makes ``git worktree add /tmp/ab-<rev> <rev>`` for each side (reused when present) and
runs every micro-benchmark in a fresh subprocess of this venv's python with
``PYTHONPATH=/tmp/ab-<rev>/src`` (which overrides the editable install: each child
reports ``tether.__file__``). The measuring code is this checkout's (``benchmarks/``),
the same for both sides; only the tether under test changes.

Each round runs every side once, in an order that alternates from round to round (A B,
B A, ... or, with the A/A control, the six orders of A B C where C is the after tree
again); a figure is the median per-operation time of one subprocess, and the result is
the median over rounds of the paired ratio after/before. The A/A ratio (C/B, the same
tree on both sides) shows the resolution of the harness on this (shared, loaded) machine.

Benchmarks (``--only``; cases in parentheses):

* ``store_shm`` (1KB, 1MB): Store over the shared-memory connector, proxy in this
  process, resolve and touch in a consumer process, evict (``_harness.Consumer``);
* ``store_redis`` (1KB, 1MB): the same over the Redis connector (a private redis-server);
* ``node`` (1KB, 1MB): NodeConnector put + get to a local node server it spawns;
* ``agents_shm`` (1KB, 100KB, 1MB): echo action round trip on the hybrid exchange with
  ``threshold=256``, so that every value travels in the sender's shared-memory slots;
* ``agents_hybrid``, ``agents_redis`` (1KB): echo round trip, default settings;
* ``faas_dev`` (noop): ``bench_faas.faas_latency`` on the dev stack (SQLite, in-process
  queues);
* ``faas_prod`` (noop_rtt, noop_batched_per_task): the same on PostgreSQL + RabbitMQ;
* ``faas_cold`` (first_task): an endpoint's process pool with no worker yet, from one
  task's submission to its result.

Usage::

    .venv/bin/python benchmarks/bench_ab.py --name shm_kit --before acd791d^ \\
        --only store_shm,agents_shm [--rounds 10] [--ops 1.0] [--no-control]

Prints a table and writes ``benchmarks/results/ab_<name>.json``. ``--pool run1,run2
--name both`` pools the paired ratios of earlier runs (same revisions) into one table.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import statistics
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

KB, MB = 1000, 1000 * 1000
DEFAULT_BEFORE = 'c3b76ee'
SLOWER = 0.03  # issue 26: no figure slower by more than 3%

# Child side: one benchmark, one tree ---------------------------------------------------


def _per_op(fn: Callable[[], Any], ops: int, warmup: int) -> float:
    from bench_agents import median_time

    for _ in range(warmup):
        fn()
    return median_time(fn, ops)


def _store_roundtrip(connector: str, ops: int) -> dict[str, float]:
    import pickle

    from _harness import Consumer, load_backend, make_payload, touch

    backend = load_backend('tether')
    store = backend.make_store(connector, f'ab{uuid.uuid4().hex[:6]}')
    consumer = Consumer('tether')
    out = {}
    try:
        for label, nbytes, n in (('1KB', KB, ops), ('1MB', MB, max(ops // 4, 10))):
            obj = make_payload('bytes', nbytes)
            expected = touch(obj)

            def once(obj: Any = obj, expected: float = expected) -> None:
                proxy = backend.proxy(store, obj)
                consumer.send(('rt', pickle.dumps(proxy)))
                check = consumer.recv()[2]
                backend.evict(store, proxy)
                if check != expected:
                    raise RuntimeError(f'{connector}: data mismatch')

            out[label] = _per_op(once, n, warmup=max(n // 10, 3))
    finally:
        consumer.close()
        backend.close_store(store)
    return out


def bench_store_shm(ops: int) -> dict[str, float]:
    return _store_roundtrip('shm', ops)


def bench_store_redis(ops: int) -> dict[str, float]:
    return _store_roundtrip('redis', ops)


def bench_node(ops: int) -> dict[str, float]:
    import shutil
    import tempfile

    import bench_node

    run_dir = tempfile.mkdtemp(prefix='ab-node-')
    name = f'ab-{uuid.uuid4().hex[:8]}'
    node = bench_node.node_connector(run_dir, name)
    out = {}
    try:
        for label, nbytes, n in (('1KB', KB, ops), ('1MB', MB, max(ops // 4, 10))):
            data = os.urandom(nbytes)

            def once(data: bytes = data) -> None:
                key = node.put(data)
                got = node.get(key)
                assert got is not None
                node.evict(key)

            out[label] = _per_op(once, n, warmup=20)
    finally:
        node.close()
        from tether.connectors.node import NodeConnector

        NodeConnector(name, run_dir=run_dir, secret=bench_node.SECRET).stop_server()
        shutil.rmtree(run_dir, ignore_errors=True)
    return out


def _agents_roundtrip(kind: str, sizes: list[int], ops: int) -> dict[str, float]:
    from bench_agents import echo_roundtrips
    from tether.agents.exchange import HybridExchange, RedisExchange

    prefix = f'ab-agents-{uuid.uuid4().hex[:8]}:'
    exchange: Any
    if kind == 'shm':
        exchange = HybridExchange(prefix=prefix, threshold=256)
    elif kind == 'hybrid':
        exchange = HybridExchange(prefix=prefix)
    else:
        exchange = RedisExchange(prefix=prefix)
    got = echo_roundtrips(
        exchange, prefix, sizes, lambda size: ops if size < MB else max(ops // 4, 10)
    )
    return {(f'{s // MB}MB' if s >= MB else f'{s // KB}KB'): t for s, t in got.items()}


def bench_agents_shm(ops: int) -> dict[str, float]:
    return _agents_roundtrip('shm', [KB, 100 * KB, MB], ops)


def bench_agents_hybrid(ops: int) -> dict[str, float]:
    return _agents_roundtrip('hybrid', [KB], ops)


def bench_agents_redis(ops: int) -> dict[str, float]:
    return _agents_roundtrip('redis', [KB], ops)


def bench_faas_dev(ops: int) -> dict[str, float]:
    from _faas_stack import dev_stack
    from bench_faas import faas_latency

    with dev_stack() as stack:
        return {'noop': float(faas_latency(stack, max(ops // 2, 20))['median'])}


def bench_faas_prod(ops: int) -> dict[str, float]:
    """The single-endpoint no-op on PostgreSQL + RabbitMQ: the median round trip of
    sequential tasks, and the time per task of a batch submitted at once (1 / tasks/s)."""
    from _faas_stack import prod_stack
    from bench_faas import faas_latency, faas_throughput

    with prod_stack() as stack:
        return {
            'noop_rtt': float(faas_latency(stack, max(ops // 2, 20))['median']),
            'noop_batched_per_task': 1.0 / faas_throughput(stack, max(ops * 25, 500)),
        }


def bench_faas_cold(ops: int) -> dict[str, float]:
    """An endpoint's process pool with no worker yet: from one task's submission to its
    result (a worker is started for it), a new pool each time."""
    import queue

    from tether.faas import EndpointConfig
    from tether.faas._payload import pack_args, pack_function
    from tether.faas.endpoint._pool import ProcessPoolEngine
    from tether.faas.endpoint.engine import Task

    config = EndpointConfig(
        name='cold', endpoint_id='cold', service_url='http://127.0.0.1:1', max_workers=1
    )
    times = []
    results: queue.SimpleQueue[dict[str, Any]] = queue.SimpleQueue()
    for i in range(max(ops // 20, 5)):
        engine = ProcessPoolEngine(config, lambda ids: None, lambda h, p: results.put(h))
        engine.start()
        task = Task(
            task_id=str(i),
            function_id='builtins.abs',
            function_serializer='pickle',
            function_body=pack_function(abs),
            data_serializer='tether',
            payload=pack_args((-i,), {}),
        )
        start = time.perf_counter()
        engine.submit([task])
        header = results.get(timeout=60)
        times.append(time.perf_counter() - start)
        engine.stop()
        if header['status'] != 'success':
            raise RuntimeError(f'cold task failed: {header}')
    return {'first_task': statistics.median(times)}


BENCHES: dict[str, tuple[Callable[[int], dict[str, float]], int]] = {
    # name: (function, operations timed per subprocess at --ops 1.0)
    'store_shm': (bench_store_shm, 400),
    'store_redis': (bench_store_redis, 400),
    'node': (bench_node, 400),
    'agents_shm': (bench_agents_shm, 200),
    'agents_hybrid': (bench_agents_hybrid, 400),
    'agents_redis': (bench_agents_redis, 400),
    'faas_dev': (bench_faas_dev, 200),
    'faas_prod': (bench_faas_prod, 200),
    'faas_cold': (bench_faas_cold, 200),
}


def child_main(bench: str, ops: int) -> None:
    import tether

    result = {'tether': tether.__file__, 'cases': BENCHES[bench][0](ops)}
    print(json.dumps(result), flush=True)


# Driver side ---------------------------------------------------------------------------


def _git(*args: str) -> str:
    return subprocess.run(
        ['git', '-C', os.path.dirname(HERE), *args],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()


def worktree(rev: str) -> tuple[str, str]:
    """``(commit, path)`` of ``/tmp/ab-<short commit>``, added if missing."""
    commit = _git('rev-parse', '--short', f'{rev}^{{commit}}')
    path = f'/tmp/ab-{commit}'
    if not os.path.isdir(os.path.join(path, 'src', 'tether')):
        _git('worktree', 'add', '--detach', path, commit)
    return commit, path


def load() -> str:
    return subprocess.run(['uptime'], check=False, capture_output=True, text=True).stdout.strip()


def run_child(bench: str, tree: str, ops: int, env: dict[str, str]) -> dict[str, Any]:
    child_env = {**env, 'PYTHONPATH': os.pathsep.join([os.path.join(tree, 'src'), HERE])}
    cmd = [sys.executable, os.path.abspath(__file__), '--child', bench, '--child-ops', str(ops)]
    proc = subprocess.run(
        cmd, check=False, capture_output=True, text=True, env=child_env, timeout=600, cwd='/tmp'
    )
    if proc.returncode != 0:
        raise RuntimeError(f'{bench} on {tree} failed:\n{proc.stderr[-3000:]}')
    result: dict[str, Any] = json.loads(proc.stdout.strip().splitlines()[-1])
    expected = os.path.join(tree, 'src', 'tether', '__init__.py')
    if os.path.realpath(result['tether']) != os.path.realpath(expected):
        raise RuntimeError(f'{bench}: imported {result["tether"]}, not {expected}')
    return result


def orders(control: bool) -> Iterator[tuple[str, ...]]:
    """Side orders, round after round: A B / B A, or the six orders of A B C."""
    if control:
        yield from itertools.cycle(list(itertools.permutations('ABC')))
    else:
        yield from itertools.cycle([('A', 'B'), ('B', 'A')])


def _quartiles(xs: list[float]) -> tuple[float, float]:
    if len(xs) < 2:
        return xs[0], xs[0]
    q = statistics.quantiles(xs, n=4, method='inclusive')
    return q[0], q[2]


def summarize(ab: list[float], aa: list[float] | None) -> dict[str, Any]:
    """Median and IQR of the paired ratios; the A/A control's; the verdict.

    ``SLOWER``: more than 3% slower beyond the A/A spread (how far from 1 the control's
    median and middle half reach); ``check``: more than 3% slower, within that spread.
    """
    row: dict[str, Any] = {'ratio': statistics.median(ab), 'ratio_iqr': _quartiles(ab)}
    spread = 0.0
    if aa:
        lo, hi = _quartiles(aa)
        row['aa_ratio'] = statistics.median(aa)
        row['aa_iqr'] = (lo, hi)
        spread = max(abs(lo - 1), abs(hi - 1), abs(row['aa_ratio'] - 1))
        row['aa_spread'] = spread
    excess = row['ratio'] - 1 - SLOWER
    row['verdict'] = 'SLOWER' if excess > spread else 'check' if excess > 0 else 'ok'
    return row


def analyse(samples: dict[str, list[dict[str, float]]]) -> dict[str, Any]:
    """Per case: every side's figures and medians, paired ratios B/A (and C/B)."""
    out: dict[str, Any] = {}
    for case in samples['A'][0]:
        a = [r[case] for r in samples['A']]
        b = [r[case] for r in samples['B']]
        ab = [y / x for x, y in zip(a, b, strict=True)]
        aa = None
        if samples.get('C'):
            c = [r[case] for r in samples['C']]
            aa = [y / x for x, y in zip(b, c, strict=True)]
        out[case] = {
            'before_median': statistics.median(a),
            'after_median': statistics.median(b),
            **summarize(ab, aa),
            'before': a,
            'after': b,
            'ratios': ab,
            'aa_ratios': aa,
        }
    return out


def pool(names: list[str]) -> dict[str, Any]:
    """The runs ``results/ab_<name>.json`` (same revisions) as one: ratios pooled."""
    from _common import RESULTS

    runs = []
    for name in names:
        with open(os.path.join(RESULTS, f'ab_{name}.json')) as f:
            runs.append(json.load(f))
    benches: dict[str, Any] = {}
    for bench, cases in runs[0]['benchmarks'].items():
        benches[bench] = {}
        for case in cases:
            rows = [run['benchmarks'][bench][case] for run in runs if bench in run['benchmarks']]
            aa = [x for r in rows for x in r.get('aa_ratios') or []]
            benches[bench][case] = {
                'before_median': statistics.median(r['before_median'] for r in rows),
                'after_median': statistics.median(r['after_median'] for r in rows),
                **summarize([x for r in rows for x in r['ratios']], aa or None),
            }
    first = runs[0]
    return {
        'pooled': names,
        'before': first['before'],
        'after': first['after'],
        'rounds': sum(run['rounds'] for run in runs),
        'loads': [[run['load_start'], run['load_end']] for run in runs],
        'benchmarks': benches,
    }


def _parse() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    p.add_argument('--before', default=DEFAULT_BEFORE, help='revision A (default c3b76ee)')
    p.add_argument('--after', default='HEAD', help='revision B (default HEAD)')
    p.add_argument('--only', default=','.join(BENCHES), help='comma-separated benchmarks')
    p.add_argument('--rounds', type=int, default=10, help='rounds (every side once each)')
    p.add_argument('--ops', type=float, default=1.0, help='scale of operations per child')
    p.add_argument('--no-control', action='store_true', help='skip the A/A control side C')
    p.add_argument('--name', default='hotpaths', help='results/ab_<name>.json')
    p.add_argument('--pool', help='comma-separated run names to pool (no run)')
    p.add_argument('--child', help=argparse.SUPPRESS)
    p.add_argument('--child-ops', type=int, default=0, help=argparse.SUPPRESS)
    return p.parse_args()


def _fmt(seconds: float) -> str:
    from _common import fmt_time

    return fmt_time(seconds)


def report(results: dict[str, Any]) -> str:
    from _common import print_table

    rows = []
    for bench, cases in results['benchmarks'].items():
        for case, r in cases.items():
            lo, hi = r['ratio_iqr']
            aa = '-'
            if 'aa_ratio' in r:
                aa = f'{r["aa_ratio"]:.3f} (IQR {r["aa_iqr"][0]:.3f}-{r["aa_iqr"][1]:.3f})'
            rows.append(
                [
                    f'{bench} {case}',
                    _fmt(r['before_median']),
                    _fmt(r['after_median']),
                    f'{r["ratio"]:.3f} (IQR {lo:.3f}-{hi:.3f})',
                    aa,
                    r['verdict'],
                ]
            )
    title = (
        f'A/B {results["before"]} -> {results["after"]}, {results["rounds"]} rounds, '
        'per-op medians; ratio = median of paired after/before'
    )
    headers = ['benchmark', 'before', 'after', 'after/before', 'A/A (after/after)', 'verdict']
    return print_table(title, headers, rows)


def driver(args: argparse.Namespace) -> None:
    from _common import redis_server, write_json

    benches = [b.strip() for b in args.only.split(',') if b.strip()]
    unknown = set(benches) - set(BENCHES)
    if unknown:
        raise SystemExit(f'unknown benchmarks: {sorted(unknown)}; known: {list(BENCHES)}')
    (a_rev, a_tree), (b_rev, b_tree) = worktree(args.before), worktree(args.after)
    trees = {'A': a_tree, 'B': b_tree, 'C': b_tree}
    results: dict[str, Any] = {
        'before': f'{args.before} ({a_rev})',
        'after': f'{args.after} ({b_rev})',
        'rounds': args.rounds,
        'ops_scale': args.ops,
        'control': not args.no_control,
        'started': time.strftime('%Y-%m-%d %H:%M:%S UTC', time.gmtime()),
        'load_start': load(),
        'benchmarks': {},
        'orders': {},
        'load': {},
    }
    print(f'A = {a_tree}, B = {b_tree}; {results["load_start"]}', flush=True)
    with redis_server(shared=False) as port:
        env = {**os.environ, 'BENCH_REDIS_PORT': str(port)}
        for bench in benches:
            ops = max(int(BENCHES[bench][1] * args.ops), 10)
            samples: dict[str, list[dict[str, float]]] = {'A': [], 'B': [], 'C': []}
            seen: list[str] = []
            order_log = []
            for _, order in zip(range(args.rounds), orders(not args.no_control), strict=False):
                for side in order:
                    res = run_child(bench, trees[side], ops, env)
                    if side not in seen:
                        print(f'  {bench} {side}: tether from {res["tether"]}', flush=True)
                        seen.append(side)
                    samples[side].append(res['cases'])
                order_log.append(''.join(order))
            results['benchmarks'][bench] = analyse(samples)
            results['orders'][bench] = order_log
            results['load'][bench] = load()
            for case, r in results['benchmarks'][bench].items():
                print(
                    f'{bench} {case}: ratio {r["ratio"]:.3f} A/A {r.get("aa_ratio", "-")} '
                    f'{r["verdict"]} ({results["load"][bench]})',
                    flush=True,
                )
    results['finished'] = time.strftime('%Y-%m-%d %H:%M:%S UTC', time.gmtime())
    results['load_end'] = load()
    results['markdown'] = report(results)
    print(f'load: start {results["load_start"]}\n      end   {results["load_end"]}')
    write_json(f'ab_{args.name}', results)


def main() -> None:
    args = _parse()
    if args.child:
        child_main(args.child, args.child_ops)
    elif args.pool:
        from _common import write_json

        results = pool(args.pool.split(','))
        results['markdown'] = report(results)
        write_json(f'ab_{args.name}', results)
    else:
        driver(args)


if __name__ == '__main__':
    main()
