"""Library-neutral measurement loops, run once per library in its own interpreter.

This file is executed as a script by tether's ``.venv`` python (backend ``tether``) and by
the peer virtual environment's python (backend ``peer``), so both libraries are measured
by the same code with the same sizes and repeats. It needs only the standard library and
NumPy (pandas for one serializer case); it imports no library itself: the backend module
(``benchmarks/_tether_backend.py`` or ``benchmarks/peer/proxystore_backend.py``) does.

Usage (the ``bench_*.py`` drivers run this; you normally do not)::

    python benchmarks/_harness.py --backend tether roundtrip --quick

It prints one JSON document on its last line of stdout.
"""

from __future__ import annotations

import argparse
import gc
import importlib.util
import json
import os
import pickle
import struct
import subprocess
import sys
import time
import uuid
from typing import Any

import numpy as np

from _common import per_call, repeat, summary

HERE = os.path.dirname(os.path.abspath(__file__))
BACKENDS = {
    'tether': os.path.join(HERE, '_tether_backend.py'),
    'peer': os.path.join(HERE, 'peer', 'proxystore_backend.py'),
    'raw': os.path.join(HERE, '_raw_redis_backend.py'),
}
SIZES = {'1KB': 10**3, '100KB': 10**5, '1MB': 10**6, '10MB': 10**7, '100MB': 10**8}
_LEN = struct.Struct('<Q')


def load_backend(name: str) -> Any:
    """Import a backend module by its name in ``BACKENDS``."""
    spec = importlib.util.spec_from_file_location(f'_bench_backend_{name}', BACKENDS[name])
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def make_payload(kind: str, nbytes: int) -> Any:
    """Bytes or a float64 array of ``nbytes`` bytes (random, so nothing compresses)."""
    rng = np.random.default_rng(nbytes)
    arr = rng.random(nbytes // 8)
    return arr.tobytes() if kind == 'bytes' else arr


def touch(obj: Any) -> float:
    """Read every byte of ``obj`` (bytes or array); return a checksum."""
    if isinstance(obj, np.ndarray):
        return float(obj.view(np.uint64).sum(dtype=np.uint64))
    return float(np.frombuffer(obj, dtype=np.uint64).sum(dtype=np.uint64))


# Framed pickles over pipes -------------------------------------------------------------


def send(stream: Any, msg: Any) -> None:
    data = pickle.dumps(msg, protocol=5)
    stream.write(_LEN.pack(len(data)))
    stream.write(data)
    stream.flush()


def recv(stream: Any) -> Any:
    head = stream.read(_LEN.size)
    if len(head) < _LEN.size:
        raise EOFError('peer process closed its pipe')
    (n,) = _LEN.unpack(head)
    return pickle.loads(stream.read(n))


class Consumer:
    """A long-lived consumer process (same interpreter, same backend)."""

    def __init__(self, backend: str) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, os.path.abspath(__file__), '--backend', backend, 'consumer'],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
        )

    def send(self, msg: Any) -> None:
        send(self.proc.stdin, msg)

    def recv(self) -> Any:
        return recv(self.proc.stdout)

    def close(self) -> None:
        try:
            self.send(('quit',))
            self.proc.wait(timeout=30)
        except Exception:
            self.proc.kill()
            self.proc.wait()


def consumer_main(backend: Any) -> None:
    """Resolve proxies sent on stdin; reply on stdout."""
    inp, out = sys.stdin.buffer, sys.stdout.buffer
    sys.stdout = sys.stderr  # nothing else may write to the reply pipe
    count = 0
    while True:
        msg = recv(inp)
        op = msg[0]
        if op == 'quit':
            return
        if op == 'rt':
            t0 = time.perf_counter()
            proxy = pickle.loads(msg[1])
            obj = backend.resolve(proxy)
            t1 = time.perf_counter()
            check = touch(obj)
            t2 = time.perf_counter()
            send(out, (t1 - t0, t2 - t1, check))
        elif op == 'tp':
            obj = backend.resolve(pickle.loads(msg[1]))
            count += len(obj)
        elif op == 'tpb':
            objs = backend.resolve_batch([pickle.loads(p) for p in msg[1]])
            count += sum(len(o) for o in objs)
        elif op == 'tp_end':
            send(out, count)
            count = 0


