"""Serializer: serialize+deserialize of large objects, tether vs proxystore vs pickle.

Cases: a 100 MB float64 NumPy array, 100 MB of bytes, a pandas frame of 1e6 rows x 10
float columns, a dict of 100k str -> int. "memcpy" is one copy of the data into a new
buffer (``ndarray.copy()``), the reference for the "within 2x of one memcpy" target.
"store path" is what a tether Store does: ``serialize_parts`` (no copy), one copy into the
channel's buffer, ``deserialize`` of that writable buffer (no copy).

    .venv/bin/python benchmarks/bench_serialize.py [--quick] [--no-peer]
"""

from __future__ import annotations

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


def _m(doc: dict[str, Any] | None, case: str, what: str) -> float | None:
    if doc is None or what not in doc['result'][case]:
        return None
    value: float = doc['result'][case][what]['median']
    return value


def main() -> None:
    args = parse_args(__doc__)
    with redis_server(args.shared_redis) as port:
        tether = run_side('tether', 'serialize', args.quick)
        peer = None if args.no_peer else run_side('peer', 'serialize', args.quick)
    columns = [
        'case',
        'ser tether',
        'deser tether',
        'ser+deser tether',
        'ser+deser peer',
        't/p',
        'store path tether',
        'store path / memcpy',
        'pickle',
        't/pickle',
        'memcpy',
        't/memcpy',
        'size tether',
    ]
    rows = []
    for case in tether['result']:
        both_t = _m(tether, case, 'roundtrip')
        both_p = _m(peer, case, 'roundtrip')
        pick = _m(tether, case, 'pickle_roundtrip')
        memcpy = _m(tether, case, 'memcpy')
        rows.append(
            [
                case,
                fmt_time(_m(tether, case, 'serialize')),
                fmt_time(_m(tether, case, 'deserialize')),
                fmt_time(both_t),
                fmt_time(both_p),
                ratio(both_t, both_p),
                fmt_time(_m(tether, case, 'transport_roundtrip')),
                ratio(_m(tether, case, 'transport_roundtrip'), memcpy),
                fmt_time(pick),
                ratio(both_t, pick),
                fmt_time(memcpy),
                ratio(both_t, memcpy),
                f'{tether["result"][case]["size"]:,}',
            ],
        )
    md = print_table('Serializer round trip (medians; t/p = tether/peer)', columns, rows)
    write_json('serialize', {'redis_port': port, 'tether': tether, 'peer': peer}, md)


if __name__ == '__main__':
    main()
