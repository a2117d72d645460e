"""Proxy overhead: pickled size, attribute access / method call, isinstance.

The proxies come from a Redis store (tether: ``RedisConnector`` with an 11-character key
prefix; proxystore: its ``RedisConnector``). Attribute access and method calls are on a
resolved proxy of a small object, beside the bare object; ``isinstance`` is on a proxy
that was unpickled and never resolved (and the table says whether it resolved it).

    .venv/bin/python benchmarks/bench_proxy_overhead.py [--quick] [--no-peer]
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


def _v(doc: dict[str, Any] | None, what: str) -> Any:
    if doc is None:
        return None
    value = doc['result'][what]
    return value['median'] if isinstance(value, dict) else value


def main() -> None:
    args = parse_args(__doc__)
    # Nanosecond timings drift with the load of the (shared) machine: run the two sides
    # alternately, several rounds, and take medians over all their samples.
    rounds = 1 if args.quick else 3
    with redis_server(args.shared_redis) as port:
        tether_runs, peer_runs = [], []
        for _ in range(rounds):
            tether_runs.append(run_side('tether', 'overhead', args.quick))
            if not args.no_peer:
                peer_runs.append(run_side('peer', 'overhead', args.quick))
    tether = merge_runs(tether_runs)
    peer = merge_runs(peer_runs) if peer_runs else None
    rows = []
    for label, key in (
        ('pickled proxy size (bytes), object', 'pickled_size_thing'),
        ('pickled proxy size (bytes), bytes', 'pickled_size_bytes'),
        ("pickled proxy size (bytes), store 'bench', default prefix", 'pickled_size_typical'),
    ):
        t, p = _v(tether, key), _v(peer, key)
        rows.append([label, str(t), '-' if p is None else str(p), ratio(t, p)])
    for label, key in (
        ('attribute access, bare object', 'attr_bare'),
        ('attribute access, resolved proxy', 'attr_proxy'),
        ('method call, bare object', 'method_bare'),
        ('method call, resolved proxy', 'method_proxy'),
        ('isinstance, bare object', 'isinstance_bare'),
        ('isinstance, unresolved proxy', 'isinstance_unresolved'),
    ):
        t, p = _v(tether, key), _v(peer, key)
        rows.append([label, fmt_time(t), fmt_time(p), ratio(t, p)])
    for label, key in (('isinstance resolved the proxy?', 'isinstance_resolved_it'),):
        t, p = _v(tether, key), _v(peer, key)
        rows.append([label, str(t), str(p), ''])
    md = print_table(
        'Proxy overhead (medians; t/p = tether/peer)', ['', 'tether', 'peer', 't/p'], rows
    )
    write_json('proxy_overhead', {'redis_port': port, 'tether': tether, 'peer': peer}, md)


if __name__ == '__main__':
    main()
