"""Function service: where a 10 MB shared-memory proxy's round trip spends its time.

The shared-memory column of ``bench_faas_payload.py`` (1 KB against 10 MB), measured so
that a busy machine disturbs it less: the two sizes alternate within one run, and each
task returns the times around its ``len()`` (which resolves the proxy) and the page
faults it took, so that every round trip splits into the put, the way to the worker,
the worker's resolve and the way back (``time.perf_counter`` is one clock for all the
processes of a machine). Prints medians; writes no results file.

The put is the time until ``Store.proxy`` returns: a 10 MB ``bytes`` argument is copied
into its segment in the background (see docs/connectors/shared-memory.md, "Background
writes"), so that copy runs during the way to the worker, and a worker that comes first
waits for it in its resolve.

    .venv/bin/python benchmarks/bench_faas_shm_split.py [--quick]
"""

from __future__ import annotations

import os
import statistics
import sys
import time
import uuid
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from _common import parse_args
from _faas_stack import dev_stack

SIZES = [1_000, 10_000_000]
LEGS = ['put', 'to worker', 'resolve', 'back', 'round trip']


def probe(data: Any) -> tuple[int, float, float, int]:
    import resource
    import time

    faults = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    start = time.perf_counter()
    n = len(data)
    end = time.perf_counter()
    return n, start, end, resource.getrusage(resource.RUSAGE_SELF).ru_minflt - faults


def main() -> None:
    args = parse_args(__doc__)
    repeats = 11 if args.quick else 31
    from tether.connectors.shared_memory import SharedMemoryConnector, cleanup
    from tether.faas import Executor
    from tether.store import Store

    namespace = f'tfs{uuid.uuid4().hex[:8]}'
    samples: dict[int, list[tuple[float, ...]]] = {size: [] for size in SIZES}
    load_before = os.getloadavg()[0]
    with dev_stack(max_workers=2) as s:
        with (
            Store('faas-split-shm', SharedMemoryConnector(namespace, clear=True)) as shm,
            Executor(s['endpoint_id'], service_url=s['url'], token=s['token']) as ex,
        ):
            datas = {size: os.urandom(size) for size in SIZES}
            for data in datas.values():
                for _ in range(4):  # both workers, both sizes: first touches untimed
                    ex.submit(probe, shm.proxy(data, evict=True)).result()
            for _ in range(repeats):
                for size, data in datas.items():
                    t0 = time.perf_counter()
                    proxy = shm.proxy(data, evict=True)
                    t1 = time.perf_counter()
                    n, w0, w1, faults = ex.submit(probe, proxy).result()
                    t2 = time.perf_counter()
                    assert n == size
                    samples[size].append((t1 - t0, w0 - t1, w1 - w0, t2 - w1, t2 - t0, faults))
        cleanup(namespace)
    for size in SIZES:
        columns = list(zip(*samples[size], strict=True))
        legs = '  '.join(
            f'{name} {statistics.median(c) * 1e3:.2f}'
            for name, c in zip(LEGS, columns, strict=False)
        )
        print(f'{size:>10,} B (ms): {legs}  page faults {statistics.median(columns[-1]):.0f}')
    small, large = (statistics.median(s[4] for s in samples[size]) for size in SIZES)
    print(
        f'10 MB / 1 KB: {large / small:.2f}x  ({repeats} samples each; load average '
        f'before {load_before:.1f}, after {os.getloadavg()[0]:.1f})'
    )


if __name__ == '__main__':
    main()
