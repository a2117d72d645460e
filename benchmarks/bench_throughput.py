"""Throughput: proxy+resolve of 2,000 objects of 100 KB through Redis, 1 and 2 consumers.

The producer proxies each object and sends the pickled proxy to a consumer process
(round robin); consumers resolve it. The clock runs from the first ``proxy()`` until
every consumer has reported resolving all of its proxies. Objects/s = objects / median.

    .venv/bin/python benchmarks/bench_throughput.py [--quick] [--no-peer]
"""

from __future__ import annotations

from typing import Any

from _common import (
    fmt_time,
    merge_runs,
    parse_args,
    print_table,
    ratio,
    redis_server,
    run_side,
    write_json,
)


def _v(doc: dict[str, Any] | None, n: int, what: str) -> float | None:
    if doc is None:
        return None
    value: float = doc['result'][f'{n}_consumers'][what]
    return value


def main() -> None:
    args = parse_args(__doc__)
    # Alternate the two sides over several rounds (the machine's load drifts) and take
    # the median over all runs of a side.
    rounds = 1 if args.quick else 3
    with redis_server(args.shared_redis) as port:
        tether_runs, peer_runs = [], []
        for _ in range(rounds):
            tether_runs.append(run_side('tether', 'throughput', args.quick))
            if not args.no_peer:
                peer_runs.append(run_side('peer', 'throughput', args.quick))
    tether = merge_runs(tether_runs)
    peer = merge_runs(peer_runs) if peer_runs else None
    for doc in (tether, peer):
        if doc is not None:
            for n in (1, 2):
                entry = doc['result'][f'{n}_consumers']
                entry['objects_per_s'] = doc['result']['objects'] / entry['median']
    rows = []
    for n in (1, 2):
        t, p = _v(tether, n, 'objects_per_s'), _v(peer, n, 'objects_per_s')
        rows.append(
            [
                f'{n} consumer{"s" if n > 1 else ""}',
                fmt_time(_v(tether, n, 'median')),
                fmt_time(_v(peer, n, 'median')),
                f'{t:,.0f}' if t else '-',
                f'{p:,.0f}' if p else '-',
                ratio(t, p),
            ],
        )
    objects = tether['result']['objects']
    md = print_table(
        f'Throughput: {objects} objects of 100 KB through Redis (medians)',
        ['', 'time tether', 'time peer', 'objects/s tether', 'objects/s peer', 't/p (obj/s)'],
        rows,
    )
    write_json('throughput', {'redis_port': port, 'tether': tether, 'peer': peer}, md)


if __name__ == '__main__':
    main()