# Benchmarks ------------------------------------------------------------------------------


def bench_roundtrip(backend: Any, backend_name: str, quick: bool) -> dict[str, Any]:
    """Producer proxies; a long-lived consumer resolves, touches all data, replies."""
    results: dict[str, Any] = {}
    only = os.environ.get('BENCH_CONNECTORS')
    for connector in only.split(',') if only else ('redis', 'file', 'shm'):
        store = backend.make_store(connector, f'rt{uuid.uuid4().hex[:6]}')
        results[connector] = {'label': backend.connector_label(connector), 'cases': {}}
        consumer = Consumer(backend_name)
        try:
            for kind in ('bytes', 'numpy'):
                for size_name, nbytes in SIZES.items():
                    obj = make_payload(kind, nbytes)
                    expected = touch(obj)
                    if quick:
                        repeats = 3
                    else:
                        repeats = 5 if nbytes >= 10**8 else 9 if nbytes >= 10**7 else 15
                    e2e, put, res, tch = [], [], [], []
                    for i in range(repeats + 1):
                        gc.collect()
                        t0 = time.perf_counter()
                        proxy = backend.proxy(store, obj)
                        t1 = time.perf_counter()
                        consumer.send(('rt', pickle.dumps(proxy)))
                        t_res, t_touch, check = consumer.recv()
                        t2 = time.perf_counter()
                        backend.evict(store, proxy)
                        if check != expected:
                            raise RuntimeError(f'{backend_name} {connector}: data mismatch')
                        if i == 0:
                            continue  # warm-up
                        e2e.append(t2 - t0)
                        put.append(t1 - t0)
                        res.append(t_res)
                        tch.append(t_touch)
                    results[connector]['cases'][f'{kind}/{size_name}'] = {
                        'end_to_end': summary(e2e),
                        'proxy': summary(put),
                        'resolve': summary(res),
                        'touch': summary(tch),
                    }
                    del obj
        finally:
            consumer.close()
            backend.close_store(store)
    return results


