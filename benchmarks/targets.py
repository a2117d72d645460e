"""Compare the latest results in ``benchmarks/results/`` with the foundation targets.

    .venv/bin/python benchmarks/targets.py      (after benchmarks/run_all.sh)

Prints the target-vs-measured table (and writes it to ``results/targets.md``).
"""

from __future__ import annotations

import json
import os
from typing import Any

from _common import RESULTS, fmt_time, print_table


def _load(name: str) -> dict[str, Any] | None:
    path = os.path.join(RESULTS, f'{name}.json')
    if not os.path.exists(path):
        return None
    with open(path) as f:
        doc: dict[str, Any] = json.load(f)
    return doc


def _med(side: dict[str, Any] | None, *path: str) -> float | None:
    if side is None:
        return None
    node: Any = side['result']
    for p in path:
        node = node[p]
    return float(node['median']) if isinstance(node, dict) else float(node)


def _row(
    target: str,
    measured: str,
    value: float | None,
    ok: bool | None,
) -> list[str]:
    verdict = '-' if ok is None else 'met' if ok else 'MISSED'
    return [target, measured, '-' if value is None else f'{value:.2f}', verdict]


def main() -> None:
    rows: list[list[str]] = []
    rt = _load('roundtrip')
    if rt is not None:
        for size, need, bracket in (('100MB', 3.0, '1.3 s'), ('10MB', 1.5, '33 ms')):
            t = _med(rt['tether'], 'redis', 'cases', f'numpy/{size}', 'end_to_end')
            p = _med(rt['peer'], 'redis', 'cases', f'numpy/{size}', 'end_to_end')
            speed = None if t is None or p is None else p / t
            rows.append(
                _row(
                    f'Redis round trip, NumPy {size}: >= {need}x faster than peer [{bracket}]',
                    f'tether {fmt_time(t)}, peer {fmt_time(p)}; speed-up (x)',
                    speed,
                    None if speed is None else speed >= need,
                ),
            )
        t = _med(rt['tether'], 'shm', 'cases', 'numpy/100MB', 'resolve')
        touch = _med(rt['tether'], 'shm', 'cases', 'numpy/100MB', 'touch')
        rows.append(
            _row(
                'shared memory: resolve NumPy 100MB < 5 ms',
                f'resolve {fmt_time(t)} (then reading it all: {fmt_time(touch)}); ms',
                None if t is None else t * 1e3,
                None if t is None else t < 5e-3,
            ),
        )
    ser = _load('serialize')
    if ser is not None:
        t = _med(ser['tether'], 'numpy 100MB', 'roundtrip')
        p = _med(ser['peer'], 'numpy 100MB', 'roundtrip')
        memcpy = _med(ser['tether'], 'numpy 100MB', 'memcpy')
        speed = None if t is None or p is None else p / t
        rows.append(
            _row(
                'serialize+deserialize NumPy 100MB: >= 3x faster than peer [130 ms]',
                f'tether {fmt_time(t)}, peer {fmt_time(p)}; speed-up (x)',
                speed,
                None if speed is None else speed >= 3,
            ),
        )
        rel = None if t is None or memcpy is None else t / memcpy
        rows.append(
            _row(
                '... and within 2x of one memcpy',
                f'memcpy {fmt_time(memcpy)}; tether / memcpy',
                rel,
                None if rel is None else rel <= 2,
            ),
        )
    ov = _load('proxy_overhead')
    if ov is not None:
        size = _med(ov['tether'], 'pickled_size_bytes')
        typical = _med(ov['tether'], 'pickled_size_typical')
        peer_size = _med(ov['peer'], 'pickled_size_bytes')
        rows.append(
            _row(
                'pickled Redis proxy < 300 bytes [peer ~750]',
                f"store 'bench', default key prefix; peer {peer_size or 0:.0f}; tether with "
                f"the benchmark's 12-character prefix {size or 0:.0f}; bytes",
                typical,
                None if typical is None else typical < 300,
            ),
        )
        t = _med(ov['tether'], 'attr_proxy')
        p = _med(ov['peer'], 'attr_proxy')
        rel = None if t is None or p is None else t / p
        rows.append(
            _row(
                'attribute access on a resolved proxy <= 1/3 of peer [0.5 us]',
                f'tether {fmt_time(t)}, peer {fmt_time(p)}; tether / peer',
                rel,
                None if rel is None else rel <= 1 / 3,
            ),
        )
    tp = _load('throughput')
    if tp is not None:
        for n in (1, 2):
            t = _med(tp['tether'], f'{n}_consumers', 'objects_per_s')
            p = _med(tp['peer'], f'{n}_consumers', 'objects_per_s')
            speed = None if t is None or p is None else t / p
            rows.append(
                _row(
                    f'100 KB objects through Redis, {n} consumer(s): >= 2x peer objects/s '
                    '[1,900/s]',
                    f'tether {t or 0:,.0f}/s, peer {p or 0:,.0f}/s; tether / peer',
                    speed,
                    None if speed is None else speed >= 2,
                ),
            )
    md = print_table('Foundation targets', ['target', 'measured', 'value', 'verdict'], rows)
    with open(os.path.join(RESULTS, 'targets.md'), 'w') as f:
        f.write(md + '\n')


if __name__ == '__main__':
    main()
