"""Throughput of many small objects through Redis, batched: tether, ProxyStore, raw redis-py.

2,048 objects of 100 KB. The producer makes a batch of proxies at once
(``Store.proxy_batch``) and sends the batch to a consumer process (round robin over 1 or 2
consumers), which resolves it at once: tether with ``tether.store.batch.resolve_batch``
(one round trip), ProxyStore 1.1 one proxy at a time (it has no batch resolution).
``raw`` is redis-py without a store: pipelined ``SET`` of the batch, the keys sent,
pipelined ``GET`` in the consumer: the bound a store over Redis can approach. The
unbatched rows (one proxy per message, one resolve per proxy) are ``bench_throughput.py``'s,
run in the same invocation. The sides alternate over rounds (the machine's load drifts);
medians over all runs of a side.

    .venv/bin/python benchmarks/bench_redis_batch.py [--quick] [--no-peer] [--rounds N]
"""

from __future__ import annotations

import sys
from typing import Any

from _common import merge_runs, parse_args, print_table, ratio, redis_server, run_side, write_json


def _rate(doc: dict[str, Any] | None, key: str) -> float | None:
    if doc is None or key not in doc['result']:
        return None
    entry = doc['result'][key]
    rate: float = doc['result']['objects'] / entry['median']
    return rate


def main() -> None:
    rounds = 3
    if '--rounds' in sys.argv:
        i = sys.argv.index('--rounds')
        rounds = int(sys.argv[i + 1])
        del sys.argv[i : i + 2]
    args = parse_args(__doc__)
    sides = ['tether', 'raw'] + ([] if args.no_peer else ['peer'])
    runs: dict[str, list[dict[str, Any]]] = {s: [] for s in sides}
    single: dict[str, list[dict[str, Any]]] = {s: [] for s in sides if s != 'raw'}
    with redis_server(args.shared_redis) as port:
        for _ in range(1 if args.quick else rounds):
            for side in sides:
                runs[side].append(run_side(side, 'throughput_batch', args.quick))
                if side in single:
                    single[side].append(run_side(side, 'throughput', args.quick))
    batch = {s: merge_runs(r) for s, r in runs.items()}
    one = {s: merge_runs(r) for s, r in single.items()}
    peer = 'peer' in batch
    rows = []
    for n in (1, 2):
        t = _rate(one['tether'], f'{n}_consumers')
        p = _rate(one.get('peer'), f'{n}_consumers')
        rows.append(
            [
                f'unbatched, {n} consumer(s)',
                f'{t:,.0f}',
                f'{p:,.0f}' if p else '-',
                '-',
                ratio(t, p),
                '-',
            ]
        )
    for size in batch['tether']['result']['batches']:
        for n in (1, 2):
            key = f'b{size}_{n}_consumers'
            t = _rate(batch['tether'], key)
            p = _rate(batch.get('peer'), key)
            r = _rate(batch['raw'], key)
            rows.append(
                [
                    f'batches of {size}, {n} consumer(s)',
                    f'{t:,.0f}',
                    f'{p:,.0f}' if p else '-',
                    f'{r:,.0f}',
                    ratio(t, p),
                    ratio(t, r),
                ]
            )
    md = print_table(
        f'Objects/s, {batch["tether"]["result"]["objects"]} objects of 100 KB through Redis '
        f'(medians of {rounds if not args.quick else 1} alternated rounds)',
        [
            '',
            'tether',
            'ProxyStore' if peer else 'peer',
            'raw redis-py',
            'tether/peer',
            'tether/raw',
        ],
        rows,
    )
    write_json(
        'redis_batch',
        {'redis_port': port, 'batched': batch, 'unbatched': one, 'rounds': rounds},
        md,
    )


if __name__ == '__main__':
    main()