def bench_serialize(backend: Any, quick: bool) -> dict[str, Any]:
    """serialize+deserialize of large objects, beside plain pickle and one memcpy."""
    import pandas as pd

    repeats = 5 if quick else 11
    rng = np.random.default_rng(0)
    cases: dict[str, Any] = {
        'numpy 100MB': rng.random(10**8 // 8),
        'bytes 100MB': rng.random(10**8 // 8).tobytes(),
        'pandas 1e6x10': pd.DataFrame(
            rng.random((10**6, 10)), columns=[f'c{i}' for i in range(10)]
        ),
        'dict 100k str->int': {f'key-{i}': i for i in range(100_000)},
    }
    out: dict[str, Any] = {}
    for name, obj in cases.items():
        ser = repeat(lambda obj=obj: backend.serialize(obj), repeats)
        data = backend.serialize(obj)
        de = repeat(lambda data=data: backend.deserialize(data), repeats)
        both = repeat(lambda obj=obj: backend.deserialize(backend.serialize(obj)), repeats)
        back = backend.deserialize(data)
        _check_equal(obj, back, name)
        pick = repeat(lambda obj=obj: pickle.loads(pickle.dumps(obj, protocol=5)), repeats)
        transport = getattr(backend, 'serialize_transport', None)
        if transport is not None:
            _check_equal(obj, transport(obj), name)
            entry_transport = repeat(lambda obj=obj, fn=transport: fn(obj), repeats)
        entry = {
            'serialize': ser,
            'deserialize': de,
            'roundtrip': both,
            'pickle_roundtrip': pick,
            'size': len(memoryview(data).cast('B')),
        }
        if transport is not None:
            entry['transport_roundtrip'] = entry_transport
        if isinstance(obj, np.ndarray | bytes):
            src = np.frombuffer(obj, dtype=np.uint8) if isinstance(obj, bytes) else obj
            entry['memcpy'] = repeat(lambda src=src: src.copy(), repeats)
            dst = np.empty_like(src)
            entry['memcpy_prealloc'] = repeat(
                lambda src=src, dst=dst: np.copyto(dst, src),
                repeats,
            )
        out[name] = entry
        del data, back
    return out


def _check_equal(a: Any, b: Any, name: str) -> None:
    if isinstance(a, np.ndarray):
        ok = bool(np.array_equal(a, b))
    elif hasattr(a, 'equals'):
        ok = bool(a.equals(b))
    else:
        ok = a == b
    if not ok:
        raise RuntimeError(f'serializer round trip changed {name}')


class Thing:
    """A plain object for attribute and method timings."""

    def __init__(self) -> None:
        self.value = 42

    def method(self) -> int:
        return self.value


def bench_overhead(backend: Any, quick: bool) -> dict[str, Any]:
    """Pickled proxy size, attribute/method cost on a resolved proxy, isinstance."""
    number = 20_000 if quick else 200_000
    repeats = 5 if quick else 9
    store = backend.make_store('redis', f'ov{uuid.uuid4().hex[:6]}')
    try:
        thing = Thing()
        proxy = backend.proxy(store, thing)
        size = len(pickle.dumps(proxy))
        other = backend.proxy(store, b'x' * 1000)
        size_bytes_obj = len(pickle.dumps(other))
        backend.evict(store, other)
        # The same with a typical configuration: a store named 'bench', default prefix.
        typical = backend.make_store('redis', 'unused', typical=True)
        try:
            other = backend.proxy(typical, b'x' * 1000)
            size_typical = len(pickle.dumps(other))
            backend.evict(typical, other)
        finally:
            backend.close_store(typical, clear=False)
        resolved = pickle.loads(pickle.dumps(proxy))
        backend.resolve(resolved)
        bare = Thing()
        out: dict[str, Any] = {
            'pickled_size_thing': size,
            'pickled_size_bytes': size_bytes_obj,
            'pickled_size_typical': size_typical,
            'attr_bare': per_call(lambda: bare.value, number, repeats),
            'attr_proxy': per_call(lambda: resolved.value, number, repeats),
            'method_bare': per_call(lambda: bare.method(), number, repeats),  # noqa: PLW0108
            'method_proxy': per_call(lambda: resolved.method(), number, repeats),  # noqa: PLW0108
        }
        unresolved = pickle.loads(pickle.dumps(proxy))
        first_t0 = time.perf_counter()
        first = isinstance(unresolved, Thing)
        first_time = time.perf_counter() - first_t0
        out['isinstance_first_call'] = first_time
        out['isinstance_resolved_it'] = bool(backend.is_resolved(unresolved))
        out['isinstance_correct'] = first
        fresh = pickle.loads(pickle.dumps(proxy))
        isinstance(fresh, Thing)
        out['isinstance_unresolved'] = per_call(lambda: isinstance(fresh, Thing), number, repeats)
        out['isinstance_bare'] = per_call(lambda: isinstance(bare, Thing), number, repeats)
        backend.evict(store, proxy)
    finally:
        backend.close_store(store)
    return out


def bench_throughput(backend: Any, backend_name: str, quick: bool) -> dict[str, Any]:
    """proxy+resolve of N objects of 100 KB through Redis with 1 and 2 consumers."""
    n = 500 if quick else 2000
    runs = 3 if quick else 5
    obj = make_payload('bytes', 10**5)
    out: dict[str, Any] = {'objects': n, 'object_size': 10**5}
    for n_consumers in (1, 2):
        store = backend.make_store('redis', f'tp{uuid.uuid4().hex[:6]}')
        consumers = [Consumer(backend_name) for _ in range(n_consumers)]
        try:
            for c in consumers:  # warm up: connection, store rebuilt from the config
                p = backend.proxy(store, obj)
                c.send(('tp', pickle.dumps(p)))
                c.send(('tp_end',))
                c.recv()
                backend.evict(store, p)
            samples = []
            for _ in range(runs):
                proxies = []
                gc.collect()
                t0 = time.perf_counter()
                for i in range(n):
                    p = backend.proxy(store, obj)
                    proxies.append(p)
                    consumers[i % n_consumers].send(('tp', pickle.dumps(p)))
                for c in consumers:
                    c.send(('tp_end',))
                total = sum(c.recv() for c in consumers)
                elapsed = time.perf_counter() - t0
                if total != n * len(obj):
                    raise RuntimeError(f'{backend_name}: consumers resolved {total} bytes')
                samples.append(elapsed)
                backend.evict_many(store, proxies)
            s = summary(samples)
            s['objects_per_s'] = n / s['median']
            out[f'{n_consumers}_consumers'] = s
        finally:
            for c in consumers:
                c.close()
            backend.close_store(store)
    return out


def bench_throughput_batch(backend: Any, backend_name: str, quick: bool) -> dict[str, Any]:
    """Batches of 100 KB objects through Redis: the producer proxies a batch at once
    (``proxy_batch``) and sends it to a consumer, which resolves it at once
    (``resolve_batch``); 1 and 2 consumers, batches of ``BENCH_BATCHES`` (8,64)."""
    n = 512 if quick else 2048
    runs = 3 if quick else 5
    obj = make_payload('bytes', 10**5)
    batches = [int(b) for b in os.environ.get('BENCH_BATCHES', '8,64').split(',')]
    out: dict[str, Any] = {'objects': n, 'object_size': 10**5, 'batches': batches}
    for size in batches:
        for n_consumers in (1, 2):
            store = backend.make_store('redis', f'tb{uuid.uuid4().hex[:6]}')
            consumers = [Consumer(backend_name) for _ in range(n_consumers)]
            try:
                for c in consumers:  # warm up: connection, store rebuilt from the config
                    warm = backend.proxy_batch(store, [obj] * size)
                    c.send(('tpb', [pickle.dumps(p) for p in warm]))
                    c.send(('tp_end',))
                    c.recv()
                    backend.evict_many(store, warm)
                samples = []
                for _ in range(runs):
                    proxies: list[Any] = []
                    gc.collect()
                    t0 = time.perf_counter()
                    for i, start in enumerate(range(0, n, size)):
                        batch = backend.proxy_batch(store, [obj] * min(size, n - start))
                        proxies.extend(batch)
                        consumers[i % n_consumers].send(('tpb', [pickle.dumps(p) for p in batch]))
                    for c in consumers:
                        c.send(('tp_end',))
                    total = sum(c.recv() for c in consumers)
                    elapsed = time.perf_counter() - t0
                    if total != n * len(obj):
                        raise RuntimeError(f'{backend_name}: consumers resolved {total} bytes')
                    samples.append(elapsed)
                    backend.evict_many(store, proxies)
                s = summary(samples)
                s['objects_per_s'] = n / s['median']
                out[f'b{size}_{n_consumers}_consumers'] = s
            finally:
                for c in consumers:
                    c.close()
                backend.close_store(store)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument('--backend', choices=sorted(BACKENDS), required=True)
    parser.add_argument(
        'bench',
        choices=[
            'consumer',
            'roundtrip',
            'serialize',
            'overhead',
            'throughput',
            'throughput_batch',
        ],
    )
    parser.add_argument('--quick', action='store_true')
    args = parser.parse_args()
    backend = load_backend(args.backend)
    if args.bench == 'consumer':
        consumer_main(backend)
        return
    if args.bench == 'roundtrip':
        result = bench_roundtrip(backend, args.backend, args.quick)
    elif args.bench == 'serialize':
        result = bench_serialize(backend, args.quick)
    elif args.bench == 'overhead':
        result = bench_overhead(backend, args.quick)
    elif args.bench == 'throughput_batch':
        result = bench_throughput_batch(backend, args.backend, args.quick)
    else:
        result = bench_throughput(backend, args.backend, args.quick)
    doc = {'library': backend.LIBRARY, 'version': backend.version(), 'result': result}
    print(json.dumps(doc))


if __name__ == '__main__':
    main()
