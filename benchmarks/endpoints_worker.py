"""Client side of the endpoint benchmark: runs inside site-a's namespace.

Standalone (standard library plus the backend's client), so that one script measures
tether's endpoints (tether's venv), the published ProxyStore endpoints (the peer venv)
and Redis over an SSH tunnel (redis-py), with the same sizes, repetitions and budgets.

* ``remote``: per size, ``set(key at the remote site)`` then ``get`` of it, then an
  untimed evict; the client's endpoint forwards both to the remote endpoint (figure
  3.14). For Redis, SET/GET/DEL through the tunnel.
* ``local``: 1-8 client processes, each its own connector, set/get/evict against their
  own endpoint for a fixed time per (size, clients) cell (figure 3.13).

Prints one JSON document on stdout.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import statistics
import sys
import time
import uuid
from typing import Any

SIZES = [1_000, 100_000, 1_000_000, 10_000_000, 100_000_000]
LABEL = {
    1_000: '1KB',
    100_000: '100KB',
    1_000_000: '1MB',
    10_000_000: '10MB',
    100_000_000: '100MB',
}
# size: (most timed repetitions, warm-up repetitions, seconds for the row)
REPS = {
    1_000: (30, 3, 15),
    100_000: (20, 2, 20),
    1_000_000: (10, 1, 30),
    10_000_000: (5, 1, 60),
    100_000_000: (3, 1, 150),
}


class Backend:
    def __init__(self, kind: str, local: str, remote: str, redis_port: int) -> None:
        self.kind = kind
        self.local = local
        self.remote = remote
        if kind == 'tether':
            from tether.connectors.endpoint import EndpointConnector, EndpointKey

            self.conn: Any = EndpointConnector([local], timeout=300)
            self.key_cls: Any = EndpointKey
        elif kind == 'peer':
            from proxystore.connectors.endpoint import EndpointConnector, EndpointKey

            self.conn = EndpointConnector([local, remote])
            self.key_cls = EndpointKey
        else:
            import redis

            self.conn = redis.Redis(host='127.0.0.1', port=redis_port, socket_timeout=300)

    def key(self, where: str) -> Any:
        if self.kind == 'redis':
            return f'bench-{uuid.uuid4().hex}'
        return self.key_cls(str(uuid.uuid4()), where)

    def set(self, key: Any, data: bytes) -> None:
        self.conn.set(key, data)

    def get(self, key: Any) -> Any:
        return self.conn.get(key)

    def evict(self, key: Any) -> None:
        if self.kind == 'redis':
            self.conn.delete(key)
        else:
            self.conn.evict(key)

    def close(self) -> None:
        self.conn.close()


def med(xs: list[float]) -> float | None:
    return statistics.median(xs) if xs else None


def timed_pair(b: Backend, key: Any, data: bytes) -> tuple[float, float, Any]:
    """``set`` then ``get`` of ``key`` (timed, seconds each), then an untimed evict."""
    t0 = time.perf_counter()
    b.set(key, data)
    t1 = time.perf_counter()
    got = b.get(key)
    t2 = time.perf_counter()
    b.evict(key)
    return t1 - t0, t2 - t1, got


def remote_phase(b: Backend, sizes: list[int], budget: float) -> dict[str, Any]:
    first: dict[str, Any] = {}
    key = b.key(b.remote)
    t0 = time.perf_counter()
    try:
        b.set(key, b'x')
        first = {'seconds': time.perf_counter() - t0}
        b.evict(key)
    except Exception as e:
        first = {'error': f'{type(e).__name__}: {e}'[:300]}
        return {'first_op': first, 'rows': {}}
    deadline = time.monotonic() + budget
    rows: dict[str, Any] = {}
    for size in sizes:
        reps, warm, row_budget = REPS[size]
        data = os.urandom(size)
        row: dict[str, Any] = {'size': size, 'set_s': [], 'get_s': [], 'errors': []}
        rows[LABEL[size]] = row
        start = time.monotonic()
        i = 0
        while i < reps + warm:
            now = time.monotonic()
            if i > warm and (now - start > row_budget or now > deadline):
                break
            key = b.key(b.remote)
            try:
                set_s, get_s, got = timed_pair(b, key, data)
            except Exception as e:
                row['errors'].append(f'{type(e).__name__}: {e}'[:300])
                if len(row['errors']) >= 2:
                    break
                i += 1
                continue
            if got is None or len(got) != size:
                row['errors'].append('wrong length')
            if i >= warm:
                row['set_s'].append(set_s)
                row['get_s'].append(get_s)
            i += 1
        print(
            f'  {b.kind} remote {LABEL[size]:>5}: set {(med(row["set_s"]) or 0) * 1e3:9.2f} ms'
            f'  get {(med(row["get_s"]) or 0) * 1e3:9.2f} ms  n={len(row["set_s"])}'
            f' errors={len(row["errors"])}',
            file=sys.stderr,
            flush=True,
        )
    return {'first_op': first, 'rows': rows}


def interleaved_phase(local: str, remote: str, port: int, sizes: list[int], reps: int) -> Any:
    """tether's direct path and Redis over SSH, one operation of each in turn.

    Both run in the same minutes through the same links, so drifts of the emulated link
    and of the machine's load fall on both alike; the order of the two flips on every
    repetition. Per size: ``reps`` timed set/get pairs for each, after two untimed.
    """
    backends = [Backend('tether', local, remote, port), Backend('redis', local, remote, port)]
    rows: dict[str, Any] = {}
    for size in sizes:
        data = os.urandom(size)
        n = reps if size <= 1_000_000 else max(3, reps // 10) if size <= 10_000_000 else 3
        row: dict[str, Any] = {'size': size}
        for b in backends:
            row[b.kind] = {'set_s': [], 'get_s': []}
        for i in range(n + 2):
            for b in backends if i % 2 == 0 else backends[::-1]:
                set_s, get_s, got = timed_pair(b, b.key(remote), data)
                if got is None or len(got) != size:
                    raise RuntimeError(f'{b.kind}: wrong length for {size}')
                if i >= 2:
                    row[b.kind]['set_s'].append(set_s)
                    row[b.kind]['get_s'].append(get_s)
        rows[LABEL[size]] = row
        ms = {
            f'{kind} {op}': (med(row[kind][f'{op}_s']) or 0.0) * 1e3
            for kind in ('tether', 'redis')
            for op in ('set', 'get')
        }
        print(
            f'  interleaved {LABEL[size]:>5}: tether set/get {ms["tether set"]:8.2f} /'
            f' {ms["tether get"]:8.2f} ms, redis+ssh {ms["redis set"]:8.2f} /'
            f' {ms["redis get"]:8.2f} ms  n={n}',
            file=sys.stderr,
            flush=True,
        )
    for b in backends:
        b.close()
    return rows


def _client(args: tuple[str, str, str, int, int, float, float]) -> dict[str, Any]:
    kind, local, remote, port, size, duration, start_at = args
    b = Backend(kind, local, remote, port)
    data = os.urandom(size)
    sets: list[float] = []
    gets: list[float] = []
    errors: list[str] = []
    while time.time() < start_at:
        time.sleep(0.001)
    end = time.perf_counter() + duration
    while time.perf_counter() < end or len(sets) < 2:
        key = b.key(local)
        try:
            t0 = time.perf_counter()
            b.set(key, data)
            t1 = time.perf_counter()
            b.get(key)
            t2 = time.perf_counter()
            b.evict(key)
        except Exception as e:
            errors.append(f'{type(e).__name__}: {e}'[:200])
            if len(errors) > 3:
                break
            continue
        sets.append(t1 - t0)
        gets.append(t2 - t1)
    elapsed = time.perf_counter() - end + duration
    b.close()
    return {'set_s': sets, 'get_s': gets, 'errors': errors, 'elapsed': elapsed}


def local_phase(  # noqa: PLR0917
    kind: str,
    local: str,
    remote: str,
    port: int,
    sizes: list[int],
    clients: list[int],
    duration: float,
) -> dict[str, Any]:
    ctx = mp.get_context('fork')
    rows: dict[str, Any] = {}
    for size in sizes:
        for n in clients:
            start_at = time.time() + 1.0
            with ctx.Pool(n) as pool:
                res = pool.map(
                    _client, [(kind, local, remote, port, size, duration, start_at)] * n
                )
            sets = [x for r in res for x in r['set_s']]
            gets = [x for r in res for x in r['get_s']]
            elapsed = max(r['elapsed'] for r in res)
            row = {
                'size': size,
                'clients': n,
                'set_s': sets,
                'get_s': gets,
                'ops_per_s': (len(sets) + len(gets)) / elapsed,
                'errors': [e for r in res for e in r['errors']],
            }
            rows[f'{LABEL[size]}-c{n}'] = row
            print(
                f'  {kind} local {LABEL[size]:>5} x{n}: set {(med(sets) or 0) * 1e3:8.3f} ms'
                f'  get {(med(gets) or 0) * 1e3:8.3f} ms  {row["ops_per_s"]:8.0f} ops/s',
                file=sys.stderr,
                flush=True,
            )
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument('--backend', choices=['tether', 'peer', 'redis'], required=True)
    ap.add_argument('--local', default='', help='this site endpoint (name or UUID)')
    ap.add_argument('--remote', default='', help='the remote endpoint (UUID)')
    ap.add_argument('--redis-port', type=int, default=16379)
    ap.add_argument('--phase', choices=['remote', 'local', 'interleaved'], default='remote')
    ap.add_argument('--reps', type=int, default=60, help='interleaved: pairs per size')
    ap.add_argument('--sizes', default=','.join(LABEL[s] for s in SIZES))
    ap.add_argument('--clients', default='1,2,4,8')
    ap.add_argument('--duration', type=float, default=1.5)
    ap.add_argument('--budget', type=float, default=300)
    a = ap.parse_args()
    sizes = [s for s in SIZES if LABEL[s] in a.sizes.split(',')]
    out: dict[str, Any] = {'backend': a.backend, 'python': sys.version.split()[0]}
    if a.phase == 'interleaved':
        out['interleaved'] = interleaved_phase(a.local, a.remote, a.redis_port, sizes, a.reps)
    elif a.phase == 'remote':
        b = Backend(a.backend, a.local, a.remote, a.redis_port)
        out.update(remote_phase(b, sizes, a.budget))
        b.close()
    else:
        clients = [int(c) for c in a.clients.split(',')]
        out['local'] = local_phase(
            a.backend, a.local, a.remote, a.redis_port, sizes, clients, a.duration
        )
    print(json.dumps(out))


if __name__ == '__main__':
    main()
