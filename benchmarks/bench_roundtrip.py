"""Cross-process round trip: producer proxy() -> long-lived consumer resolves -> reply.

For bytes and float64 NumPy arrays of 1 KB ... 100 MB, per connector (Redis, file,
shared memory), report the end-to-end time, the producer's ``proxy()`` time and the
consumer's resolve time (unpickling the proxy and fetching the object; reading every
byte afterwards is timed separately as "touch"), for tether and for proxystore.

    .venv/bin/python benchmarks/bench_roundtrip.py [--quick] [--no-peer]
"""

from __future__ import annotations

import os
from typing import Any

from _common import (
    fmt_time,
    parse_args,
    print_table,
    ratio,
    redis_server,
    run_side,
    write_json,
)


def _get(doc: dict[str, Any] | None, connector: str, case: str, what: str) -> float | None:
    if doc is None:
        return None
    value: float = doc['result'][connector]['cases'][case][what]['median']
    return value


def main() -> None:
    args = parse_args(__doc__)
    # Variants (environment): BENCH_CONNECTORS=redis,... limits the connectors,
    # BENCH_CACHE_SIZE sets both libraries' store cache, BENCH_NAME names the results.
    name = os.environ.get('BENCH_NAME', 'roundtrip')
    with redis_server(args.shared_redis) as port:
        tether = run_side('tether', 'roundtrip', args.quick)
        peer = None if args.no_peer else run_side('peer', 'roundtrip', args.quick)
    columns = [
        'connector / case',
        'e2e tether',
        'e2e peer',
        'e2e t/p',
        'proxy() tether',
        'proxy() peer',
        'resolve tether',
        'resolve peer',
        'resolve t/p',
        'touch tether',
    ]
    rows = []
    for connector, info in tether['result'].items():
        for case in info['cases']:
            e2e_t = _get(tether, connector, case, 'end_to_end')
            e2e_p = _get(peer, connector, case, 'end_to_end')
            res_t = _get(tether, connector, case, 'resolve')
            res_p = _get(peer, connector, case, 'resolve')
            rows.append(
                [
                    f'{connector} {case}',
                    fmt_time(e2e_t),
                    fmt_time(e2e_p),
                    ratio(e2e_t, e2e_p),
                    fmt_time(_get(tether, connector, case, 'proxy')),
                    fmt_time(_get(peer, connector, case, 'proxy')),
                    fmt_time(res_t),
                    fmt_time(res_p),
                    ratio(res_t, res_p),
                    fmt_time(_get(tether, connector, case, 'touch')),
                ],
            )
    labels = {c: info['label'] for c, info in tether['result'].items()}
    if peer is not None:
        labels.update({f'peer {c}': info['label'] for c, info in peer['result'].items()})
    md = print_table('Cross-process round trip (medians; t/p = tether/peer)', columns, rows)
    write_json(
        name, {'redis_port': port, 'tether': tether, 'peer': peer, 'connectors': labels}, md
    )


if __name__ == '__main__':
    main()
