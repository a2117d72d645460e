"""tether's serializer against plain pickle protocol 5 on many small objects.

A dict of 100,000 ``str -> int`` items, serialize + deserialize. Wall clock: the two
alternate for ``--rounds`` rounds in one process (minimum and median printed). Under
``valgrind --tool=callgrind`` with ``--count``, each side runs alone for a fixed number of
round trips, so the instruction totals compare whatever else the machine is doing:

    .venv/bin/python benchmarks/serialize_small.py [--rounds 60]
    valgrind --tool=callgrind --callgrind-out-file=/dev/null \\
        .venv/bin/python benchmarks/serialize_small.py --count pickle|tether|none
"""

from __future__ import annotations

import argparse
import pickle
import time
from collections.abc import Callable
from typing import Any

from tether.serialize import deserialize, serialize

ITEMS = 100_000


def _sides(obj: Any) -> dict[str, Callable[[], Any]]:
    return {
        'pickle 5': lambda: pickle.loads(pickle.dumps(obj, protocol=5)),
        'tether': lambda: deserialize(serialize(obj)),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument('--rounds', type=int, default=60)
    parser.add_argument('--count', choices=['pickle', 'tether', 'none'], default=None)
    args = parser.parse_args()
    obj = {f'key-{i}': i for i in range(ITEMS)}
    sides = _sides(obj)
    if args.count is not None:
        fn = {'pickle': sides['pickle 5'], 'tether': sides['tether']}.get(args.count)
        for _ in range(3 if fn is not None else 0):
            fn()  # type: ignore[misc]
        return
    times: dict[str, list[float]] = {name: [] for name in sides}
    for _ in range(args.rounds):
        for name, fn in sides.items():
            t0 = time.perf_counter()
            fn()
            times[name].append(time.perf_counter() - t0)
    for name, values in times.items():
        values.sort()
        low, mid = values[0] * 1e3, values[len(values) // 2] * 1e3
        print(f'{name:9s} min {low:7.2f} ms  median {mid:7.2f} ms')


if __name__ == '__main__':
    main()
